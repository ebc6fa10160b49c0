package registry

import (
	"slices"
	"strings"
	"time"
)

// ScratchSnapshot builds the current version's snapshot from nothing, the
// way the registry built every snapshot before snapshots were incremental:
// the reference the incremental builder is tested against. It does not
// touch the registry's cached snapshot.
func (r *Registry) ScratchSnapshot() *Snapshot {
	r.mu.RLock()
	s := &Snapshot{Version: r.version, DeltaVersion: r.deltaVersion, Instances: r.instances}
	for name, a := range r.apps {
		var ivs []InstanceView
		for _, l := range a.leases {
			ivs = append(ivs, InstanceView{Instance: l.inst, LastRenewalTimestamp: l.lastRenewal.Load() / int64(time.Millisecond)})
		}
		s.Apps = append(s.Apps, AppView{Name: name, Instances: ivs})
	}
	records := slices.Clone(r.deltas.records())
	r.mu.RUnlock()
	sortAppsByName(s.Apps)
	s.Counts = CountStatuses(s.Apps)
	s.Hashcode = s.Counts.Hashcode()
	latest := map[InstanceKey]int{}
	for i, rec := range records {
		latest[rec.key] = i
	}
	byApp := map[string][]InstanceView{}
	for i, rec := range records {
		if latest[rec.key] == i {
			byApp[rec.key.App] = append(byApp[rec.key.App], InstanceView{Instance: rec.inst, LastRenewalTimestamp: rec.lastRenewal})
		}
	}
	for name, ivs := range byApp {
		s.Delta = append(s.Delta, AppView{Name: name, Instances: ivs})
	}
	sortAppsByName(s.Delta)
	return s
}

func sortAppsByName(apps []AppView) {
	slices.SortFunc(apps, func(a, b AppView) int { return strings.Compare(a.Name, b.Name) })
	for _, app := range apps {
		sortInstances(app.Instances)
	}
}

// SetKeyHash replaces the key index's hash (keyindex.go), so that a test
// can make keys collide. Call it before the first write.
func (r *Registry) SetKeyHash(h func(app, id string) uint64) { r.hashKey = h }

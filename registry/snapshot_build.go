package registry

import (
	"slices"
	"strings"
	"time"
)

// snapBuilder is what the snapshot builder carries from one snapshot to the
// next, so that a new snapshot costs in proportion to what changed since
// the previous one: the number of apps (a slice of small views is copied),
// plus the instances of the changed apps, plus the changed delta records.
// It is owned by whoever holds Registry.snapMu; snapshots hand it on and
// never read it otherwise.
type snapBuilder struct {
	// totals counts the instances of Apps per status (the hashcode).
	totals StatusCounts

	// mirror holds the delta records the builder has seen and not yet seen
	// pruned, oldest first: record number prunedSeen+i is mirror[head+i].
	mirror                 []deltaRecord
	head                   int
	pushedSeen, prunedSeen uint64
	// groups is the reduced delta: app → instance id → latest record.
	groups map[string]map[string]deltaRecord
}

// buildSnapshot builds the snapshot of the current version from the
// previous one. Which apps changed comes from the change stream's ring
// (every visible change is an event naming its app); only those apps' views
// are rebuilt, under the read lock for the copy of their leases and outside
// it for the sort. When the ring no longer holds every event since the
// previous snapshot (more than Config.OutboxSize changes without a reader),
// every app is rebuilt; views whose instances did not change are still
// reused, with their versions. Which delta groups changed comes from the
// delta queue's push and prune counters. The caller holds snapMu.
func (r *Registry) buildSnapshot() *Snapshot {
	prev := r.snap.Load()
	var b *snapBuilder
	if prev != nil {
		b, prev.build = prev.build, nil
	}
	var prevDelta []AppView
	if b != nil {
		prevDelta = prev.Delta
	}

	r.mu.RLock()
	s := &Snapshot{Version: r.version, DeltaVersion: r.deltaVersion, Instances: r.instances}
	changed := map[string]uint64{} // app → Seq of its last change
	full := b == nil || !r.out.changedApps(prev.Version, r.version, changed)
	var fresh []AppView // rebuilt views, unsorted instances
	removed := map[string]bool{}
	if full {
		// The first snapshot names each app's last change while the ring
		// still holds every event since the start (a node's usual case), so
		// an app's first index is the Seq of its own change, as in every
		// later snapshot; otherwise the version of this rebuild.
		var last map[string]uint64
		if b == nil {
			last = map[string]uint64{}
			if !r.out.changedApps(0, r.version, last) {
				last = nil
			}
		}
		fresh = make([]AppView, 0, len(r.apps))
		for name, a := range r.apps {
			v := r.version
			if seq, ok := last[name]; ok {
				v = seq
			}
			fresh = append(fresh, AppView{Name: name, Instances: viewsOf(a.leases), Version: v})
		}
	} else {
		for name, seq := range changed {
			if leases := r.apps[name].all(); len(leases) > 0 {
				fresh = append(fresh, AppView{Name: name, Instances: viewsOf(leases), Version: seq})
			} else {
				removed[name] = true
			}
		}
	}
	q := &r.deltas
	var newRecs []deltaRecord
	var pruned uint64
	if b == nil {
		b = &snapBuilder{groups: map[string]map[string]deltaRecord{}, totals: StatusCounts{}}
		b.pushedSeen, b.prunedSeen = q.pruned, q.pruned
	}
	pruned = q.pruned
	from := max(b.pushedSeen, q.pruned) - q.pruned
	newRecs = slices.Clone(q.records()[from:])
	b.pushedSeen = q.pushed
	r.mu.RUnlock()

	for i := range fresh {
		sortInstances(fresh[i].Instances)
		fresh[i].counts = CountStatuses(fresh[i : i+1])
	}
	if full {
		s.Apps = fresh
		slices.SortFunc(s.Apps, func(a, b AppView) int { return strings.Compare(a.Name, b.Name) })
		b.totals = StatusCounts{}
		var old map[string]AppView
		if prev != nil {
			old = make(map[string]AppView, len(prev.Apps))
			for _, app := range prev.Apps {
				old[app.Name] = app
			}
		}
		for i, app := range s.Apps {
			if o, ok := old[app.Name]; ok && sameInstances(o.Instances, app.Instances) {
				s.Apps[i] = o
			}
			b.totals.Merge(s.Apps[i].counts)
		}
	} else {
		s.Apps = mergeApps(prev.Apps, fresh, removed, b.totals)
	}
	if !full && len(s.Apps) == len(prev.Apps) && len(removed) == 0 {
		s.appIndex = prev.appIndex // same names at the same places
	} else {
		s.appIndex = make(map[string]int, len(s.Apps))
		for i, app := range s.Apps {
			s.appIndex[app.Name] = i
		}
	}
	s.Counts = b.totals.Clone()
	s.Hashcode = s.Counts.Hashcode()

	s.Delta = b.updateDelta(prevDelta, newRecs, pruned, s.DeltaVersion, prevDelta == nil)
	s.build = b
	return s
}

// viewsOf copies an app's leases into views; the caller holds mu.
func viewsOf(leases []*lease) []InstanceView {
	views := make([]InstanceView, 0, len(leases))
	for _, l := range leases {
		views = append(views, InstanceView{Instance: l.inst, LastRenewalTimestamp: l.lastRenewal.Load() / int64(time.Millisecond)})
	}
	return views
}

func sortInstances(ivs []InstanceView) {
	slices.SortFunc(ivs, func(a, b InstanceView) int { return strings.Compare(a.ID(), b.ID()) })
}

// sameInstances reports whether two sorted views hold the same instances
// (the same immutable pointers).
func sameInstances(a, b []InstanceView) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Instance != b[i].Instance {
			return false
		}
	}
	return true
}

// mergeApps returns prev with the fresh views put in (replacing the old
// view of their app, or inserted in name order) and the removed apps taken
// out, adjusting totals. prev is not modified.
func mergeApps(prev, fresh []AppView, removed map[string]bool, totals StatusCounts) []AppView {
	slices.SortFunc(fresh, func(a, b AppView) int { return strings.Compare(a.Name, b.Name) })
	out := make([]AppView, 0, len(prev)+len(fresh))
	j := 0
	for _, app := range prev {
		for j < len(fresh) && fresh[j].Name < app.Name {
			out = append(out, fresh[j])
			totals.Merge(fresh[j].counts)
			j++
		}
		switch {
		case j < len(fresh) && fresh[j].Name == app.Name:
			totals.Subtract(app.counts)
			totals.Merge(fresh[j].counts)
			out = append(out, fresh[j])
			j++
		case removed[app.Name]:
			totals.Subtract(app.counts)
		default:
			out = append(out, app)
		}
	}
	for ; j < len(fresh); j++ {
		out = append(out, fresh[j])
		totals.Merge(fresh[j].counts)
	}
	return out
}

// updateDelta applies the delta records pruned and pushed since the last
// build to the reduced delta (the latest record of each instance, grouped
// by app) and returns the delta's views: prevDelta's, with the groups that
// changed rebuilt at version deltaVersion. pruned is the queue's prune
// counter now; newRecs are the records pushed since the last build that
// are still in the queue.
func (b *snapBuilder) updateDelta(prevDelta []AppView, newRecs []deltaRecord, pruned uint64, deltaVersion uint64, first bool) []AppView {
	dirty := map[string]bool{}
	// Pruned: the oldest mirror records, up to the queue's counter.
	for b.prunedSeen < pruned && b.head < len(b.mirror) {
		rec := b.mirror[b.head]
		b.mirror[b.head] = deltaRecord{}
		b.head++
		b.prunedSeen++
		if g := b.groups[rec.key.App]; g != nil {
			if cur, ok := g[rec.key.ID]; ok && cur.inst == rec.inst {
				delete(g, rec.key.ID)
				if len(g) == 0 {
					delete(b.groups, rec.key.App)
				}
				dirty[rec.key.App] = true
			}
		}
	}
	b.prunedSeen = max(b.prunedSeen, pruned) // records pushed and pruned unseen
	if b.head > 0 && b.head >= len(b.mirror)/2 {
		live := copy(b.mirror, b.mirror[b.head:])
		clear(b.mirror[live:])
		b.mirror = b.mirror[:live]
		b.head = 0
	}
	for _, rec := range newRecs {
		b.mirror = append(b.mirror, rec)
		g := b.groups[rec.key.App]
		if g == nil {
			g = map[string]deltaRecord{}
			b.groups[rec.key.App] = g
		}
		g[rec.key.ID] = rec
		dirty[rec.key.App] = true
	}
	if first {
		// First build: every group is new.
		for app := range b.groups {
			dirty[app] = true
		}
	}

	fresh := make([]AppView, 0, len(dirty))
	removed := map[string]bool{}
	for app := range dirty {
		g := b.groups[app]
		if len(g) == 0 {
			removed[app] = true
			continue
		}
		ivs := make([]InstanceView, 0, len(g))
		for _, rec := range g {
			ivs = append(ivs, InstanceView{Instance: rec.inst, LastRenewalTimestamp: rec.lastRenewal})
		}
		sortInstances(ivs)
		fresh = append(fresh, AppView{Name: app, Instances: ivs, Version: deltaVersion})
	}
	return mergeApps(prevDelta, fresh, removed, StatusCounts{})
}

// changedApps adds to changed every app named by the events with Seq in
// (from, to], with the Seq of its last one. It reports false when the ring
// no longer holds all of them. The caller holds Registry.mu, so no event
// is appended meanwhile.
func (o *outbox) changedApps(from, to uint64, changed map[string]uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if to < from || to-from > uint64(len(o.ring)) || o.head != to {
		return false
	}
	for seq := from + 1; seq <= to; seq++ {
		ev := &o.ring[seq&o.mask]
		if ev.Seq != seq {
			return false
		}
		changed[ev.Key.App] = seq
	}
	return true
}

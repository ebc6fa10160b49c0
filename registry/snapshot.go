package registry

import (
	"strings"
)

// InstanceView is an instance as a reader sees it: the immutable stored
// instance and its lease's last renewal when the view was taken. In a
// Snapshot, views are taken when their app last changed (see AppView), so
// LastRenewalTimestamp is as of that change, not as of the read: like
// Eureka's response cache, reads serve a cached lastRenewalTimestamp. No
// client acts on it; Registry.Instance reads the live lease.
type InstanceView struct {
	*Instance
	LastRenewalTimestamp int64 // ms since epoch, Eureka wire
}

// WithAction returns a copy of iv whose instance says action (a delta's
// ADDED, MODIFIED or DELETED); iv and its instance are unchanged.
func (iv InstanceView) WithAction(action ActionType) InstanceView {
	in := *iv.Instance
	in.ActionType = action
	return InstanceView{Instance: &in, LastRenewalTimestamp: iv.LastRenewalTimestamp}
}

// AppView is one application and its instances, sorted by instance id.
// Views are immutable and shared between snapshots: a new snapshot rebuilds
// the views of the apps changed since the previous one and reuses every
// other by value (same Instances array), so a change costs in proportion to
// its app, not to the registry.
type AppView struct {
	Name      string
	Instances []InstanceView
	// Version identifies this content of the app: in Snapshot.Apps, the Seq
	// of the app's last change (in the rare rebuild after a consumer-side
	// resync, the registry version of that rebuild); in Snapshot.Delta, the
	// DeltaVersion at which the app's group last changed. Two views of one
	// app and one list (Apps or Delta) with the same Version are the same
	// content, so encoders can cache per (name, Version).
	Version uint64

	counts StatusCounts // instances per status, for the hashcode
}

// Snapshot is an immutable, consistent view of the registry at one version:
// what a full fetch, a delta fetch, an app or a VIP lookup returns. The
// registry builds at most one Snapshot per version and hands the same
// pointer to every reader until the next visible change, so encoders can
// cache their output per snapshot.
type Snapshot struct {
	// Version counts visible changes to the registry's content (register,
	// cancel, eviction, status and metadata changes). Heartbeats do not
	// change it.
	Version uint64
	// DeltaVersion changes whenever the delta's content changes: with every
	// Version change, and when old entries are pruned from the delta queue.
	DeltaVersion uint64
	// Apps holds every application, sorted by name.
	Apps []AppView
	// Delta holds the changes retained in the delta queue, grouped by app
	// (sorted by name) and reduced to the latest change of each instance,
	// whose ActionType says what it was.
	Delta []AppView
	// Hashcode is the apps hashcode of Apps (Eureka's reconcile hash); the
	// delta carries the same value, so a client that applies Delta to the
	// previous full state reaches it.
	Hashcode string
	// Counts are the instances of Apps per status: Hashcode is
	// Counts.Hashcode(). Read only: a document that adds instances to Apps
	// (remote regions) clones it to count them.
	Counts StatusCounts
	// Instances is the number of instances in Apps.
	Instances int

	appIndex map[string]int
	// build is the incremental builder's state, handed from each snapshot
	// to the next under Registry.snapMu (snapshot_build.go).
	build *snapBuilder
}

// App returns the named application (upper-cased name).
func (s *Snapshot) App(name string) (AppView, bool) {
	i, ok := s.appIndex[upperASCII(name)]
	if !ok {
		return AppView{}, false
	}
	return s.Apps[i], true
}

// VIP returns the instances whose vipAddress (or secureVipAddress when
// secure) lists name as one of its comma-separated parts, matched exactly and
// case-sensitively, as Eureka's ResponseCacheImpl#getApplicationsForVip
// does. Apps without a match are left out; the result may be empty.
func (s *Snapshot) VIP(name string, secure bool) []AppView {
	var out []AppView
	for _, app := range s.Apps {
		var matched []InstanceView
		for _, iv := range app.Instances {
			addr := iv.VIPAddress
			if secure {
				addr = iv.SecureVIPAddress
			}
			if vipListContains(addr, name) {
				matched = append(matched, iv)
			}
		}
		if len(matched) > 0 {
			out = append(out, AppView{Name: app.Name, Instances: matched})
		}
	}
	return out
}

func vipListContains(list, name string) bool {
	for list != "" {
		part := list
		if i := strings.IndexByte(list, ','); i >= 0 {
			part, list = list[:i], list[i+1:]
		} else {
			list = ""
		}
		if part == name {
			return true
		}
	}
	return false
}

// HashcodeOf computes the apps hashcode of a list of applications.
func HashcodeOf(apps []AppView) string { return CountStatuses(apps).Hashcode() }

// Snapshot returns the registry at its current version. While nothing
// visible changes, every call returns the same pointer; the first reader
// after a change builds the new one, and concurrent readers wait for it
// rather than building their own.
func (r *Registry) Snapshot() *Snapshot {
	if s := r.currentSnapshot(); s != nil {
		return s
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	if s := r.currentSnapshot(); s != nil {
		return s
	}
	s := r.buildSnapshot()
	r.snap.Store(s)
	return s
}

func (r *Registry) currentSnapshot() *Snapshot {
	s := r.snap.Load()
	if s == nil {
		return nil
	}
	r.mu.RLock()
	fresh := s.Version == r.version && s.DeltaVersion == r.deltaVersion
	r.mu.RUnlock()
	if !fresh {
		return nil
	}
	return s
}

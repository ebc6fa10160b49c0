package wire

import (
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
)

// Identity headers a Eureka server sends to another (EurekaServerIdentity):
// a server's read (a remote region's fetcher, Java's or Muster's) says
// DefaultServer, and a Muster answers it with its local instances only.
const (
	HeaderIdentityName    = "DiscoveryIdentity-Name"
	HeaderIdentityVersion = "DiscoveryIdentity-Version"
	HeaderIdentityID      = "DiscoveryIdentity-Id"
	ServerIdentityName    = "DefaultServer"
)

// CopyView is a copy of another server's registry as served, at one
// moment (regions/ publishes one per remote region, the Eureka API merges
// them): immutable, shared by every reader until the next is published.
type CopyView struct {
	// Region is whose registry it is (a remote region's name).
	Region string
	// Apps are the applications served, sorted by name. An app's Version
	// is the view version at which it last changed.
	Apps []registry.AppView
	// Counts are the instances of Apps per status (for the hashcode of a
	// merged document).
	Counts registry.StatusCounts
	// Instances is the number of instances in Apps.
	Instances int
	// Version counts the view's content changes; it moves with every
	// change of Apps, including a drop.
	Version uint64
	// Changes are the changes of Apps in the delta retention, oldest
	// first, each the instance as it became (ActionType ADDED, MODIFIED or
	// DELETED): what a delta request of this copy serves.
	Changes []CopyChange
	// Pruned is the newest version whose changes left Changes (older than
	// the retention): Changes hold every change of the versions after it,
	// so a reader that has seen version Pruned or later misses nothing.
	Pruned uint64

	index map[string]int
	// appChanged is the version of each app's last change, kept after the
	// app leaves Apps (its last instance went): AppChanged.
	appChanged map[string]uint64
}

// CopyChange is one change of an instance of a CopyView, as a delta
// serves it.
type CopyChange struct {
	At time.Time
	// Version is the view version the change made.
	Version  uint64
	Instance registry.InstanceView
}

// NewCopyView is the view of apps (sorted by name) at version, with
// appChanged the version of each app's last change (upper-case names; the
// view keeps the map). Changes and Pruned are the caller's to set.
func NewCopyView(region string, apps []registry.AppView, version uint64, appChanged map[string]uint64) CopyView {
	v := CopyView{Region: region, Apps: apps, Version: version, index: make(map[string]int, len(apps)), appChanged: appChanged}
	for i, a := range apps {
		v.index[strings.ToUpper(a.Name)] = i
		for _, iv := range a.Instances {
			v.Counts.Add(iv.Status)
			v.Instances++
		}
	}
	return v
}

// ChangesAfter returns the changes of the versions after version, and
// false when some of them are no longer kept (version is older than
// Pruned) or version is not one of this view's (newer than Version).
func (v *CopyView) ChangesAfter(version uint64) ([]CopyChange, bool) {
	if v == nil {
		return nil, version == 0
	}
	if version < v.Pruned || version > v.Version {
		return nil, false
	}
	i := len(v.Changes)
	for i > 0 && v.Changes[i-1].Version > version {
		i--
	}
	return v.Changes[i:], true
}

// ChangesSince returns the changes at or after from.
func (v *CopyView) ChangesSince(from time.Time) []CopyChange {
	if v == nil {
		return nil
	}
	i := 0
	for i < len(v.Changes) && v.Changes[i].At.Before(from) {
		i++
	}
	return v.Changes[i:]
}

// App returns the named application (case-insensitive).
func (v *CopyView) App(name string) (registry.AppView, bool) {
	if v == nil {
		return registry.AppView{}, false
	}
	i, ok := v.index[strings.ToUpper(name)]
	if !ok {
		return registry.AppView{}, false
	}
	return v.Apps[i], true
}

// AppChanged is the view version of the app's last change, its leaving
// included (0: never served). Unlike an app's Version it does not fall
// back to 0 when the app goes, so a sum of it over regions only grows as
// the app changes anywhere: the index of an app read (GET /apps/{APP}).
func (v *CopyView) AppChanged(name string) uint64 {
	if v == nil {
		return 0
	}
	return v.appChanged[strings.ToUpper(name)]
}

// AppsChanged is a copy of every app's AppChanged (upper-case names), for
// the next view's.
func (v *CopyView) AppsChanged(extra int) map[string]uint64 {
	out := make(map[string]uint64, len(v.appChanged)+extra)
	for name, at := range v.appChanged {
		out[name] = at
	}
	return out
}

// InstanceByID returns the instance of that id in any app.
func (v *CopyView) InstanceByID(id string) (registry.InstanceView, bool) {
	if v == nil {
		return registry.InstanceView{}, false
	}
	for _, a := range v.Apps {
		for _, iv := range a.Instances {
			if iv.ID() == id {
				return iv, true
			}
		}
	}
	return registry.InstanceView{}, false
}

// Instance returns the instance of app with that id.
func (v *CopyView) Instance(app, id string) (registry.InstanceView, bool) {
	a, ok := v.App(app)
	if !ok {
		return registry.InstanceView{}, false
	}
	for _, iv := range a.Instances {
		if iv.ID() == id {
			return iv, true
		}
	}
	return registry.InstanceView{}, false
}

// Hashcode is the apps hashcode of the view's served instances.
func (v *CopyView) Hashcode() string {
	if v == nil {
		return ""
	}
	return v.Counts.Hashcode()
}

package regions

import (
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
)

// View is one remote region as served, at one moment: immutable, shared
// by every reader until the fetcher publishes the next.
type View struct {
	Region string
	// Apps are the region's whitelisted applications, sorted by name, each
	// instance a copy marked with MetadataKey. Apps whose name is in the
	// remote but not allowed are left out. An app's Version is the view
	// version at which it last changed.
	Apps []registry.AppView
	// Counts are the instances of Apps per status (for the hashcode of a
	// merged document).
	Counts registry.StatusCounts
	// Instances is the number of instances in Apps.
	Instances int
	// Version counts the view's content changes; it moves with every
	// change of Apps, including a drop.
	Version uint64
	// HasData is false before the first successful fetch and after the
	// data was dropped (max staleness): Apps is empty then.
	HasData bool
	// Fetched is the time of the last successful fetch (zero: never).
	Fetched time.Time
	// Changes are the changes of Apps in the delta retention, oldest
	// first, each the instance as it became (ActionType ADDED, MODIFIED or
	// DELETED): what a delta request of this region serves.
	Changes []Change
	// Pruned is the newest version whose changes left Changes (older than
	// the retention): Changes hold every change of the versions after it,
	// so a reader that has seen version Pruned or later misses nothing.
	Pruned uint64

	index map[string]int
	// appChanged is the version of each app's last change, kept after the
	// app leaves Apps (its last instance went): AppChanged.
	appChanged map[string]uint64
}

// Change is one change of a remote instance, as a delta serves it.
type Change struct {
	At time.Time
	// Version is the view version the change made.
	Version  uint64
	Instance registry.InstanceView
}

// ChangesAfter returns the changes of the versions after version, and
// false when some of them are no longer kept (version is older than
// Pruned) or version is not one of this view's (newer than Version).
func (v *View) ChangesAfter(version uint64) ([]Change, bool) {
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

// App returns the named application (case-insensitive).
func (v *View) App(name string) (registry.AppView, bool) {
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
func (v *View) AppChanged(name string) uint64 {
	if v == nil {
		return 0
	}
	return v.appChanged[strings.ToUpper(name)]
}

// InstanceByID returns the instance of that id in any app.
func (v *View) InstanceByID(id string) (registry.InstanceView, bool) {
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
func (v *View) Instance(app, id string) (registry.InstanceView, bool) {
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

// Age is how long ago the last successful fetch was (0 if never).
func (v *View) Age(now time.Time) time.Duration {
	if v == nil || v.Fetched.IsZero() {
		return 0
	}
	return now.Sub(v.Fetched)
}

// ChangesSince returns the changes at or after from.
func (v *View) ChangesSince(from time.Time) []Change {
	if v == nil {
		return nil
	}
	i := 0
	for i < len(v.Changes) && v.Changes[i].At.Before(from) {
		i++
	}
	return v.Changes[i:]
}

// Hashcode is the apps hashcode of the view's served instances.
func (v *View) Hashcode() string {
	if v == nil {
		return ""
	}
	return v.Counts.Hashcode()
}

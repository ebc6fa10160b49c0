package wire

import (
	"strings"

	"github.com/muster-registry/muster/registry"
)

// Copy is a client's copy of a registry, kept between fetches as the Java
// client's DiscoveryClient keeps its Applications: a full fetch replaces
// it, a delta is applied to it, and its hashcode is compared with the
// delta's apps__hashcode to learn whether it still matches the server's
// (a mismatch calls for a full fetch). client/, regions/ and the
// simulated clients all keep theirs in one.
//
// T is what the holder keeps of an instance: the decoded view itself
// (regions), or its own type converted once when the instance arrives
// (client/, whose Instance copies the strings so a kept instance does not
// pin the whole response body). Keep converts, Status reads the status
// the hashcode counts.
//
// A Copy is not safe for concurrent use; its holder serialises fetches.
type Copy[T any] struct {
	keep   func(app string, iv registry.InstanceView) T
	status func(T) registry.Status
	apps   map[string]map[string]T // upper-case app name → instance id → instance
	counts registry.StatusCounts   // apps' instances per status
	filled bool
}

// NewCopy returns an empty copy. keep is given the instance's app name
// (upper-case; see AppName) with the decoded instance.
func NewCopy[T any](keep func(app string, iv registry.InstanceView) T, status func(T) registry.Status) *Copy[T] {
	return &Copy[T]{keep: keep, status: status, apps: map[string]map[string]T{}}
}

// AppName is the app an instance of a document belongs to, as
// DiscoveryClient#updateDelta looks it up: the instance's own app name
// (InstanceInfo#getAppName), or, when it has none, the name of the
// application element it came in; upper-case either way.
func AppName(app registry.AppView, iv registry.InstanceView) string {
	if iv.App != "" {
		return strings.ToUpper(iv.App)
	}
	return strings.ToUpper(app.Name)
}

// Replace makes the copy exactly the apps of a full fetch.
func (c *Copy[T]) Replace(apps []registry.AppView) {
	c.apps = make(map[string]map[string]T, len(apps))
	c.counts = nil
	c.filled = true
	for _, app := range apps {
		for _, iv := range app.Instances {
			if iv.Instance != nil {
				c.put(AppName(app, iv), iv)
			}
		}
	}
}

// ApplyDelta applies the apps of a delta as DiscoveryClient#updateDelta
// does: ADDED and MODIFIED put the instance (a new app is created), DELETED
// removes it (an app left without instances goes), and any other action
// type, or none, is ignored, as the Java client ignores it. Each instance
// is filed under AppName. It returns the apps it changed.
func (c *Copy[T]) ApplyDelta(apps []registry.AppView) (touched map[string]bool) {
	touched = map[string]bool{}
	for _, app := range apps {
		for _, iv := range app.Instances {
			if iv.Instance == nil {
				continue
			}
			name := AppName(app, iv)
			switch iv.ActionType {
			case registry.ActionAdded, registry.ActionModified:
				c.put(name, iv)
				touched[name] = true
			case registry.ActionDeleted:
				if in, ok := c.apps[name][iv.ID()]; ok {
					c.counts.Remove(c.status(in))
					m := c.apps[name]
					delete(m, iv.ID())
					if len(m) == 0 {
						delete(c.apps, name)
					}
				}
				touched[name] = true
			}
		}
	}
	return touched
}

func (c *Copy[T]) put(name string, iv registry.InstanceView) {
	m := c.apps[name]
	if m == nil {
		m = map[string]T{}
		c.apps[name] = m
	}
	if old, ok := m[iv.ID()]; ok {
		c.counts.Remove(c.status(old))
	}
	in := c.keep(name, iv)
	m[iv.ID()] = in
	c.counts.Add(c.status(in))
}

// Clear empties the copy, as before its first full fetch.
func (c *Copy[T]) Clear() {
	c.apps = map[string]map[string]T{}
	c.counts = nil
	c.filled = false
}

// Filled reports whether a full fetch has been applied since the copy was
// made or cleared.
func (c *Copy[T]) Filled() bool { return c.filled }

// Apps is the copy: upper-case app name → instance id → instance. It is
// the copy's own map, to read only, and valid until the next change.
func (c *Copy[T]) Apps() map[string]map[string]T { return c.apps }

// Hashcode is the copy's reconcile hashcode, computed as the server
// computes apps__hashcode (Applications#getReconcileHashCode).
func (c *Copy[T]) Hashcode() string { return c.counts.Hashcode() }

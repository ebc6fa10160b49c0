package wire_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// copyEntry is one instance of a document in a Copy test: the app element
// it comes in, its own app name, id, status and action type.
type copyEntry struct {
	elem, app, id string
	status        registry.Status
	action        registry.ActionType
}

func copyDoc(entries ...copyEntry) []registry.AppView {
	var apps []registry.AppView
	for _, e := range entries {
		in := &registry.Instance{App: e.app, InstanceID: e.id, HostName: e.id, Status: e.status, ActionType: e.action}
		iv := registry.InstanceView{Instance: in}
		if n := len(apps); n > 0 && apps[n-1].Name == e.elem {
			apps[n-1].Instances = append(apps[n-1].Instances, iv)
			continue
		}
		apps = append(apps, registry.AppView{Name: e.elem, Instances: []registry.InstanceView{iv}})
	}
	return apps
}

// contents lists a copy as "APP/id=STATUS", sorted.
func contents(c *wire.Copy[registry.InstanceView]) []string {
	var out []string
	for name, m := range c.Apps() {
		for id, iv := range m {
			out = append(out, name+"/"+id+"="+string(iv.Status))
		}
	}
	slices.Sort(out)
	return out
}

func newViewCopy() *wire.Copy[registry.InstanceView] {
	return wire.NewCopy(func(_ string, iv registry.InstanceView) registry.InstanceView { return iv },
		func(iv registry.InstanceView) registry.Status { return iv.Status })
}

func TestCopy_ApplyDelta(t *testing.T) {
	full := copyDoc(
		copyEntry{elem: "ORDERS", app: "ORDERS", id: "o1", status: registry.StatusUp},
		copyEntry{elem: "ORDERS", app: "ORDERS", id: "o2", status: registry.StatusUp},
		copyEntry{elem: "USERS", app: "USERS", id: "u1", status: registry.StatusDown},
	)
	tests := []struct {
		name     string
		delta    []registry.AppView
		want     []string
		touched  []string
		hashcode string
	}{
		{
			name:     "added puts a new instance",
			delta:    copyDoc(copyEntry{elem: "ORDERS", app: "ORDERS", id: "o3", status: registry.StatusStarting, action: registry.ActionAdded}),
			want:     []string{"ORDERS/o1=UP", "ORDERS/o2=UP", "ORDERS/o3=STARTING", "USERS/u1=DOWN"},
			touched:  []string{"ORDERS"},
			hashcode: "DOWN_1_STARTING_1_UP_2_",
		},
		{
			name:     "added creates a new app",
			delta:    copyDoc(copyEntry{elem: "CARTS", app: "CARTS", id: "c1", status: registry.StatusUp, action: registry.ActionAdded}),
			want:     []string{"CARTS/c1=UP", "ORDERS/o1=UP", "ORDERS/o2=UP", "USERS/u1=DOWN"},
			touched:  []string{"CARTS"},
			hashcode: "DOWN_1_UP_3_",
		},
		{
			name:     "modified replaces",
			delta:    copyDoc(copyEntry{elem: "ORDERS", app: "ORDERS", id: "o1", status: registry.StatusOutOfService, action: registry.ActionModified}),
			want:     []string{"ORDERS/o1=OUT_OF_SERVICE", "ORDERS/o2=UP", "USERS/u1=DOWN"},
			touched:  []string{"ORDERS"},
			hashcode: "DOWN_1_OUT_OF_SERVICE_1_UP_1_",
		},
		{
			name:     "deleted removes, and the last instance takes its app",
			delta:    copyDoc(copyEntry{elem: "USERS", app: "USERS", id: "u1", status: registry.StatusDown, action: registry.ActionDeleted}),
			want:     []string{"ORDERS/o1=UP", "ORDERS/o2=UP"},
			touched:  []string{"USERS"},
			hashcode: "UP_2_",
		},
		{
			name:     "deleted of an unknown instance changes nothing",
			delta:    copyDoc(copyEntry{elem: "USERS", app: "USERS", id: "u9", status: registry.StatusUp, action: registry.ActionDeleted}),
			want:     []string{"ORDERS/o1=UP", "ORDERS/o2=UP", "USERS/u1=DOWN"},
			touched:  []string{"USERS"},
			hashcode: "DOWN_1_UP_2_",
		},
		{
			// DiscoveryClient#updateDelta looks the app up by
			// instance.getAppName(), not by the element it came in.
			name:     "deleted is filed under the instance's own app name",
			delta:    copyDoc(copyEntry{elem: "OTHER", app: "orders", id: "o2", status: registry.StatusUp, action: registry.ActionDeleted}),
			want:     []string{"ORDERS/o1=UP", "USERS/u1=DOWN"},
			touched:  []string{"ORDERS"},
			hashcode: "DOWN_1_UP_1_",
		},
		{
			name:     "an instance without an app name goes by its element's",
			delta:    copyDoc(copyEntry{elem: "orders", id: "o2", status: registry.StatusUp, action: registry.ActionDeleted}),
			want:     []string{"ORDERS/o1=UP", "USERS/u1=DOWN"},
			touched:  []string{"ORDERS"},
			hashcode: "DOWN_1_UP_1_",
		},
		{
			// updateDelta has no branch for another action type.
			name: "unknown or missing action types are ignored",
			delta: copyDoc(
				copyEntry{elem: "ORDERS", app: "ORDERS", id: "o9", status: registry.StatusUp, action: "SOMETHING"},
				copyEntry{elem: "ORDERS", app: "ORDERS", id: "o1", status: registry.StatusDown},
			),
			want:     []string{"ORDERS/o1=UP", "ORDERS/o2=UP", "USERS/u1=DOWN"},
			hashcode: "DOWN_1_UP_2_",
		},
		{
			name:     "an empty delta",
			want:     []string{"ORDERS/o1=UP", "ORDERS/o2=UP", "USERS/u1=DOWN"},
			hashcode: "DOWN_1_UP_2_",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newViewCopy()
			c.Replace(full)
			touched := c.ApplyDelta(tt.delta)
			if got := contents(c); !slices.Equal(got, tt.want) {
				t.Errorf("copy = %v, want %v", got, tt.want)
			}
			if got := slices.Sorted(maps.Keys(touched)); !slices.Equal(got, tt.touched) && len(got)+len(tt.touched) > 0 {
				t.Errorf("touched = %v, want %v", got, tt.touched)
			}
			if got := c.Hashcode(); got != tt.hashcode {
				t.Errorf("Hashcode() = %q, want %q", got, tt.hashcode)
			}
		})
	}
}

func TestCopy_Replace(t *testing.T) {
	c := newViewCopy()
	if c.Filled() || c.Hashcode() != "" {
		t.Fatalf("new copy: Filled() = %t, Hashcode() = %q, want false and empty", c.Filled(), c.Hashcode())
	}
	c.Replace(copyDoc(copyEntry{elem: "ORDERS", app: "ORDERS", id: "o1", status: registry.StatusUp}))
	c.Replace(copyDoc(
		copyEntry{elem: "users", id: "u1", status: registry.StatusUp},
		copyEntry{elem: "USERS", app: "USERS", id: "u2", status: registry.StatusDown},
	))
	if got, want := contents(c), []string{"USERS/u1=UP", "USERS/u2=DOWN"}; !slices.Equal(got, want) {
		t.Errorf("after two full fetches: copy = %v, want %v", got, want)
	}
	if !c.Filled() || c.Hashcode() != "DOWN_1_UP_1_" {
		t.Errorf("Filled() = %t, Hashcode() = %q, want true and DOWN_1_UP_1_", c.Filled(), c.Hashcode())
	}
	c.Clear()
	if c.Filled() || len(c.Apps()) != 0 {
		t.Errorf("after Clear: Filled() = %t, %d apps, want false and none", c.Filled(), len(c.Apps()))
	}
}

// The holder's type is what keep returns: converted once, with the app
// name the instance is filed under.
func TestCopy_keep(t *testing.T) {
	type kept struct{ app, id, status string }
	c := wire.NewCopy(func(app string, iv registry.InstanceView) kept {
		return kept{app: app, id: iv.ID(), status: strings.ToLower(string(iv.Status))}
	}, func(k kept) registry.Status { return registry.Status(strings.ToUpper(k.status)) })
	c.Replace(copyDoc(copyEntry{elem: "orders", id: "o1", status: registry.StatusUp}))
	if got, want := c.Apps()["ORDERS"]["o1"], (kept{app: "ORDERS", id: "o1", status: "up"}); got != want {
		t.Errorf("kept = %+v, want %+v", got, want)
	}
	if got := c.Hashcode(); got != "UP_1_" {
		t.Errorf("Hashcode() = %q, want UP_1_", got)
	}
}

// A cancel of a persistent instance tells a peer that never had it to keep
// the tombstone for a maximal lease, as the node that cancelled it does:
// the instance's stale copies elsewhere never expire.
func TestReplicationItemOf_cancelOfPersistent(t *testing.T) {
	in := registrytest.NewInstance("DB", "db-1", registrytest.WithLeaseDuration(90),
		registrytest.WithMetadata(map[string]string{registry.LeaseMetadataKey: "persistent"}))
	key := registry.InstanceKey{App: "DB", ID: "db-1"}
	if got := wire.ReplicationItemOf(registry.ActionCancel, key, in, true).LeaseDurationInSecs; got != registry.MaxLeaseDurationSecs {
		t.Fatalf("persistent cancel carries a %d s lease, want %d", got, registry.MaxLeaseDurationSecs)
	}
	in.Metadata = nil
	if got := wire.ReplicationItemOf(registry.ActionCancel, key, in, true).LeaseDurationInSecs; got != 90 {
		t.Fatalf("ordinary cancel carries a %d s lease, want 90", got)
	}
}

package replication

import (
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestTaskFromChange(t *testing.T) {
	in := registrytest.NewInstance("ORDERS", "a")
	key := registry.InstanceKey{App: "ORDERS", ID: "a"}
	tests := []struct {
		name   string
		change registry.Change
		want   Task
		wantOK bool
	}{
		{"register", registry.Change{Action: registry.ActionRegister, Key: key, Instance: in, At: t0},
			Task{Action: registry.ActionRegister, Key: key, Instance: in, CreatedAt: t0}, true},
		{"heartbeat", registry.Change{Action: registry.ActionHeartbeat, Key: key, Instance: in, At: t0},
			Task{Action: registry.ActionHeartbeat, Key: key, Instance: in, CreatedAt: t0}, true},
		{"cancel without instance", registry.Change{Action: registry.ActionCancel, Key: key, At: t0},
			Task{Action: registry.ActionCancel, Key: key, CreatedAt: t0}, true},
		{"key from the instance", registry.Change{Action: registry.ActionStatusUpdate, Instance: in, At: t0},
			Task{Action: registry.ActionStatusUpdate, Key: key, Instance: in, CreatedAt: t0}, true},
		{"replicated: never forwarded", registry.Change{Action: registry.ActionRegister, Key: key, Instance: in, Replicated: true}, Task{}, false},
		{"replicated heartbeat", registry.Change{Action: registry.ActionHeartbeat, Key: key, Instance: in, Replicated: true}, Task{}, false},
		{"unknown action", registry.Change{Action: "Evict", Key: key}, Task{}, false},
		{"no key, no instance", registry.Change{Action: registry.ActionCancel}, Task{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TaskFromChange(tt.change)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("TaskFromChange() = %+v, %v, want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

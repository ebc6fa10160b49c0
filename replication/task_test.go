package replication

import (
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestTaskFromEvent(t *testing.T) {
	in := registrytest.NewInstance("ORDERS", "a")
	key := registry.InstanceKey{App: "ORDERS", ID: "a"}
	ev := func(k registry.OpKind, o registry.Origin) registry.Event {
		return registry.Event{Seq: 7, Kind: k, Origin: o, Key: key, Instance: in, At: t0}
	}
	tests := []struct {
		name   string
		event  registry.Event
		want   Task
		wantOK bool
	}{
		{"register", ev(registry.OpRegister, registry.OriginClient),
			Task{Action: registry.ActionRegister, Key: key, Instance: in, CreatedAt: t0}, true},
		{"metadata goes as a register", ev(registry.OpMetadata, registry.OriginClient),
			Task{Action: registry.ActionRegister, Key: key, Instance: in, CreatedAt: t0}, true},
		{"status corrected by a heartbeat", ev(registry.OpRenew, registry.OriginClient),
			Task{Action: registry.ActionHeartbeat, Key: key, Instance: in, CreatedAt: t0}, true},
		{"cancel", ev(registry.OpCancel, registry.OriginClient),
			Task{Action: registry.ActionCancel, Key: key, Instance: in, CreatedAt: t0}, true},
		{"status", ev(registry.OpStatus, registry.OriginClient),
			Task{Action: registry.ActionStatusUpdate, Key: key, Instance: in, CreatedAt: t0}, true},
		{"delete override", ev(registry.OpDeleteOverride, registry.OriginClient),
			Task{Action: registry.ActionDeleteStatusOverride, Key: key, Instance: in, CreatedAt: t0}, true},
		{"from a peer: never forwarded", ev(registry.OpRegister, registry.OriginPeer), Task{}, false},
		{"from syncUp", ev(registry.OpRegister, registry.OriginSync), Task{}, false},
		{"from anti-entropy", ev(registry.OpCancel, registry.OriginAntiEntropy), Task{}, false},
		{"eviction: every node evicts on its own", ev(registry.OpEvict, registry.OriginNode), Task{}, false},
		{"no key", registry.Event{Kind: registry.OpCancel}, Task{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TaskFromEvent(tt.event)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("TaskFromEvent() = %+v, %v, want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

package replication

import (
	"time"

	"github.com/muster-registry/muster/registry"
)

// Task is one change waiting to reach one peer. Tasks are values: the same
// Task is copied into every peer's queue, and the *registry.Instance it
// carries is immutable, so the copies share it without locks.
type Task struct {
	// Action is Eureka's replication action; it goes on the wire as is.
	Action registry.Action
	// Key names the instance (upper-cased app and instance id).
	Key registry.InstanceKey
	// Instance is the stored instance the change produced. Register carries
	// the full instance (instanceInfo on the wire). Heartbeat, StatusUpdate
	// and DeleteStatusOverride carry it for status, overriddenStatus and
	// lastDirtyTimestamp. Cancel may carry the removed instance, or nil.
	Instance *registry.Instance
	// CreatedAt is when the change happened; expiry and the replication lag
	// are measured from it.
	CreatedAt time.Time
}

// TaskFromEvent turns a change from the registry's stream into a Task. It
// returns false for changes that must not go to peers: those that did not
// come from a client or from this node's health checks (a peer's write is
// never forwarded again, EUREKA.md §7.2; a syncUp copy or a repair
// neither) and kinds that are not replicated (evictions). It does not
// allocate.
func TaskFromEvent(ev registry.Event) (Task, bool) {
	if ev.Origin != registry.OriginClient && ev.Origin != registry.OriginHealthCheck {
		return Task{}, false
	}
	action, ok := ev.Kind.Action()
	if !ok || ev.Key.ID == "" {
		return Task{}, false
	}
	return Task{Action: action, Key: ev.Key, Instance: ev.Instance, CreatedAt: ev.At}, true
}

// taskFromRenewal is the heartbeat a client's renewal sends to peers.
func taskFromRenewal(rn registry.Renewal) Task {
	return Task{Action: registry.ActionHeartbeat, Key: rn.Key, Instance: rn.Instance, CreatedAt: rn.At}
}

// taskID names a queue slot: at most one task per instance and action is
// pending, as with Eureka's task ids ("heartbeat#APP/id").
type taskID struct {
	key    registry.InstanceKey
	action registry.Action
}

func (t *Task) id() taskID { return taskID{key: t.Key, action: t.Action} }

// oldestCreated returns the earliest CreatedAt of tasks (zero for none).
func oldestCreated(tasks []Task) time.Time {
	var oldest time.Time
	for i := range tasks {
		if c := tasks[i].CreatedAt; oldest.IsZero() || c.Before(oldest) {
			oldest = c
		}
	}
	return oldest
}

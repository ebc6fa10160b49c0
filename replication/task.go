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

// TaskFromChange turns a registry change into a Task. It returns false for
// changes that must not go to peers: Replicated changes (a peer's write is
// never forwarded again, EUREKA.md §7.2) and actions that are not
// replicated. It does not allocate.
func TaskFromChange(c registry.Change) (Task, bool) {
	if c.Replicated || !replicatedAction(c.Action) {
		return Task{}, false
	}
	key := c.Key
	if key == (registry.InstanceKey{}) && c.Instance != nil {
		key = registry.InstanceKey{App: c.Instance.App, ID: c.Instance.ID()}
	}
	if key.ID == "" {
		return Task{}, false
	}
	return Task{Action: c.Action, Key: key, Instance: c.Instance, CreatedAt: c.At}, true
}

func replicatedAction(a registry.Action) bool {
	switch a {
	case registry.ActionRegister, registry.ActionHeartbeat, registry.ActionCancel,
		registry.ActionStatusUpdate, registry.ActionDeleteStatusOverride:
		return true
	}
	return false
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

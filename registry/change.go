package registry

import "time"

// Action is a change that peers must hear about. The names are Eureka's
// replication actions (PeerReplicationResource), so they can go on the wire
// as they are.
type Action string

// Replicated actions. Evictions are not among them: each node evicts on its
// own, with its own self-preservation state (ARCHITECTURE.md decision 9).
const (
	ActionRegister             Action = "Register"
	ActionHeartbeat            Action = "Heartbeat"
	ActionCancel               Action = "Cancel"
	ActionStatusUpdate         Action = "StatusUpdate"
	ActionDeleteStatusOverride Action = "DeleteStatusOverride"
)

// Change describes one successful write, handed to the change hook after the
// registry's lock is released. The hook sees changes in the order the
// registry applied them.
type Change struct {
	Action Action
	Key    InstanceKey
	// Instance is the stored instance after the change (for Cancel, the one
	// that was removed). It is immutable: keep it, never modify it.
	Instance *Instance
	// Replicated is true when the write came from a peer; such changes must
	// not be sent to peers again.
	Replicated bool
	// At is when the registry applied the change.
	At time.Time
}

package registry

import (
	"fmt"
	"time"
)

// Origin says where an operation came from. The registry never sees
// credentials: authentication happens at the edges (httpapi, the
// replication transport), which pass on only this.
type Origin uint8

// Origins of operations.
const (
	// OriginClient is a client's own request (a Eureka client, a sidecar,
	// the dashboard). Only these are sent on to peers.
	OriginClient Origin = iota
	// OriginPeer is a write a peer replicated to this node, or the newer
	// copy a peer answered a heartbeat with (409).
	OriginPeer
	// OriginSync is the start-up copy of a peer's registry (syncUp).
	OriginSync
	// OriginAntiEntropy is a repair found by comparing registries with a
	// peer.
	OriginAntiEntropy
	// OriginNode is this node's own housekeeping: eviction.
	OriginNode
	// OriginHealthCheck is this node's health checks (package healthcheck)
	// setting or lifting the server-owned status of an instance it probes.
	// Unlike OriginNode it is sent on to peers, like a client's write: one
	// node probes an instance and every node must answer the same.
	OriginHealthCheck
)

func (o Origin) String() string {
	switch o {
	case OriginClient:
		return "client"
	case OriginPeer:
		return "peer"
	case OriginSync:
		return "sync"
	case OriginAntiEntropy:
		return "anti-entropy"
	case OriginNode:
		return "node"
	case OriginHealthCheck:
		return "health-check"
	}
	return fmt.Sprintf("origin(%d)", uint8(o))
}

// fromPeer is true for writes another node already applied: Eureka's
// "isReplication". The status rules treat them as authoritative, and they
// are never replicated again (EUREKA.md §7.2).
func (o Origin) fromPeer() bool {
	return o == OriginPeer || o == OriginSync || o == OriginAntiEntropy
}

// OpKind is what an operation does.
type OpKind uint8

// Operation kinds.
const (
	OpRegister       OpKind = iota + 1 // store an instance (POST /apps/{app})
	OpRenew                            // heartbeat (PUT /apps/{app}/{id})
	OpCancel                           // deregister (DELETE /apps/{app}/{id})
	OpStatus                           // set a status override (PUT …/status)
	OpDeleteOverride                   // remove a status override (DELETE …/status)
	OpMetadata                         // add or replace metadata (PUT …/metadata)
	OpEvict                            // expired lease removed (never applied from outside)
	OpHealth                           // set or lift the health checks' mark (health.go)
	OpDrain                            // drain or undrain an instance (drain.go)
)

func (k OpKind) String() string {
	switch k {
	case OpRegister:
		return "register"
	case OpRenew:
		return "renew"
	case OpCancel:
		return "cancel"
	case OpStatus:
		return "status"
	case OpDeleteOverride:
		return "delete-override"
	case OpMetadata:
		return "metadata"
	case OpEvict:
		return "evict"
	case OpHealth:
		return "health"
	case OpDrain:
		return "drain"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Action is the Eureka replication action a change of this kind goes to
// peers as (PeerReplicationResource), and false for kinds that are not
// replicated: evictions, which every node decides on its own
// (ARCHITECTURE.md decision 9). Metadata changes go as a Register of the
// whole instance, as Eureka's InstanceResource#updateMetadata does, and so
// do the health checks' marks: a Java Eureka peer stores the instance with
// the status it carries (DOWN while marked, OUT_OF_SERVICE while drained)
// and needs no new action, and a
// Muster peer takes the copy whole, mark included (package replication
// sends the mark beside the instance).
func (k OpKind) Action() (Action, bool) {
	switch k {
	case OpRegister, OpMetadata, OpHealth, OpDrain:
		return ActionRegister, true
	case OpRenew:
		return ActionHeartbeat, true
	case OpCancel:
		return ActionCancel, true
	case OpStatus:
		return ActionStatusUpdate, true
	case OpDeleteOverride:
		return ActionDeleteStatusOverride, true
	}
	return "", false
}

// Action is a change that peers must hear about. The names are Eureka's
// replication actions (PeerReplicationResource), so they can go on the wire
// as they are.
type Action string

// Replicated actions.
const (
	ActionRegister             Action = "Register"
	ActionHeartbeat            Action = "Heartbeat"
	ActionCancel               Action = "Cancel"
	ActionStatusUpdate         Action = "StatusUpdate"
	ActionDeleteStatusOverride Action = "DeleteStatusOverride"
)

// Op is one write to the registry: every client request, replicated item,
// syncUp copy and repair is an Op given to Registry.Apply, so they all take
// one path and one set of rules. Build it with RegisterOp, RenewOp,
// CancelOp, StatusOp, DeleteOverrideOp or MetadataOp, then From and Dirty.
// An Op is a small value: applying a renewal allocates nothing.
type Op struct {
	Kind   OpKind
	Origin Origin
	// App and ID name the instance (any letter case for App). For a
	// register they come from Instance.
	App, ID string
	// Instance is the instance to store (register). The registry takes
	// ownership of it: the caller must not modify it afterwards.
	Instance *Instance
	// Status is the override to set (status), or the status the instance
	// takes when its override is removed (delete-override; Eureka's default
	// is UNKNOWN).
	Status Status
	// LastDirtyTimestamp is the caller's lastDirtyTimestamp in ms, 0 for
	// none. A renewal compares it with the stored one (404 / 409); a status
	// write can only raise the stored one.
	LastDirtyTimestamp int64
	// OverriddenStatus is the override a peer replicates along with a
	// heartbeat; "" or UNKNOWN means none.
	OverriddenStatus Status
	// Metadata holds the entries a metadata write adds or replaces.
	Metadata map[string]string
	// OnlyIfNewer makes a register replace a stored copy with an older
	// lastDirtyTimestamp and do nothing otherwise, never creating one: a
	// peer's 409 answer to our heartbeat carries its newer copy
	// (PeerEurekaNode#syncInstancesIfTimestampDiffers). Unlike Eureka it does
	// nothing when the instance is gone here: it was cancelled meanwhile, and
	// adopting it would bring it back on this node alone.
	OnlyIfNewer bool
	// Version is a peer's write version: for a cancel, the cancel's (its
	// tombstone's); for a heartbeat, the version of the sender's copy,
	// which decides 404 / 409 instead of lastDirtyTimestamp. 0 for none
	// (a Java Eureka peer). A register carries it in Instance.WriteVersion.
	Version uint64
	// TombstoneTTL is, for a cancel anti-entropy takes from a peer's
	// tombstone, how long the peer keeps it still: the tombstone here
	// goes at the same time (at most a maximal lease and the grace from
	// now). Zero: the cancelled lease's duration plus the grace.
	TombstoneTTL time.Duration
	// LeaseDuration is, for a cancel a Muster peer replicates, the
	// cancelled instance's lease duration: a node that never had the
	// instance keeps the tombstone for that lease plus the grace, as the
	// node that cancelled it does, not for the default lease. Zero: the
	// stored instance's lease, or the default when there is none.
	LeaseDuration time.Duration
	// Health is the mark a health write sets (HealthOp); nil lifts it.
	Health *HealthMark
	// DrainedAt and DrainedBy are the drain a DrainOp sets (ms since epoch,
	// the node's name); DrainedAt 0 undrains.
	DrainedAt int64
	DrainedBy string
	// RenewedAt is, for an instance anti-entropy adopts, the holder's last
	// renewal: the new lease counts as renewed then, not now, so a copy
	// does not outlive its original. Zero means now.
	RenewedAt time.Time
}

// RegisterOp stores in (POST /apps/{app}).
func RegisterOp(in *Instance) Op { return Op{Kind: OpRegister, Instance: in} }

// RenewOp renews the lease of app/id (PUT /apps/{app}/{id}).
func RenewOp(app, id string) Op { return Op{Kind: OpRenew, App: app, ID: id} }

// CancelOp removes app/id (DELETE /apps/{app}/{id}).
func CancelOp(app, id string) Op { return Op{Kind: OpCancel, App: app, ID: id} }

// StatusOp sets the status override of app/id (PUT …/status?value=).
func StatusOp(app, id string, status Status) Op {
	return Op{Kind: OpStatus, App: app, ID: id, Status: status}
}

// DeleteOverrideOp removes the status override of app/id and sets its
// status to status (DELETE …/status[?value=]).
func DeleteOverrideOp(app, id string, status Status) Op {
	return Op{Kind: OpDeleteOverride, App: app, ID: id, Status: status}
}

// MetadataOp adds or replaces metadata entries of app/id (PUT …/metadata).
func MetadataOp(app, id string, updates map[string]string) Op {
	return Op{Kind: OpMetadata, App: app, ID: id, Metadata: updates}
}

// HealthOp sets (mark non-nil) or lifts (nil) the health checks' mark on
// app/id. It comes from OriginHealthCheck.
func HealthOp(app, id string, mark *HealthMark) Op {
	return Op{Kind: OpHealth, Origin: OriginHealthCheck, App: app, ID: id, Health: mark}
}

// From returns op with its origin set.
func (op Op) From(o Origin) Op { op.Origin = o; return op }

// Dirty returns op with the caller's lastDirtyTimestamp (ms) set.
func (op Op) Dirty(ms int64) Op { op.LastDirtyTimestamp = ms; return op }

// Event is one change in the registry's stream: a visible change to what
// readers see, in the order applied. Seq is the registry version after the
// change: gap-free and increasing by one per event, so a consumer that
// holds Seq n has seen exactly the changes 1…n. Events are values; the
// Instance they carry is immutable.
type Event struct {
	Seq    uint64
	Kind   OpKind
	Origin Origin
	Key    InstanceKey
	// Instance is the stored instance after the change; for a cancel or an
	// eviction, the removed copy (ActionType DELETED).
	Instance *Instance
	// At is when the registry applied the change.
	At time.Time
}

// Renewal is one lease renewed by a client since the renewal feed was last
// taken (Registry.TakeRenewals). Renewals do not change the version and
// are not events: they are coalesced per lease.
type Renewal struct {
	Key InstanceKey
	// Instance is the instance stored when the renewals were taken.
	Instance *Instance
	// At is the lease's last renewal.
	At time.Time
}

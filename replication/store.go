package replication

import "github.com/muster-registry/muster/registry"

// Store is the registry as replication uses it; *registry.Registry
// implements it. Every method must be safe for concurrent use: the feed,
// the senders, the receiver and syncUp call it from their own goroutines.
type Store interface {
	// Apply applies one operation (a peer's replicated write, a syncUp
	// copy, a peer's newer copy answered with 409).
	Apply(registry.Op) (*registry.Instance, error)
	// Instance looks up the local copy of an instance.
	Instance(app, id string) (registry.InstanceView, bool)
	// Snapshot returns the whole registry (resync).
	Snapshot() *registry.Snapshot
	// ClientLive returns the instances whose clients renew through this
	// node: what a catch-up replays (registry.Registry.ClientLive).
	ClientLive() []*registry.Instance
	// Subscribe, RenewalsReady and TakeRenewals are the change stream and
	// the renewal feed the replicator reads (registry package docs).
	Subscribe() *registry.Cursor
	RenewalsReady() <-chan struct{}
	RenewalsBacklogged(bound int) <-chan struct{}
	TakeRenewals([]registry.Renewal) []registry.Renewal
	// BeginSync and EndSync bracket a syncUp copy, so that cancels and
	// status writes that peers replicate meanwhile are not undone by it.
	BeginSync()
	EndSync() int
}

var _ Store = (*registry.Registry)(nil)

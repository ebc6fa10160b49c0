package registry

import (
	"slices"
	"time"
)

// The renewal feed: how client heartbeats reach replication without an
// event each, without changing the version and without a lock shared by all
// heartbeats.
//
// A heartbeat marks its lease pending (an atomic flag on the lease) and, if
// the flag was clear, pushes the lease onto a lock-free stack (renewHead,
// linked through lease.nextRenewed). So a lease is on the stack at most
// once: however many times an instance renews between two takes, it is
// replicated as one heartbeat carrying the newest state, and the stack never
// holds more entries than there are instances. Nothing is lost and nothing
// needs a bound. The first push onto an empty stack pokes renewWake; later
// pushes cost one compare-and-swap on the lease and one on the head.
//
// Heartbeats from peers are not fed: a peer's write is never replicated
// again. The feed is off until a consumer calls RenewalsReady, so a node
// without replication keeps no list.

// feedRenewalLocked records a client renewal of l. Called with a read
// stripe of mu held, so l is current.
func (r *Registry) feedRenewal(l *lease) {
	if !r.renewFeed.Load() || l.renewPending.Load() || !l.renewPending.CompareAndSwap(false, true) {
		return
	}
	for {
		old := r.renewHead.Load()
		l.nextRenewed = old
		if r.renewHead.CompareAndSwap(old, l) {
			if old == nil {
				select {
				case r.renewWake <- struct{}{}:
				default:
				}
			}
			return
		}
	}
}

// RenewalsReady turns the renewal feed on and returns the channel that
// receives a value when renewals are waiting to be taken. There is one
// renewal consumer per registry (replication); it calls TakeRenewals
// whenever this fires.
func (r *Registry) RenewalsReady() <-chan struct{} {
	r.renewFeed.Store(true)
	return r.renewWake
}

// TakeRenewals appends to buf[:0] every lease renewed by a client since
// the last take, once each and in the order of their first renewal since
// then, with its current instance and last renewal, and clears the feed. Leases cancelled or evicted meanwhile are left out.
// It takes a read stripe of the registry lock only to check that.
func (r *Registry) TakeRenewals(buf []Renewal) []Renewal {
	buf = buf[:0]
	l := r.renewHead.Swap(nil)
	if l == nil {
		return buf
	}
	i := r.mu.rlockStripe()
	for l != nil {
		// Read the link before clearing the flag: once it is clear, a
		// heartbeat may push l again and overwrite it.
		next := l.nextRenewed
		l.nextRenewed = nil
		l.renewPending.Store(false)
		in := l.inst
		if r.lookupLocked(in.App, in.ID()) == l {
			buf = append(buf, Renewal{Key: InstanceKey{in.App, in.ID()}, Instance: in, At: time.Unix(0, l.lastRenewal.Load())})
		}
		l = next
	}
	r.mu.runlockStripe(i)
	// The stack is newest first; hand them out in the order they were
	// first renewed since the last take.
	slices.Reverse(buf)
	return buf
}

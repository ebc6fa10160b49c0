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
// the flag was clear, pushes the lease onto a lock-free stack (one of
// lockStripes, the one of the read stripe it holds, linked through
// lease.nextRenewed). So a lease is on a stack at most once: however many
// times an instance renews between two takes, it is replicated as one
// heartbeat carrying the newest state, and the stacks never hold more
// entries than there are instances. Nothing is lost and nothing needs a
// bound. The first push after a take pokes renewWake (renewWoken makes that
// one send per take); later pushes cost one compare-and-swap on the lease
// and one on a stack head that 1/lockStripes of the heartbeats share.
//
// Heartbeats from peers are not fed: a peer's write is never replicated
// again. The feed is off until a consumer calls RenewalsReady, so a node
// without replication keeps no list.

// feedRenewalLocked records a client renewal of l. Called with a read
// stripe of mu held, so l is current.
func (r *Registry) feedRenewal(l *lease, stripe int) {
	if !r.renewFeed.Load() || l.renewPending.Load() || !l.renewPending.CompareAndSwap(false, true) {
		return
	}
	head := &r.renewHeads[stripe].p
	for {
		old := head.Load()
		l.nextRenewed = old
		if head.CompareAndSwap(old, l) {
			break
		}
	}
	if !r.renewWoken.Load() && r.renewWoken.CompareAndSwap(false, true) {
		select {
		case r.renewWake <- struct{}{}:
		default:
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
// the last take, once each, with its current instance and last renewal,
// and clears the feed. Renewals come in no particular order (pushed on one
// stack are in push order): each is independent of the others, and a
// lease's register always precedes it in the change stream. Leases
// cancelled or evicted meanwhile are left out (a key registered again has a
// new lease, pushed only when it is renewed). It takes a read stripe of the
// registry lock only to check that.
func (r *Registry) TakeRenewals(buf []Renewal) []Renewal {
	buf = buf[:0]
	// Clear the wake-up flag first: a push from now on wakes the consumer
	// again, so nothing pushed after the swaps below waits unseen.
	r.renewWoken.Store(false)
	var lists [lockStripes]*lease
	any := false
	for s := range r.renewHeads {
		lists[s] = r.renewHeads[s].p.Swap(nil)
		any = any || lists[s] != nil
	}
	if !any {
		return buf
	}
	i := r.mu.rlockStripe()
	for _, l := range lists {
		start := len(buf)
		for l != nil {
			// Read the link before clearing the flag: once it is clear, a
			// heartbeat may push l again and overwrite it.
			next := l.nextRenewed
			l.nextRenewed = nil
			l.renewPending.Store(false)
			if !l.removed {
				// The key from the lease, not from the instance: at a
				// million instances the instance is one more cache miss
				// per renewal taken, and the lease's key is the same.
				buf = append(buf, Renewal{Key: l.keyOf(), Instance: l.inst, At: time.Unix(0, l.lastRenewal.Load())})
			}
			l = next
		}
		// Each stack is newest first.
		slices.Reverse(buf[start:])
	}
	r.mu.runlockStripe(i)
	return buf
}

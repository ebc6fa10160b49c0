package registry

import (
	"runtime"
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
// and one on a stack head that 1/lockStripes of the heartbeats share, and
// an add to the stack's count on the head's own cache line. The count lets
// the consumer take its rounds seldom (fewer, larger batches: a peer wakes
// up once for many heartbeats) without a flood making one round too large
// for a peer's queue: the push that brings a stack to its share of the
// consumer's bound pokes renewFull (RenewalsBacklogged).
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
	stack := &r.renewHeads[stripe]
	for {
		old := stack.p.Load()
		l.nextRenewed = old
		if stack.p.CompareAndSwap(old, l) {
			break
		}
	}
	// Equal, not at least: one poke per stack and take.
	if n := stack.n.Add(1); n == r.renewStripeBound.Load() {
		poke(r.renewFull)
	}
	if !r.renewWoken.Load() && r.renewWoken.CompareAndSwap(false, true) {
		poke(r.renewWake)
	}
}

// poke sends on a wake-up channel of capacity one without blocking: a
// value already waiting says the same.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// drain empties a wake-up channel.
func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
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

// RenewalsBacklogged returns the channel that receives a value when about
// bound renewals wait to be taken, so that the consumer may take them
// sooner than it would: a consumer that takes its renewals seldom still
// takes no more than about bound at a time, whatever the heartbeat rate.
// Each stack (one per processor, up to lockStripes) pokes once per take
// when it holds its share of bound, so the channel fires with between
// bound/GOMAXPROCS (every heartbeat on one processor) and bound renewals
// pending, plus those pushed until the consumer takes them. bound ≤ 0
// turns it off; RenewalsReady still fires on the first renewal after a
// take.
func (r *Registry) RenewalsBacklogged(bound int) <-chan struct{} {
	share := int64(0)
	if bound > 0 {
		procs := min(max(runtime.GOMAXPROCS(0), 1), lockStripes)
		share = max(int64(bound/procs), 1)
	}
	r.renewStripeBound.Store(share)
	return r.renewFull
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
	// The pokes of what this take collects are stale: drained first. Then
	// the wake-up flag is cleared: a push from now on wakes the consumer
	// again, so nothing pushed after the swaps below waits unseen.
	drain(r.renewWake)
	drain(r.renewFull)
	r.renewWoken.Store(false)
	var lists [lockStripes]*lease
	any := false
	for s := range r.renewHeads {
		// A push racing this (its swap of the head on one side, its add
		// on the other) is counted for the wrong take: the count, and so
		// the poke, may be off by the few pushes in flight.
		lists[s] = r.renewHeads[s].p.Swap(nil)
		r.renewHeads[s].n.Store(0)
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

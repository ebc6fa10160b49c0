package registry

import "time"

// deltaRecord is one visible change, kept for the delta fetch. inst is the
// instance as it was right after the change (immutable), with ActionType
// saying what happened. Eureka's delta points at the live, mutable instance
// instead, so it shows the current state under an old action (bug 11).
type deltaRecord struct {
	at          time.Time
	key         InstanceKey
	inst        *Instance
	lastRenewal int64 // ms
}

// deltaQueue is a FIFO of changes, oldest first.
type deltaQueue struct {
	items []deltaRecord
	head  int
	// pushed and pruned count records ever pushed and pruned, so that the
	// snapshot builder can tell which records came and went since its last
	// build (records()[i] is record number pruned+i).
	pushed, pruned uint64
}

func (q *deltaQueue) push(rec deltaRecord) {
	q.items = append(q.items, rec)
	q.pushed++
}

func (q *deltaQueue) len() int { return len(q.items) - q.head }

func (q *deltaQueue) records() []deltaRecord { return q.items[q.head:] }

// pruneBefore drops records older than cutoff from the front, stopping at
// the first younger one, and reports how many went.
func (q *deltaQueue) pruneBefore(cutoff time.Time) int {
	n := 0
	for q.head < len(q.items) && q.items[q.head].at.Before(cutoff) {
		q.items[q.head] = deltaRecord{}
		q.head++
		n++
	}
	q.pruned += uint64(n)
	// Compact once the dead prefix is the larger part, so memory stays
	// proportional to what is retained.
	if q.head > 0 && q.head >= len(q.items)/2 {
		live := copy(q.items, q.items[q.head:])
		clear(q.items[live:])
		q.items = q.items[:live]
		q.head = 0
	}
	return n
}

// PruneDeltas drops changes older than DeltaRetention from the delta queue.
// Run calls it every DeltaRetentionInterval.
func (r *Registry) PruneDeltas() int { return r.pruneDeltas(r.now()) }

func (r *Registry) pruneDeltas(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.deltas.pruneBefore(now.Add(-r.cfg.DeltaRetention))
	if n > 0 {
		r.deltaVersion++
	}
	return n
}

package simclient

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Renewals are driven by one scheduler goroutine and a pool of workers
// rather than a goroutine and a ticker per instance: a min-heap holds the
// next due time of every instance that is not being worked on; the
// scheduler pops what is due and hands it to a worker; the worker renews,
// then pushes the instance back with its next due time. An instance is
// therefore either in the heap or with exactly one worker, never both,
// which is what lets a worker touch the instance's state without a lock
// (the heap's mutex orders one worker's writes before the next one's
// reads).

// initialDue spreads n instances evenly over one interval, starting at
// start: instance i first renews at start + interval·(i+1)/n, so the last
// one renews one interval after start and the first one 1/n of an
// interval after it (not at once: it has just registered).
func initialDue(start time.Time, i, n int, interval time.Duration) time.Time {
	return start.Add(time.Duration(int64(interval) / int64(n) * int64(i+1)))
}

// nextDue is when an instance renews next after a renewal that was due at
// due and finished at done: one interval after the due time, which keeps
// the phases spread, but never before done, so a renewal that took longer
// than the interval is followed by one at once, not by a burst of missed
// ones (Java's TimedSupervisorTask schedules after completion, too).
func nextDue(due, done time.Time, interval time.Duration) time.Time {
	next := due.Add(interval)
	if next.Before(done) {
		return done
	}
	return next
}

type dueItem struct {
	due time.Time
	idx int // index into Fleet.insts
}

// dueHeap is a container/heap min-heap by due time.
type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// schedule is the heap of instances waiting for their next renewal.
type schedule struct {
	// mu guards items.
	mu    sync.Mutex
	items dueHeap

	// wake tells the scheduler that a push put a new item at the top.
	wake chan struct{}
}

func newSchedule(items []dueItem) *schedule {
	s := &schedule{items: dueHeap(items), wake: make(chan struct{}, 1)}
	heap.Init(&s.items)
	return s
}

func (s *schedule) push(it dueItem) {
	s.mu.Lock()
	heap.Push(&s.items, it)
	top := s.items[0].idx == it.idx
	s.mu.Unlock()
	if top {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// popDue removes and returns the first item if it is due at now.
// Otherwise it returns how long until the first item is due, or -1 when
// the heap is empty.
func (s *schedule) popDue(now time.Time) (dueItem, time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) == 0 {
		return dueItem{}, -1, false
	}
	if d := s.items[0].due.Sub(now); d > 0 {
		return dueItem{}, d, false
	}
	return heap.Pop(&s.items).(dueItem), 0, true
}

// len returns the number of items waiting.
func (s *schedule) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// run hands due items to jobs until ctx ends.
func (s *schedule) run(ctx context.Context, jobs chan<- dueItem) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		it, wait, ok := s.popDue(time.Now())
		if ok {
			select {
			case jobs <- it:
				continue
			case <-ctx.Done():
				return
			}
		}
		if wait < 0 {
			wait = time.Hour // empty: every item is with a worker; a push wakes us
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.wake:
		case <-ctx.Done():
			return
		}
	}
}

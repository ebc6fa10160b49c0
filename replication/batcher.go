package replication

import (
	"time"

	"github.com/muster-registry/muster/registry"
)

// batcher is one peer's queue of pending tasks. It is pure: no goroutines,
// no locks, no clock. The peer's goroutine owns it and passes time in.
//
// It differs from Eureka's AcceptorExecutor in three ways:
//   - a task that replaces a pending one with the same instance and action
//     moves to the back of the order. Eureka keeps the old position, so
//     register, cancel, register for one instance reaches the peer as
//     register, cancel, and the instance is gone there;
//   - overflow drops the oldest heartbeat first, and counts it (Eureka drops
//     the oldest task of any kind, silently: EUREKA.md bug 19);
//   - register and heartbeat tasks of an instance without a renewal interval
//     expire after ExpectedRenewalInterval (30 s), not the 90 s lease
//     duration Eureka falls back to (PeerEurekaNode#getLeaseRenewalOf).
type batcher struct {
	maxQueue        int           // tasks pending at most
	taskMaxAge      time.Duration // expiry of cancel and status tasks
	renewalInterval time.Duration // expiry of register/heartbeat tasks without an interval

	head, tail     *node            // every pending task, oldest first
	hbHead, hbTail *node            // pending heartbeats only, oldest first
	index          map[taskID]*node // pending task per instance and action
	n              int              // len(index)
	free           *node            // recycled nodes, linked through next

	// run is a round of tasks with distinct slots that arrived while
	// nothing else was pending (addRound), kept as it came: run[runNext:]
	// are pending, oldest first, ahead of nothing. A healthy peer's sender
	// takes each round whole into the next batch, so the index and the
	// lists would only be filled to be emptied again: per task and peer, a
	// hash of its three strings, a map insert and delete, and a read of
	// its instance; that was most of a sender's own CPU under heartbeat
	// load (bench replcpu). An add or a requeue first queues what is left
	// of the run like any other tasks (queueRun), so dedupe, overflow and
	// order hold as before.
	run     []Task
	runNext int

	// Counters, read by the owner.
	replaced uint64 // tasks superseded by a newer one for the same instance and action
	overflow uint64 // tasks dropped because the queue was full
	expired  uint64 // tasks dropped because they were too old to matter
}

// node is a queue entry, in the list of all tasks and, for heartbeats, in
// the list of heartbeats too, so the oldest heartbeat is found in O(1).
type node struct {
	task           Task
	expires        time.Time // the task is dropped once now is after this
	prev, next     *node
	hbPrev, hbNext *node
}

func newBatcher(maxQueue int, taskMaxAge, renewalInterval time.Duration) *batcher {
	return &batcher{
		maxQueue:        maxQueue,
		taskMaxAge:      taskMaxAge,
		renewalInterval: renewalInterval,
		index:           make(map[taskID]*node),
	}
}

// len returns the number of pending tasks.
func (b *batcher) len() int { return b.n + len(b.run) - b.runNext }

// ttl is how long t stays worth sending. Register and heartbeat tasks live
// for the instance's renewal interval: by then the next heartbeat has
// replaced the heartbeat, and a lost register is repaired by the peer's 404
// to a later heartbeat. Cancel and status tasks live for taskMaxAge
// (eureka.server.max-time-for-replication).
func (b *batcher) ttl(t *Task) time.Duration {
	switch t.Action {
	case registry.ActionRegister, registry.ActionHeartbeat:
		if t.Instance != nil && t.Instance.RenewalIntervalSecs > 0 {
			return time.Duration(t.Instance.RenewalIntervalSecs) * time.Second
		}
		return b.renewalInterval
	}
	return b.taskMaxAge
}

// add queues t. A pending task with the same instance and action is
// replaced, and t goes to the back of the order. When the queue is full,
// the oldest heartbeat makes room, or the oldest task if no heartbeat is
// pending. A task that is already expired is dropped at once.
func (b *batcher) add(t Task, now time.Time) {
	b.queueRun(now)
	expires := t.CreatedAt.Add(b.ttl(&t))
	if now.After(expires) {
		b.expired++
		return
	}
	id := t.id()
	if nd, ok := b.index[id]; ok {
		b.unlink(nd)
		nd.task, nd.expires = t, expires
		b.pushBack(nd)
		b.replaced++
		return
	}
	for b.n >= b.maxQueue && b.n > 0 {
		b.evictOne()
	}
	nd := b.alloc()
	nd.task, nd.expires = t, expires
	b.index[id] = nd
	b.n++
	b.pushBack(nd)
}

// addRound queues tasks, in order, as add would each; distinct says that
// no two of them share an instance and action. A distinct round that
// arrives when nothing is pending is kept as the run, as it came (less
// the tasks already expired, dropped as add drops them).
func (b *batcher) addRound(tasks []Task, distinct bool, now time.Time) {
	if !distinct || b.len() > 0 || len(tasks) > b.maxQueue {
		for i := range tasks {
			b.add(tasks[i], now)
		}
		return
	}
	b.run, b.runNext = b.run[:0], 0
	for i := range tasks {
		if now.After(tasks[i].CreatedAt.Add(b.ttl(&tasks[i]))) {
			b.expired++
			continue
		}
		b.run = append(b.run, tasks[i])
	}
}

// queueRun moves what is left of the run into the index and the lists,
// before anything else is queued or requeued.
func (b *batcher) queueRun(now time.Time) {
	if len(b.run) == 0 {
		return
	}
	run, left := b.run, b.run[b.runNext:]
	b.run, b.runNext = nil, 0 // no run from here on: add queues
	for i := range left {
		b.add(left[i], now)
	}
	b.run = run
	b.resetRun()
}

func (b *batcher) resetRun() {
	clear(b.run) // the buffer keeps no instance alive
	b.run, b.runNext = b.run[:0], 0
}

// take removes and returns up to max tasks from the front, in order.
// Expired tasks met on the way are dropped and counted. It returns nil when
// nothing is pending.
func (b *batcher) take(now time.Time, max int) []Task {
	out, _ := b.takeSized(now, max, 0, nil)
	return out
}

// takeSized is take with a byte budget as well: the tasks taken weigh at
// most maxBytes by size (the peer's wire size of a task). A task that alone
// weighs more can never be sent; it is removed and returned in tooLarge,
// for the caller to count and report. maxBytes ≤ 0 means no budget.
func (b *batcher) takeSized(now time.Time, max, maxBytes int, size func(*Task) int) (out, tooLarge []Task) {
	if b.runNext < len(b.run) { // then nothing else is pending
		return b.takeRun(now, max, maxBytes, size)
	}
	total := 0
	for b.head != nil && len(out) < max {
		nd := b.head
		if now.After(nd.expires) {
			b.remove(nd)
			b.expired++
			b.release(nd)
			continue
		}
		if maxBytes > 0 && size != nil {
			n := size(&nd.task)
			if n > maxBytes {
				b.remove(nd)
				tooLarge = append(tooLarge, nd.task)
				b.release(nd)
				continue
			}
			if total+n > maxBytes {
				break // the next batch starts with it
			}
			total += n
		}
		b.remove(nd)
		if out == nil {
			out = make([]Task, 0, min(max, b.n+1))
		}
		out = append(out, nd.task)
		b.release(nd)
	}
	return out, tooLarge
}

// takeRun is takeSized from the run.
func (b *batcher) takeRun(now time.Time, max, maxBytes int, size func(*Task) int) (out, tooLarge []Task) {
	total := 0
	for b.runNext < len(b.run) && len(out) < max {
		t := &b.run[b.runNext]
		if now.After(t.CreatedAt.Add(b.ttl(t))) {
			b.runNext++
			b.expired++
			continue
		}
		if maxBytes > 0 && size != nil {
			n := size(t)
			if n > maxBytes {
				b.runNext++
				tooLarge = append(tooLarge, *t)
				continue
			}
			if total+n > maxBytes {
				break // the next batch starts with it
			}
			total += n
		}
		if out == nil {
			out = make([]Task, 0, min(max, b.len()))
		}
		out = append(out, *t)
		b.runNext++
	}
	if b.runNext == len(b.run) {
		b.resetRun()
	}
	return out, tooLarge
}

// requeueFront puts the tasks of a failed batch back at the front, in their
// order, ahead of everything queued since: those came later, so this keeps
// the order in which the registry applied the changes. A task for which a
// newer one with the same instance and action is pending is left out (the
// newer one supersedes it; counted as replaced), and so is an expired one.
// If the queue overflows, the usual victims go: oldest heartbeat first.
func (b *batcher) requeueFront(tasks []Task, now time.Time) {
	b.queueRun(now)
	for i := len(tasks) - 1; i >= 0; i-- {
		t := tasks[i]
		id := t.id()
		if _, ok := b.index[id]; ok {
			b.replaced++
			continue
		}
		expires := t.CreatedAt.Add(b.ttl(&t))
		if now.After(expires) {
			b.expired++
			continue
		}
		nd := b.alloc()
		nd.task, nd.expires = t, expires
		b.index[id] = nd
		b.n++
		b.pushFront(nd)
	}
	for b.n > b.maxQueue && b.n > 0 {
		b.evictOne()
	}
}

// evictOne drops the oldest heartbeat, or the oldest task when no heartbeat
// is pending: a lost heartbeat costs nothing, because the next one replaces
// it within a renewal interval.
func (b *batcher) evictOne() {
	nd := b.hbHead
	if nd == nil {
		nd = b.head
	}
	b.remove(nd)
	b.release(nd)
	b.overflow++
}

// remove takes nd out of the lists and the index.
func (b *batcher) remove(nd *node) {
	b.unlink(nd)
	delete(b.index, nd.task.id())
	b.n--
}

// unlink takes nd out of the lists only.
func (b *batcher) unlink(nd *node) {
	if nd.prev != nil {
		nd.prev.next = nd.next
	} else {
		b.head = nd.next
	}
	if nd.next != nil {
		nd.next.prev = nd.prev
	} else {
		b.tail = nd.prev
	}
	nd.prev, nd.next = nil, nil
	if nd.task.Action != registry.ActionHeartbeat {
		return
	}
	if nd.hbPrev != nil {
		nd.hbPrev.hbNext = nd.hbNext
	} else {
		b.hbHead = nd.hbNext
	}
	if nd.hbNext != nil {
		nd.hbNext.hbPrev = nd.hbPrev
	} else {
		b.hbTail = nd.hbPrev
	}
	nd.hbPrev, nd.hbNext = nil, nil
}

func (b *batcher) pushBack(nd *node) {
	nd.prev = b.tail
	if b.tail != nil {
		b.tail.next = nd
	} else {
		b.head = nd
	}
	b.tail = nd
	if nd.task.Action != registry.ActionHeartbeat {
		return
	}
	nd.hbPrev = b.hbTail
	if b.hbTail != nil {
		b.hbTail.hbNext = nd
	} else {
		b.hbHead = nd
	}
	b.hbTail = nd
}

func (b *batcher) pushFront(nd *node) {
	nd.next = b.head
	if b.head != nil {
		b.head.prev = nd
	} else {
		b.tail = nd
	}
	b.head = nd
	if nd.task.Action != registry.ActionHeartbeat {
		return
	}
	nd.hbNext = b.hbHead
	if b.hbHead != nil {
		b.hbHead.hbPrev = nd
	} else {
		b.hbTail = nd
	}
	b.hbHead = nd
}

// alloc returns a recycled node, or a new one. Recycling keeps the steady
// heartbeat traffic from allocating a node per task.
func (b *batcher) alloc() *node {
	nd := b.free
	if nd == nil {
		return new(node)
	}
	b.free = nd.next
	nd.next = nil
	return nd
}

// release recycles nd; it must already be out of the lists.
func (b *batcher) release(nd *node) {
	*nd = node{next: b.free} // drop the instance pointer for the GC
	b.free = nd
}

package registry

import (
	"sync"
	"sync/atomic"
)

// outbox is the registry's ordered change stream: a ring of the last
// len(ring) events. Writers append under Registry.mu (held for writing), so
// events are in apply order and Seq follows the version; consumers copy
// events out under outbox.mu only, never a registry lock, and wake through
// their own channel, which the registry pokes after releasing its lock.
//
// Lock order: Registry.mu, then outbox.mu.
type outbox struct {
	mask uint64

	// mu guards ring and head.
	mu   sync.Mutex
	ring []Event
	head uint64 // Seq of the newest event; 0 before the first

	// cursors is the list poked after every write; replaced, never
	// modified. cursorsMu guards replacing it.
	cursors   atomic.Pointer[[]*Cursor]
	cursorsMu sync.Mutex
}

func newOutbox(size int) *outbox {
	n := 1
	for n < size {
		n <<= 1
	}
	return &outbox{ring: make([]Event, n), mask: uint64(n - 1)}
}

// appendLocked adds ev (whose Seq is head+1). The caller holds Registry.mu
// for writing.
func (o *outbox) appendLocked(ev Event) {
	o.mu.Lock()
	o.ring[ev.Seq&o.mask] = ev
	o.head = ev.Seq
	o.mu.Unlock()
}

// notify wakes every cursor without blocking. Called after Registry.mu is
// released.
func (o *outbox) notify() {
	cs := o.cursors.Load()
	if cs == nil {
		return
	}
	for _, c := range *cs {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Cursor is one consumer's position in the change stream. Each consumer
// (replication, payload cache, watchers, metrics) has its own and reads at
// its own pace; the registry never waits for one. The stream keeps the last
// Config.OutboxSize events: a consumer that falls further behind than that
// is told to resync (Read returns resync = true) instead of silently
// missing changes. A Cursor is used by one goroutine.
type Cursor struct {
	o    *outbox
	next uint64 // Seq of the next event to read
	wake chan struct{}
}

// Subscribe returns a cursor positioned after the newest event: it reads
// every change applied from now on. Close it when done.
func (r *Registry) Subscribe() *Cursor {
	c, _ := r.out.subscribe(func(head uint64) (uint64, bool) { return head + 1, false })
	return c
}

// subscribe lists a new cursor, placed at the Seq that position picks from
// the head (under mu, so no event slips between the two), and passes on
// position's resync.
func (o *outbox) subscribe(position func(head uint64) (next uint64, resync bool)) (*Cursor, bool) {
	o.mu.Lock()
	next, resync := position(o.head)
	c := &Cursor{o: o, next: next, wake: make(chan struct{}, 1)}
	o.mu.Unlock()
	o.cursorsMu.Lock()
	var list []*Cursor
	if cs := o.cursors.Load(); cs != nil {
		list = append(list, *cs...)
	}
	list = append(list, c)
	o.cursors.Store(&list)
	o.cursorsMu.Unlock()
	return c, resync
}

// Close detaches the cursor; it is no longer woken.
func (c *Cursor) Close() {
	o := c.o
	o.cursorsMu.Lock()
	defer o.cursorsMu.Unlock()
	cs := o.cursors.Load()
	if cs == nil {
		return
	}
	list := make([]*Cursor, 0, len(*cs))
	for _, x := range *cs {
		if x != c {
			list = append(list, x)
		}
	}
	o.cursors.Store(&list)
}

// Ready receives a value after changes were applied since the last Read
// drained the stream. It may fire spuriously; Read tells.
func (c *Cursor) Ready() <-chan struct{} { return c.wake }

// Read copies the next events, oldest first, into buf[:0] up to its
// capacity (at least one event) and advances past them. It returns no
// events when the cursor is at the head. When the cursor fell so far behind
// that the events it needs have been overwritten, it returns resync = true
// and no events, and moves to the head: the consumer must rebuild its state
// from a Snapshot taken after this call (whose Version is at least the
// head), then go on reading; changes after the head arrive as events, some
// of which the snapshot may already show, so applying them must be
// idempotent. Read never blocks on the registry's lock.
func (c *Cursor) Read(buf []Event) (events []Event, resync bool) {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.next > o.head {
		return buf[:0], false
	}
	size := uint64(len(o.ring))
	if o.head >= size && c.next <= o.head-size {
		c.next = o.head + 1
		return buf[:0], true
	}
	n := o.head - c.next + 1
	if cp := uint64(cap(buf)); cp > 0 && n > cp {
		n = cp
	}
	buf = buf[:0]
	for s := c.next; s < c.next+n; s++ {
		buf = append(buf, o.ring[s&o.mask])
	}
	c.next += n
	if c.next <= o.head {
		// More to read: make sure the consumer comes back.
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return buf, false
}

// Lag is how many events the cursor has not read yet.
func (c *Cursor) Lag() uint64 {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.next > o.head {
		return 0
	}
	return o.head - c.next + 1
}

// Head is the Seq of the newest event (the registry version).
func (c *Cursor) Head() uint64 {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.head
}

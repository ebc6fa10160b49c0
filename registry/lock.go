package registry

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// lockStripes is how many read stripes stripedRWMutex has. Heartbeats pick
// one at random, so two cores meet on the same stripe 1/lockStripes of the
// time; writers take all of them.
const lockStripes = 16

// stripedRWMutex is a reader-writer lock whose read side is split into
// stripes on separate cache lines: sync.RWMutex counts readers in one word,
// and on a heartbeat path that is nothing but RLock, atomic store, RUnlock
// that word bounces between cores and the renewals stop scaling. A reader
// holds one stripe; a writer holds every stripe, so it still excludes every
// reader, and a reader holding any one stripe excludes every writer. Writes
// cost lockStripes lock operations, which is noise beside what a write does.
type stripedRWMutex struct {
	stripes [lockStripes]struct {
		sync.RWMutex
		_ [64 - 24]byte // pad to a cache line (sync.RWMutex is 24 bytes)
	}
}

// Lock takes every stripe, in order.
func (m *stripedRWMutex) Lock() {
	for i := range m.stripes {
		m.stripes[i].Lock()
	}
}

// Unlock releases every stripe.
func (m *stripedRWMutex) Unlock() {
	for i := range m.stripes {
		m.stripes[i].Unlock()
	}
}

// RLock takes stripe 0 for reading: for readers that are not on a hot path.
func (m *stripedRWMutex) RLock() { m.stripes[0].RLock() }

// RUnlock releases what RLock took.
func (m *stripedRWMutex) RUnlock() { m.stripes[0].RUnlock() }

// rlockStripe takes a random stripe for reading and returns it for
// runlockStripe. math/rand/v2's top-level source is per-thread and lock-free.
func (m *stripedRWMutex) rlockStripe() int {
	i := int(rand.Uint32() % lockStripes)
	m.stripes[i].RLock()
	return i
}

func (m *stripedRWMutex) runlockStripe(i int) { m.stripes[i].RUnlock() }

// counterShards is how many cells a shardedCounter spreads its adds over.
const counterShards = 8

// shardedCounter is a counter that many goroutines add to without sharing
// a cache line: each add goes to a random cell, and Load sums the cells.
type shardedCounter struct {
	cells [counterShards]struct {
		n atomic.Int64
		_ [64 - 8]byte
	}
}

func (c *shardedCounter) add(d int64) { c.addAt(int(rand.Uint32()), d) }

// addAt adds to the cell picked by hint (any int; a caller that already
// drew a random stripe passes it and saves a draw).
func (c *shardedCounter) addAt(hint int, d int64) { c.cells[uint(hint)%counterShards].n.Add(d) }

func (c *shardedCounter) load() int64 {
	var s int64
	for i := range c.cells {
		s += c.cells[i].n.Load()
	}
	return s
}

func (c *shardedCounter) reset() {
	for i := range c.cells {
		c.cells[i].n.Store(0)
	}
}

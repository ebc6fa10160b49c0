package registry

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname (localStripe)
)

// lockStripes is how many read stripes stripedRWMutex has. A heartbeat
// takes its processor's stripe (localStripe), so cores do not share one
// until there are more than lockStripes of them; writers take all.
const lockStripes = 16

// stripedRWMutex is a reader-writer lock whose read side is split into
// stripes on separate cache lines: sync.RWMutex counts readers in one word,
// and on a heartbeat path that is nothing but RLock, atomic store, RUnlock
// that word bounces between cores and the renewals stop scaling. A reader
// holds one stripe; a writer holds every stripe, so it still excludes every
// reader, and a reader holding any one stripe excludes every writer. Writes
// cost lockStripes lock operations, which is noise beside what a write does.
type stripedRWMutex struct {
	_       cacheLinePad // keeps stripe 0 off the line of the field before
	stripes [lockStripes]struct {
		// one stripe of Registry.mu; see there for what it guards
		sync.RWMutex
		_ [128 - 24]byte // two cache lines per stripe (sync.RWMutex is 24 bytes)
	}
}

// cacheLinePad and the 128-byte cells around hot words keep two words
// that different cores write off one cache line whatever the alignment Go
// gives the struct (it promises none): a hot word is at least 64 bytes from
// anything outside its own cell.
type cacheLinePad [64]byte

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

// rlockStripe takes this processor's stripe for reading and returns it
// for runlockStripe (and as the cell hint of sharded counters).
func (m *stripedRWMutex) rlockStripe() int {
	i := localStripe()
	m.stripes[i].RLock()
	return i
}

// localStripe returns this processor's stripe number: the number of the
// processor (Go's P) the goroutine runs on, modulo lockStripes. Processors
// 0 to GOMAXPROCS-1 thus hold distinct stripes, and up to counterShards of
// them distinct counter cells (addAt takes the stripe as its hint), for as
// long as the process runs. A goroutine that moves to another P between
// lock and unlock only makes two Ps share a stripe for a while: the index
// it unlocks is the one it locked.
//
// The number comes from runtime.procPin, the call sync.Pool uses for its
// per-P slots. The stripes used to come from tokens kept in a sync.Pool,
// numbered from a global sequence; but a pool forgets its tokens (at the
// second collection in which a P took none, and whenever GOMAXPROCS
// changes), a benchmark's ramp-up alone drew a dozen, and the next number
// of the sequence soon gave a P the stripe, or the counter cells, that
// another P still held. Then every heartbeat of both wrote one reader
// count and one cell, and a second core cost CPU instead of adding
// throughput. procPin allocates nothing and forgets nothing.
func localStripe() int {
	p := procPin()
	procUnpin()
	return p % lockStripes
}

// procPin and procUnpin are the runtime's: pin the goroutine to its P and
// return the P's number, and undo it. The runtime keeps them for callers
// outside the standard library (go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

func (m *stripedRWMutex) runlockStripe(i int) { m.stripes[i].RUnlock() }

// counterShards is how many cells a shardedCounter spreads its adds over.
const counterShards = 8

// shardedCounter is a counter that many goroutines add to without sharing
// a cache line: each add goes to a random cell, and Load sums the cells.
type shardedCounter struct {
	_     cacheLinePad
	cells [counterShards]struct {
		n atomic.Int64
		_ [128 - 8]byte
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

package registry

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// rateSlices is how many slices a MeasuredRate window is cut into.
const rateSlices = 12

// rateRing is the number of slices kept: the window plus the current one.
const rateRing = rateSlices + 1

// MeasuredRate counts events over a window that slides in steps of a
// twelfth of the window (5 s for Eureka's 60 s), without a timer thread:
// slices roll lazily when Increment or Count is called. Count reports the
// events of the last full window that ends at a slice boundary.
//
// Eureka's MeasuredRate is a tumbling 60 s bucket: a drop in renewals shows
// up to two windows later, which can be after the dead leases have
// expired and been evicted (90 s lease, 60 s eviction runs), so
// self-preservation protects nothing in that gap. Sliding in twelfths, a
// drop to half shows within a third of a window plus one slice. It is
// safe for concurrent use; build it with NewMeasuredRate.
//
// Increment runs on every heartbeat, so it takes no lock: it adds to one of
// counterShards cells of the current slice. Only the first Increment of a
// new slice takes mu, to clear the slices it passes before publishing the
// new current slice; Count and Reset take mu too.
type MeasuredRate struct {
	window, slice time.Duration

	// cur is the number of the current slice; it only grows (until Reset).
	// It is written under mu after the slices it passes are cleared.
	cur   atomic.Int64
	start atomic.Int64 // start of slice number 0, Unix ns; written under mu

	// mu guards rolling and resetting counts (and writes of start).
	mu     sync.Mutex
	counts [rateRing]shardedCounter // ring: slice n is counts[n % rateRing]
}

// NewMeasuredRate returns a rate whose first window starts at now.
func NewMeasuredRate(window time.Duration, now time.Time) *MeasuredRate {
	m := &MeasuredRate{window: window, slice: window / rateSlices}
	m.start.Store(now.UnixNano())
	return m
}

// sliceOf is the number of the slice holding now; -1 before the start.
func (m *MeasuredRate) sliceOf(now time.Time) int64 {
	elapsed := now.UnixNano() - m.start.Load()
	if elapsed < 0 {
		return -1
	}
	return elapsed / int64(m.slice)
}

// Increment counts one event at now. It takes no lock except on the first
// event of a new slice.
func (m *MeasuredRate) Increment(now time.Time) { m.increment(now, int(rand.Uint32())) }

// increment counts one event at now in the cell picked by hint (see
// shardedCounter.addAt).
func (m *MeasuredRate) increment(now time.Time, hint int) {
	n := m.sliceOf(now)
	cur := m.cur.Load()
	if n > cur {
		m.mu.Lock()
		m.rollLocked(n)
		m.mu.Unlock()
		cur = m.cur.Load()
	}
	// An event timed a little before the current slice (another goroutine
	// read the clock later and rolled first) still belongs to its own slice
	// while that is in the ring; anything older counts in the current one.
	if n <= cur-rateSlices || n < 0 {
		n = cur
	}
	m.counts[n%rateRing].addAt(hint, 1)
}

// Count returns the number of events in the last full window (the
// rateSlices slices before the current one), and whether a full window has
// passed since the rate started: until then the count is 0 because nothing
// is known yet.
func (m *MeasuredRate) Count(now time.Time) (count int64, complete bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollLocked(m.sliceOf(now))
	cur := m.cur.Load()
	if cur < rateSlices {
		return 0, false
	}
	for n := cur - rateSlices; n < cur; n++ {
		count += m.counts[n%rateRing].load()
	}
	return count, true
}

// sliceAt is the number of the slice holding t, negative before the start
// (rounded down, so that t is at or after the start of slice k exactly when
// sliceAt(t) ≥ k). It stays valid until Reset.
func (m *MeasuredRate) sliceAt(t time.Time) int64 {
	elapsed, slice := t.UnixNano()-m.start.Load(), int64(m.slice)
	n := elapsed / slice
	if elapsed%slice < 0 {
		n--
	}
	return n
}

// lastWindowSlice is the number of the first slice of the window that
// Count reports: the window began where that slice begins.
func (m *MeasuredRate) lastWindowSlice(now time.Time) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollLocked(m.sliceOf(now))
	return m.cur.Load() - rateSlices
}

// Reset starts a fresh first window at now, forgetting all counts.
func (m *MeasuredRate) Reset(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start.Store(now.UnixNano())
	m.cur.Store(0)
	for i := range m.counts {
		m.counts[i].reset()
	}
}

// Window is the length of the window counted.
func (m *MeasuredRate) Window() time.Duration { return m.window }

// rollLocked advances the current slice to n, clearing the slices it
// passes (at most a ring's worth: beyond that all are clear) before it
// publishes n, so an Increment that sees the new slice never adds to a cell
// that is about to be cleared.
func (m *MeasuredRate) rollLocked(n int64) {
	cur := m.cur.Load()
	if n <= cur {
		return
	}
	from := max(cur+1, n-rateRing+1)
	for i := from; i <= n; i++ {
		m.counts[i%rateRing].reset()
	}
	m.cur.Store(n)
}

package registry

import (
	"sync"
	"time"
)

// rateSlices is how many slices a MeasuredRate window is cut into.
const rateSlices = 12

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
type MeasuredRate struct {
	window, slice time.Duration

	// mu guards every field below.
	mu     sync.Mutex
	start  time.Time             // start of slice number 0
	cur    int64                 // number of the current slice
	counts [rateSlices + 1]int64 // ring: slice n is counts[n % len]
}

// NewMeasuredRate returns a rate whose first window starts at now.
func NewMeasuredRate(window time.Duration, now time.Time) *MeasuredRate {
	return &MeasuredRate{window: window, slice: window / rateSlices, start: now}
}

// Increment counts one event at now.
func (m *MeasuredRate) Increment(now time.Time) {
	m.mu.Lock()
	m.rollLocked(now)
	m.counts[m.cur%int64(len(m.counts))]++
	m.mu.Unlock()
}

// Count returns the number of events in the last full window (the
// rateSlices slices before the current one), and whether a full window has
// passed since the rate started: until then the count is 0 because nothing
// is known yet.
func (m *MeasuredRate) Count(now time.Time) (count int64, complete bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollLocked(now)
	if m.cur < rateSlices {
		return 0, false
	}
	for n := m.cur - rateSlices; n < m.cur; n++ {
		count += m.counts[n%int64(len(m.counts))]
	}
	return count, true
}

// LastWindowStart returns when the window that Count reports began.
func (m *MeasuredRate) LastWindowStart(now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollLocked(now)
	return m.start.Add(time.Duration(m.cur-rateSlices) * m.slice)
}

// Reset starts a fresh first window at now, forgetting all counts.
func (m *MeasuredRate) Reset(now time.Time) {
	m.mu.Lock()
	m.start, m.cur, m.counts = now, 0, [rateSlices + 1]int64{}
	m.mu.Unlock()
}

// Window is the length of the window counted.
func (m *MeasuredRate) Window() time.Duration { return m.window }

// rollLocked advances the current slice to the one holding now, clearing
// the slices it passes (at most a ring's worth: beyond that all are clear).
func (m *MeasuredRate) rollLocked(now time.Time) {
	elapsed := now.Sub(m.start)
	if elapsed < 0 {
		return
	}
	n := int64(elapsed / m.slice)
	if n <= m.cur {
		return
	}
	from := max(m.cur+1, n-int64(len(m.counts))+1)
	for i := from; i <= n; i++ {
		m.counts[i%int64(len(m.counts))] = 0
	}
	m.cur = n
}

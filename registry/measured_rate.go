package registry

import (
	"sync"
	"time"
)

// MeasuredRate counts events in tumbling windows, like Eureka's MeasuredRate,
// but without a timer thread: buckets roll lazily when Increment or Count is
// called. Count reports the last complete window. It is safe for concurrent
// use; its zero value is not ready, use NewMeasuredRate.
type MeasuredRate struct {
	window time.Duration

	// mu guards start, current, last and complete.
	mu       sync.Mutex
	start    time.Time // start of the current window
	current  int64     // events in the current window
	last     int64     // events in the last complete window
	complete bool      // at least one window has completed since Reset
}

// NewMeasuredRate returns a rate whose first window starts at now.
func NewMeasuredRate(window time.Duration, now time.Time) *MeasuredRate {
	return &MeasuredRate{window: window, start: now}
}

// Increment counts one event at now.
func (m *MeasuredRate) Increment(now time.Time) {
	m.mu.Lock()
	m.rollLocked(now)
	m.current++
	m.mu.Unlock()
}

// Count returns the number of events in the last complete window, and
// whether a window has completed at all since the rate started: during the
// first window the count is 0 because nothing is known yet.
func (m *MeasuredRate) Count(now time.Time) (count int64, complete bool) {
	m.mu.Lock()
	m.rollLocked(now)
	count, complete = m.last, m.complete
	m.mu.Unlock()
	return count, complete
}

// LastWindowStart returns when the last complete window began (the current
// window's start minus one window).
func (m *MeasuredRate) LastWindowStart(now time.Time) time.Time {
	m.mu.Lock()
	m.rollLocked(now)
	start := m.start.Add(-m.window)
	m.mu.Unlock()
	return start
}

// Reset starts a fresh first window at now, forgetting all counts.
func (m *MeasuredRate) Reset(now time.Time) {
	m.mu.Lock()
	m.start, m.current, m.last, m.complete = now, 0, 0, false
	m.mu.Unlock()
}

// Window is the length of one bucket.
func (m *MeasuredRate) Window() time.Duration { return m.window }

// rollLocked moves the bucket boundary up to now. Crossing one boundary
// makes the current count the last one; crossing two or more means a whole
// window passed without events.
func (m *MeasuredRate) rollLocked(now time.Time) {
	elapsed := now.Sub(m.start)
	if elapsed < m.window {
		return
	}
	windows := int64(elapsed / m.window)
	if windows == 1 {
		m.last = m.current
	} else {
		m.last = 0
	}
	m.current = 0
	m.complete = true
	m.start = m.start.Add(time.Duration(windows) * m.window)
}

package client

import (
	"sync"
	"testing"
	"time"
)

// FakeClock is a manual Clock for tests (exported to the external test
// package): After's channels fire only when Advance moves the time past
// them, so no test waits on a real timer.
type FakeClock struct {
	// mu guards now, waiters and changed.
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	changed chan struct{} // closed and replaced whenever a waiter is added
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock returns a clock at a fixed date.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.UnixMilli(1718000000000).UTC(), changed: make(chan struct{})}
}

// Now returns the clock's time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that fires when the clock reaches now+d.
func (f *FakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), ch: ch})
	close(f.changed)
	f.changed = make(chan struct{})
	return ch
}

// Advance moves the clock by d and fires every waiter due by then.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// Waiters returns how many After channels have not fired yet.
func (f *FakeClock) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil waits (on the clock's own notifications, not on time) until
// at least n After channels are pending, failing the test after 10 s.
func (f *FakeClock) BlockUntil(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		have, ch := len(f.waiters), f.changed
		f.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("clock: %d pending waiters after 10 s, want %d", have, n)
		}
	}
}

package testwait

import (
	"testing"
	"time"
)

// pollEvery is short enough that a condition met on loopback is seen at
// once, and long enough not to spin a core under -race.
const pollEvery = 10 * time.Millisecond

// For polls cond until it returns nil, failing tb after timeout with what
// and cond's last error, so a failure says how far the wait got.
func For(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %s: %s: %v", timeout, what, err)
			return // Fatalf stops the goroutine; a TB that records instead gets here
		}
		time.Sleep(pollEvery)
	}
}

// True is For with a condition that has no reason to give.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	For(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

type notYet struct{}

func (notYet) Error() string { return "condition still false" }

var errNotYet error = notYet{}

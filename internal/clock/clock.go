// Package clock is the time source of the parts that wait on a schedule
// (the Go client, the remote regions' fetchers, xDS warm-ups): an
// interface tests replace with a manual clock (registrytest.Clock), and
// the real one.
package clock

import "time"

// Clock tells the time and waits. Implementations are safe for concurrent
// use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed. An
	// abandoned channel must not leak (time.After does not, since Go 1.23).
	After(d time.Duration) <-chan time.Time
}

// Real is the machine's clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

package client

import "time"

// Clock is the time source of a Client. Everything the client does on a
// schedule (heartbeats, polls, retry pauses, the return to the own zone)
// waits on After, so a test can drive it with a manual clock instead of
// real time. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed. An
	// abandoned channel must not leak (time.After does not, since Go 1.23).
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// backoff is the pause after the n-th consecutive failure (n ≥ 1): base,
// doubled for each further failure, at most max.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

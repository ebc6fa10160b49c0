package client

import (
	"time"

	"github.com/muster-registry/muster/internal/clock"
)

// Clock is the time source of a Client. Everything the client does on a
// schedule (heartbeats, polls, retry pauses, the return to the own zone)
// waits on After, so a test can drive it with a manual clock instead of
// real time.
type Clock = clock.Clock

// backoff is the pause after the n-th consecutive failure (n ≥ 1): base,
// doubled for each further failure, at most max.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

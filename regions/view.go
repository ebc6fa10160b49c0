package regions

import (
	"time"

	"github.com/muster-registry/muster/registry/wire"
)

// View is one remote region as served, at one moment: immutable, shared
// by every reader until the fetcher publishes the next. Its content is a
// wire.CopyView (what the Eureka API reads); Apps are the region's
// whitelisted applications, each instance a copy marked with MetadataKey
// (apps whose name is in the remote but not allowed are left out).
type View struct {
	wire.CopyView
	// HasData is false before the first successful fetch and after the
	// data was dropped (max staleness): Apps is empty then.
	HasData bool
	// Fetched is the time of the last successful fetch (zero: never).
	Fetched time.Time
}

// Age is how long ago the last successful fetch was (0 if never).
func (v *View) Age(now time.Time) time.Duration {
	if v == nil || v.Fetched.IsZero() {
		return 0
	}
	return now.Sub(v.Fetched)
}

package settings

import "time"

// The start-up keys the node reads as set or not (Explicit).
const (
	coldStartWaitKey = "muster.cold-start-wait-ms"
	syncEmptyWaitKey = "eureka.server.wait-time-in-ms-when-sync-empty"
	openCountKey     = "eureka.instance.registry.default-open-for-traffic-count"
	// ColdStartMargin is what the cold-start wait adds to the clients'
	// renewal interval: time for a heartbeat's 404 and the registration
	// that follows.
	ColdStartMargin = 5 * time.Second
)

// deriveColdStartWait makes the default cold-start wait follow the
// clients' renewal interval: the wait reported before any client declares
// a longer one. An explicit wait-time-in-ms-when-sync-empty caps it.
func (s *Settings) deriveColdStartWait() {
	if !s.explicit[coldStartWaitKey] {
		s.ColdStartWait = s.Registry.ExpectedRenewalInterval + ColdStartMargin
		if s.explicit[syncEmptyWaitKey] {
			s.ColdStartWait = min(s.ColdStartWait, s.WaitWhenSyncEmpty)
		}
	}
}

// ColdStartLimit bounds how far clients declaring long renewal intervals
// stretch the cold-start wait: Eureka's own wait when syncUp found
// nothing, and never below the configured interval's wait unless that
// wait was set explicitly.
func (s *Settings) ColdStartLimit() time.Duration {
	if s.explicit[syncEmptyWaitKey] {
		return s.WaitWhenSyncEmpty
	}
	return max(s.WaitWhenSyncEmpty, s.Registry.ExpectedRenewalInterval+ColdStartMargin)
}

// SyncInBackground tells whether syncUp may go on after the node opens:
// eureka.server.wait-time-in-ms-when-sync-empty is written 0, so no
// start-up refusal could follow whatever syncUp finds (an explicit
// muster.cold-start-wait-ms above 0 is a wait of its own, and keeps syncUp
// in the foreground), and syncUp runs at all (registry-sync-retries above
// 0; at 0 it is skipped, as Spring's default skips it). Spring's server
// with wait 0 serves at once too: its syncUp is skipped by default, and
// what a peer holds comes by replication; here it also comes by syncUp's
// later rounds.
func (s *Settings) SyncInBackground() bool {
	return s.explicit[syncEmptyWaitKey] && s.WaitWhenSyncEmpty == 0 && s.ColdStartWait == 0 && s.Sync.Attempts > 0
}

// Explicit tells whether the file, the environment or the command line
// gave key (a setting's key as the table writes it): some keys mean
// something only when set (server.ssl.enabled, cluster.enabled, the
// start-up waits).
func (s *Settings) Explicit(key string) bool { return s.explicit[key] }

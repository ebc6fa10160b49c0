package client

import (
	"sync/atomic"
	"time"
)

// serverSet is the zone-ordered server list and the one the client uses
// now. Every request reads current; a request that fails moves it on with
// failed, once: requests that fail on the same server at the same time find
// it already moved and do not skip the next one.
type serverSet struct {
	list       []server // zone order, never modified
	zoneRetry  time.Duration
	cur        atomic.Int32
	movedAtNow atomic.Int64 // clock time of the last failover, UnixNano
}

// orderServers puts the servers of zone first, then the others, each group
// in the given order, as the Java client's ZoneAffinityClusterResolver
// does with prefer-same-zone-eureka.
func orderServers(list []server, zone string) []server {
	out := make([]server, 0, len(list))
	for _, s := range list {
		if s.zone == zone {
			out = append(out, s)
		}
	}
	for _, s := range list {
		if s.zone != zone {
			out = append(out, s)
		}
	}
	return out
}

// current returns the index of the server requests go to now. After
// zoneRetry has passed since the last failover it first moves back to the
// first server and reports that it did.
func (s *serverSet) current(now time.Time) (i int, returned bool) {
	i = int(s.cur.Load())
	if i != 0 && s.zoneRetry > 0 && now.UnixNano()-s.movedAtNow.Load() >= int64(s.zoneRetry) {
		if s.cur.CompareAndSwap(int32(i), 0) {
			return 0, true
		}
		return int(s.cur.Load()), false
	}
	return i, false
}

// failed moves from server i to the next one, wrapping around, unless the
// client already moved away from i. It reports whether it moved.
func (s *serverSet) failed(i int, now time.Time) bool {
	next := (i + 1) % len(s.list)
	if next == i {
		return false
	}
	if !s.cur.CompareAndSwap(int32(i), int32(next)) {
		return false
	}
	s.movedAtNow.Store(now.UnixNano())
	return true
}

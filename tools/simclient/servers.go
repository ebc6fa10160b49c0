package simclient

import "sync/atomic"

// serverSet is the ordered server list and the one the fleet currently
// uses. Every request reads current; a request that fails moves it on with
// failed, once: other requests that fail on the same server at the same
// time find it already moved and do not skip the next one.
type serverSet struct {
	list []Server // zone order, see orderServers; never modified
	cur  atomic.Int32
}

func newServerSet(servers []Server, zone string) *serverSet {
	return &serverSet{list: orderServers(servers, zone)}
}

// current returns the index and the server requests go to now.
func (s *serverSet) current() (int, Server) {
	i := int(s.cur.Load())
	return i, s.list[i]
}

// failed moves from server i to the next one, wrapping around, unless the
// fleet already moved away from i. It reports whether it moved, which
// counts as a failover.
func (s *serverSet) failed(i int) bool {
	next := (i + 1) % len(s.list)
	if next == i {
		return false
	}
	return s.cur.CompareAndSwap(int32(i), int32(next))
}

// returnHome moves back to the first server (the first of the fleet's
// zone). It reports whether it moved.
func (s *serverSet) returnHome() bool {
	return s.cur.Swap(0) != 0
}

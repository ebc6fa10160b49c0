package registry

import (
	"strings"
	"sync"
)

// appRenewals counts renewals per application since start, so that a
// reader sampling the totals now and then (the dashboard's history) can
// tell which apps stopped renewing when self-preservation turned on. Each
// lease points to its app's counter, so a heartbeat pays one atomic add
// and no lookup; the counter is sharded (shardedCounter), because every
// instance of a big app renews into it, and one shared word would make
// those heartbeats queue for one cache line. The map from names to
// counters is used only when a lease is created and when the totals are
// read. Names of apps that no longer exist keep their counter (512 bytes
// each): the count of names is bounded by what was ever registered.
type appRenewals struct {
	// mu guards counters.
	mu       sync.Mutex
	counters map[string]*shardedCounter
}

// counter returns app's counter, creating it the first time.
func (a *appRenewals) counter(app string) *shardedCounter {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.counters[app]; c != nil {
		return c
	}
	if a.counters == nil {
		a.counters = map[string]*shardedCounter{}
	}
	c := new(shardedCounter)
	// Copy the name so the map keeps no request body alive.
	a.counters[strings.Clone(app)] = c
	return c
}

// AppRenewals returns the renewals counted per app (upper-cased name) since
// the registry started, replicated ones included, as the self-preservation
// count does. The totals only grow; readers take differences between two
// calls. dst is reused when not nil.
func (r *Registry) AppRenewals(dst map[string]uint64) map[string]uint64 {
	if dst == nil {
		dst = map[string]uint64{}
	}
	clear(dst)
	a := &r.appRenewals
	a.mu.Lock()
	defer a.mu.Unlock()
	for app, c := range a.counters {
		dst[app] = uint64(c.load())
	}
	return dst
}

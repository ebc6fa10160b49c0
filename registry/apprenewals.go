package registry

import (
	"strings"
	"sync"
	"sync/atomic"
)

// appRenewals counts renewals per application since start, so that a
// reader sampling the totals now and then (the dashboard's history) can
// tell which apps stopped renewing when self-preservation turned on. The
// heartbeat path pays one atomic add on a counter its lease points to;
// the map from names to counters is copied on write (a new app name, rare)
// and never changed once published, so readers share no lock. Names of apps that no longer exist
// keep their counter (a few bytes each): the count of names is bounded by
// what was ever registered.
type appRenewals struct {
	counters atomic.Pointer[map[string]*atomic.Uint64]
	mu       sync.Mutex // serialises writers
}

// counter returns app's counter, creating it the first time; leases keep
// it, so a heartbeat only adds.
func (a *appRenewals) counter(app string) *atomic.Uint64 {
	if m := a.counters.Load(); m != nil {
		if c := (*m)[app]; c != nil {
			return c
		}
	}
	return a.create(app)
}

func (a *appRenewals) create(app string) *atomic.Uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.counters.Load()
	if old != nil {
		if c := (*old)[app]; c != nil {
			return c
		}
	}
	m := make(map[string]*atomic.Uint64, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	c := new(atomic.Uint64)
	// Copy the name so the map keeps no request body alive.
	m[strings.Clone(app)] = c
	a.counters.Store(&m)
	return c
}

func lenOf(m *map[string]*atomic.Uint64) int {
	if m == nil {
		return 0
	}
	return len(*m)
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
	if m := r.appRenewals.counters.Load(); m != nil {
		for app, c := range *m {
			dst[app] = c.Load()
		}
	}
	return dst
}

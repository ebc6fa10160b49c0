package registry

import (
	"strings"
	"sync"
	"sync/atomic"
)

// appRenewals counts renewals per application since start, so that a
// reader sampling the totals now and then (the dashboard's history) can
// tell which apps stopped renewing when self-preservation turned on. The
// heartbeat path pays a map read under a read lock and an atomic add; a
// counter is created once per app name, under the write lock. Names of
// apps that no longer exist keep their counter (a few bytes each): the
// count of app names is bounded by what was ever registered.
type appRenewals struct {
	mu sync.RWMutex
	m  map[string]*atomic.Uint64
}

// add counts one renewal of app. It allocates only the first time an app
// renews.
func (a *appRenewals) add(app string) {
	a.mu.RLock()
	c := a.m[app]
	a.mu.RUnlock()
	if c == nil {
		c = a.create(app)
	}
	c.Add(1)
}

func (a *appRenewals) create(app string) *atomic.Uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.m[app]; c != nil {
		return c
	}
	if a.m == nil {
		a.m = map[string]*atomic.Uint64{}
	}
	c := new(atomic.Uint64)
	// The name came from a request path: copy it so the map does not keep
	// the request alive.
	a.m[strings.Clone(app)] = c
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
	a.mu.RLock()
	defer a.mu.RUnlock()
	for app, c := range a.m {
		dst[app] = c.Load()
	}
	return dst
}

package client_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// appStub serves GET /eureka/apps/{APP} for a set of instances that the
// test changes. Like Eureka, it ignores index and wait and sends no
// X-Muster-Index, unless blocking is set: then it implements Muster's
// blocking fetch as the package documentation describes it (each answer
// carries X-Muster-Index; a request with index below the app's version, or
// above it, is answered at once; one with the current index is held until
// the app changes or wait passes; a malformed index or wait is a 400).
type appStub struct {
	blocking bool
	// refuseIndex answers 400 to any request with index, as a server with
	// another idea of the parameters might.
	refuseIndex bool
	// neverHold answers held requests at once, with the header, as a
	// server over its watcher limit does.
	neverHold bool

	// mu guards everything below it.
	mu       sync.Mutex
	version  uint64
	apps     map[string][]*registry.Instance
	changed  chan struct{} // closed and replaced on every change
	held     int           // requests being held now
	queries  []string      // raw query of every request
	requests int
}

func newAppStub(tb testing.TB, blocking bool) (*appStub, string) {
	s := &appStub{blocking: blocking, version: 1, apps: map[string][]*registry.Instance{}, changed: make(chan struct{})}
	ts := httptest.NewServer(s)
	tb.Cleanup(ts.Close)
	tb.Cleanup(s.wakeAll) // let held requests end before the server closes
	return s, ts.URL + "/eureka/"
}

func (s *appStub) wakeAll() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// set replaces app's instances (ids) and bumps the version.
func (s *appStub) set(app string, ids ...string) {
	s.mu.Lock()
	var list []*registry.Instance
	for _, id := range ids {
		list = append(list, &registry.Instance{
			InstanceID: id, HostName: "host-" + id, App: app, IPAddr: "10.0.0.1", Status: registry.StatusUp,
			Port: registry.Port{Number: 8080, Enabled: true}, DataCenterInfo: registry.DataCenterInfo{Name: "MyOwn"},
			Metadata: registry.NewMetadata(map[string]string{"zone": "zone-a"}),
		})
	}
	s.apps[app] = list
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *appStub) heldNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *appStub) requestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *appStub) queryLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...)
}

func (s *appStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	app, ok := strings.CutPrefix(r.URL.Path, "/eureka/apps/")
	if r.Method != http.MethodGet || !ok || app == "" || strings.Contains(app, "/") {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.requests++
	s.queries = append(s.queries, r.URL.RawQuery)
	if s.refuseIndex && r.URL.Query().Has("index") {
		s.mu.Unlock()
		http.Error(w, "index: not supported", http.StatusBadRequest)
		return
	}
	if s.blocking {
		q := r.URL.Query()
		var index uint64
		var wait time.Duration
		var err error
		if v := q.Get("index"); v != "" {
			if index, err = strconv.ParseUint(v, 10, 64); err != nil {
				s.mu.Unlock()
				http.Error(w, "index: not a number", http.StatusBadRequest)
				return
			}
		}
		if v := q.Get("wait"); v != "" {
			if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
				s.mu.Unlock()
				http.Error(w, "wait: not a duration", http.StatusBadRequest)
				return
			}
		}
		if wait > 0 && index == s.version && !s.neverHold {
			ch := s.changed
			s.held++
			s.mu.Unlock()
			select {
			case <-ch:
			case <-time.After(wait):
			case <-r.Context().Done():
			}
			s.mu.Lock()
			s.held--
		}
	}
	list, version := s.apps[app], s.version
	s.mu.Unlock()
	if s.blocking {
		w.Header().Set("X-Muster-Index", strconv.FormatUint(version, 10))
	}
	if len(list) == 0 {
		http.NotFound(w, r)
		return
	}
	view := registry.AppView{Name: app}
	for _, in := range list {
		view.Instances = append(view.Instances, registry.InstanceView{Instance: in})
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(wire.AppendApplicationJSON(nil, view))
}

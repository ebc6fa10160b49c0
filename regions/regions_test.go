package regions

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// fakeRemote serves a registry document and deltas, as a Eureka server
// would, and records what it was asked.
type fakeRemote struct {
	mu        sync.Mutex
	apps      []registry.AppView
	delta     []registry.AppView
	deltaHash string // "" means the hashcode of apps
	queries   []string
	identity  []string
	auth      []string
	code      int
}

func (f *fakeRemote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
	f.identity = append(f.identity, r.Header.Get(HeaderIdentityName))
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	if f.code != 0 {
		http.Error(w, "no", f.code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	hash := registry.HashcodeOf(f.apps)
	if strings.HasSuffix(r.URL.Path, "/delta") {
		if f.deltaHash != "" {
			hash = f.deltaHash
		}
		w.Write(wire.AppendApplicationsJSON(nil, f.delta, "2", hash))
		return
	}
	w.Write(wire.AppendApplicationsJSON(nil, f.apps, "1", hash))
}

func inst(app, id string, st registry.Status, md map[string]string) registry.InstanceView {
	in := registrytest.NewInstance(app, id, registrytest.WithStatus(st))
	if md != nil {
		in.Metadata = registry.NewMetadata(md)
	}
	return registry.InstanceView{Instance: in}
}

func newTestSet(t testing.TB, url string, mutate func(*Config)) (*Set, *Fetcher) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.LocalRegion = "a"
	cfg.URLs = map[string][]string{"b": {"http://127.0.0.1:1/eureka", url + "/eureka/"}}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	clock := registrytest.NewClock()
	s := NewSet(cfg, FetcherConfig{Clock: clockOf{clock}, ID: "node-1", Logger: zerolog.Nop()})
	return s, s.Fetchers()[0]
}

type clockOf struct{ *registrytest.Clock }

func (clockOf) After(time.Duration) <-chan time.Time { return nil }

// fetchView makes one fetch, which must succeed, and returns the view.
func fetchView(t *testing.T, f *Fetcher) *View {
	t.Helper()
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.View()
}

func ids(v *View) string {
	var out []string
	for _, a := range v.Apps {
		for _, iv := range a.Instances {
			r, _ := iv.Metadata.Get(MetadataKey)
			out = append(out, fmt.Sprintf("%s/%s=%s@%s", a.Name, iv.ID(), iv.Status, r))
		}
	}
	return strings.Join(out, " ")
}

func TestFetcher_fullThenDeltaWhitelistMarkAndFailover(t *testing.T) {
	remote := &fakeRemote{apps: []registry.AppView{
		{Name: "ORDERS", Instances: []registry.InstanceView{inst("ORDERS", "o1", registry.StatusUp, nil)}},
		{Name: "SECRET", Instances: []registry.InstanceView{inst("SECRET", "s1", registry.StatusUp, nil)}},
		// A remote copy another Muster serves back: never taken.
		{Name: "USERS", Instances: []registry.InstanceView{inst("USERS", "u1", registry.StatusUp, map[string]string{MetadataKey: "a"})}},
	}}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	s, f := newTestSet(t, srv.URL, func(c *Config) { c.Whitelist = map[string][]string{GlobalWhitelist: {"orders", "users"}} })
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := f.View()
	if got := ids(v); got != "ORDERS/o1=UP@b" || !v.HasData || v.Hashcode() != "UP_1_" {
		t.Fatalf("view %q hasData %v", got, v.HasData)
	}
	// The dead first URL failed over; the request asks for the remote's
	// own region, as a server.
	if q := remote.queries[0]; q != "/eureka/apps?regions=b" || remote.identity[0] != ServerIdentityName {
		t.Fatalf("asked %q as %q", q, remote.identity[0])
	}
	// A delta: o2 added, o1 down.
	remote.mu.Lock()
	remote.apps[0].Instances = []registry.InstanceView{inst("ORDERS", "o1", registry.StatusDown, nil), inst("ORDERS", "o2", registry.StatusUp, nil)}
	d1, d2 := inst("ORDERS", "o1", registry.StatusDown, nil), inst("ORDERS", "o2", registry.StatusUp, nil)
	d1.ActionType, d2.ActionType = registry.ActionModified, registry.ActionAdded
	remote.delta = []registry.AppView{{Name: "ORDERS", Instances: []registry.InstanceView{d1, d2}}}
	remote.mu.Unlock()
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	v = f.View()
	if got := ids(v); got != "ORDERS/o1=DOWN@b ORDERS/o2=UP@b" {
		t.Fatalf("after delta: %q", got)
	}
	if st := f.Stats(); st.DeltaFetches != 1 || st.FullFetches != 1 || st.Mismatches != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(v.Changes) != 3 { // o1 ADDED, then o1 MODIFIED and o2 ADDED
		t.Fatalf("changes %d", len(v.Changes))
	}
	// A delta whose hashcode disagrees: a full fetch follows.
	remote.mu.Lock()
	remote.delta, remote.deltaHash = nil, "UP_7_"
	remote.mu.Unlock()
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Mismatches != 1 || st.FullFetches != 2 {
		t.Fatalf("stats after a mismatch %+v", st)
	}
	views, missing := s.Resolve("a, b,zz,b")
	if len(views) != 1 || views[0].Region != "b" || len(missing) != 0 {
		t.Fatalf("resolve: %d views, missing %v", len(views), missing)
	}
}

func TestFetcher_failureKeepsDataThenStalenessDrops(t *testing.T) {
	remote := &fakeRemote{apps: []registry.AppView{{Name: "ORDERS", Instances: []registry.InstanceView{inst("ORDERS", "o1", registry.StatusUp, nil)}}}}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	_, f := newTestSet(t, srv.URL, func(c *Config) { c.MaxStaleness = time.Minute })
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	remote.mu.Lock()
	remote.code = 500
	remote.mu.Unlock()
	clock := f.clock.(clockOf)
	clock.Advance(30 * time.Second)
	if err := f.FetchOnce(context.Background()); err == nil {
		t.Fatal("a failing remote: no error")
	} else if strings.Contains(err.Error(), "password") {
		t.Fatal(err)
	}
	if f.DropIfStale() || !f.View().HasData {
		t.Fatal("dropped before max staleness")
	}
	clock.Advance(31 * time.Second)
	if !f.DropIfStale() || f.View().HasData || f.View().Instances != 0 {
		t.Fatal("not dropped after max staleness")
	}
	if ch := f.View().Changes; len(ch) != 2 || ch[1].Instance.ActionType != registry.ActionDeleted {
		t.Fatalf("changes %+v", ch)
	}
	// Back-off grows and is capped at 8 intervals.
	for i := 0; i < 6; i++ {
		_ = f.FetchOnce(context.Background())
	}
	if w := f.nextWait(fmt.Errorf("x")); w > 8*30*time.Second || w < 7*30*time.Second {
		t.Fatalf("back-off %v", w)
	}
}

func TestConfig_parseAndValidate(t *testing.T) {
	m, err := ParseURLsWithName("b;http://u:p@h1/eureka, b;http://h2/eureka,c;https://h3/eureka")
	if err != nil || len(m["b"]) != 2 || m["c"][0] != "https://h3/eureka" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseURLsWithName("http://secret:pw@h/eureka"); err == nil || strings.Contains(err.Error(), "pw") {
		t.Fatalf("bad entry: %v", err)
	}
	cfg := DefaultConfig()
	cfg.URLs = map[string][]string{"us-east-1": {"http://h/eureka"}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("the local region as a remote: no error")
	}
	cfg.URLs = map[string][]string{"b": {"ftp://u:secret@h"}}
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad URL: %v", err)
	}
}

// Basic auth comes from the URL; the password never reaches an error.
func TestFetcher_basicAuthFromURLRedacted(t *testing.T) {
	remote := &fakeRemote{}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	withAuth := strings.Replace(srv.URL, "http://", "http://reader:s3cret@", 1)
	cfg := DefaultConfig()
	cfg.LocalRegion = "a"
	cfg.URLs = map[string][]string{"b": {"http://reader:s3cret@127.0.0.1:1/eureka", withAuth + "/eureka"}}
	s := NewSet(cfg, FetcherConfig{Clock: clockOf{registrytest.NewClock()}, Logger: zerolog.Nop()})
	f := s.Fetchers()[0]
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if remote.auth[0] != "Basic cmVhZGVyOnMzY3JldA==" {
		t.Fatalf("Authorization %q", remote.auth[0])
	}
	remote.mu.Lock()
	remote.code = 503
	remote.mu.Unlock()
	err := f.FetchOnce(context.Background())
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(f.Stats().LastError, "s3cret") {
		t.Fatalf("error %v", err)
	}
}

// Every change carries the view version it made, and ChangesAfter hands a
// reader (the watch stream) the changes after the version it has seen,
// or says they are gone once the retention has dropped some of them.
func TestView_changesAfterVersionAndPruned(t *testing.T) {
	remote := &fakeRemote{apps: []registry.AppView{
		{Name: "ORDERS", Instances: []registry.InstanceView{inst("ORDERS", "o1", registry.StatusUp, nil)}},
	}}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	clock := registrytest.NewClock()
	cfg := DefaultConfig()
	cfg.LocalRegion = "a"
	cfg.URLs = map[string][]string{"b": {srv.URL + "/eureka/"}}
	cfg.DisableDelta = true
	s := NewSet(cfg, FetcherConfig{Clock: clockOf{clock}, ID: "node-1", Logger: zerolog.Nop(), Retention: 3 * time.Minute})
	f := s.Fetchers()[0]
	fetch := func() *View { t.Helper(); return fetchView(t, f) }
	v1 := fetch()
	if v1.Version != 1 || len(v1.Changes) != 1 || v1.Changes[0].Version != 1 || v1.Pruned != 0 {
		t.Fatalf("first view: version %d, changes %+v, pruned %d", v1.Version, v1.Changes, v1.Pruned)
	}
	clock.Advance(2 * time.Minute)
	remote.mu.Lock()
	remote.apps[0].Instances = append(remote.apps[0].Instances, inst("ORDERS", "o2", registry.StatusUp, nil))
	remote.mu.Unlock()
	v2 := fetch()
	if cs, ok := v2.ChangesAfter(1); !ok || len(cs) != 1 || cs[0].Instance.ID() != "o2" || cs[0].Version != 2 {
		t.Fatalf("after 1: %+v %v", cs, ok)
	}
	if cs, ok := v2.ChangesAfter(0); !ok || len(cs) != 2 {
		t.Fatalf("after 0: %+v %v", cs, ok)
	}
	if cs, ok := v2.ChangesAfter(2); !ok || len(cs) != 0 {
		t.Fatalf("after the head: %+v %v", cs, ok)
	}
	if _, ok := v2.ChangesAfter(3); ok {
		t.Fatal("a version the view has not reached is not resumable")
	}
	// Two minutes on, version 1's change is past the retention: a reader
	// at 0 has lost it, one at 1 has not.
	clock.Advance(2 * time.Minute)
	v3 := fetch() // nothing changed: the same view, pruned
	if v3.Version != 2 || v3.Pruned != 1 || len(v3.Changes) != 1 {
		t.Fatalf("pruned view: version %d pruned %d changes %d", v3.Version, v3.Pruned, len(v3.Changes))
	}
	if _, ok := v3.ChangesAfter(0); ok {
		t.Fatal("changes after 0 were pruned, yet resumable")
	}
	if cs, ok := v3.ChangesAfter(1); !ok || len(cs) != 1 {
		t.Fatalf("after 1 once pruned: %+v %v", cs, ok)
	}
}

// A fetcher that fails over to another node of the remote region gets the
// same registrations stamped by that node (registration, service-up and
// last-updated times a little apart): no change is reported for them,
// while a real change of one instance still is.
func TestFetcher_failoverToAPeerIsNoChange(t *testing.T) {
	stamped := func(id string, at int64, st registry.Status) registry.InstanceView {
		iv := inst("ORDERS", id, st, nil)
		iv.RegistrationTimestamp, iv.ServiceUpTimestamp, iv.LastUpdatedTimestamp = at, at, at
		iv.LastDirtyTimestamp = 1000
		return iv
	}
	first := &fakeRemote{apps: []registry.AppView{{Name: "ORDERS", Instances: []registry.InstanceView{stamped("o1", 5000, registry.StatusUp), stamped("o2", 5000, registry.StatusUp)}}}}
	peer := &fakeRemote{apps: []registry.AppView{{Name: "ORDERS", Instances: []registry.InstanceView{stamped("o1", 5001, registry.StatusUp), stamped("o2", 5002, registry.StatusDown)}}}}
	srv1, srv2 := httptest.NewServer(first), httptest.NewServer(peer)
	defer srv2.Close()
	_, f := newTestSet(t, srv1.URL, func(c *Config) {
		c.URLs["b"] = []string{srv1.URL + "/eureka/", srv2.URL + "/eureka/"}
		c.DisableDelta = true
	})
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := f.View()
	srv1.Close() // fail over to the peer
	if err := f.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := f.View()
	cs, _ := v.ChangesAfter(before.Version)
	if len(cs) != 1 || cs[0].Instance.ID() != "o2" || cs[0].Instance.ActionType != registry.ActionModified {
		t.Fatalf("after failover: %d changes %+v, want o2 MODIFIED only", len(cs), cs)
	}
	if got := ids(v); got != "ORDERS/o1=UP@b ORDERS/o2=DOWN@b" {
		t.Fatalf("view %q", got)
	}
}

// AppChanged is the version of an app's last change and stays when the
// app goes, so an index summed from it over regions never comes back to
// an earlier value.
func TestView_appChangedSurvivesTheAppGoing(t *testing.T) {
	remote := &fakeRemote{apps: []registry.AppView{
		{Name: "ORDERS", Instances: []registry.InstanceView{inst("ORDERS", "o1", registry.StatusUp, nil)}},
		{Name: "USERS", Instances: []registry.InstanceView{inst("USERS", "u1", registry.StatusUp, nil)}},
	}}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	_, f := newTestSet(t, srv.URL, func(c *Config) { c.DisableDelta = true })
	fetch := func() *View { t.Helper(); return fetchView(t, f) }
	v := fetch()
	if v.AppChanged("orders") != v.Version || v.AppChanged("USERS") != v.Version || v.AppChanged("NONE") != 0 {
		t.Fatalf("first fetch: %d %d %d, version %d", v.AppChanged("ORDERS"), v.AppChanged("USERS"), v.AppChanged("NONE"), v.Version)
	}
	first := v.Version
	remote.mu.Lock()
	remote.apps = remote.apps[1:] // ORDERS goes
	remote.mu.Unlock()
	v = fetch()
	if _, ok := v.App("ORDERS"); ok || v.AppChanged("ORDERS") != v.Version || v.AppChanged("ORDERS") == first {
		t.Fatalf("ORDERS gone: served %v, changed at %d (view %d)", ok, v.AppChanged("ORDERS"), v.Version)
	}
	if v.AppChanged("USERS") != first {
		t.Fatalf("USERS did not change, yet AppChanged moved to %d", v.AppChanged("USERS"))
	}
}

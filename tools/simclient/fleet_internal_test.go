package simclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

func TestFleet_registerAll_instances(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}, func(c *Config) {
		c.Instances, c.Apps, c.IDPrefix = 50, 5, "grp1"
	}))
	f.registerAll(t.Context())

	if got := node.reg.Len(); got != 50 {
		t.Fatalf("registry holds %d instances, want 50", got)
	}
	s := f.Stats()
	if s.Registrations != 50 || s.Registered != 50 || s.RegistrationFailures != 0 || s.RegistrationRate <= 0 {
		t.Errorf("stats = %+v, want 50 registrations, 50 registered, no failures, a rate", s)
	}
	snap := node.reg.Snapshot()
	if len(snap.Apps) != 5 || snap.Apps[0].Name != "APP-00" || len(snap.Apps[0].Instances) != 10 {
		t.Fatalf("apps = %d, first %q with %d instances; want 5, APP-00 with 10", len(snap.Apps), snap.Apps[0].Name, len(snap.Apps[0].Instances))
	}
	iv, ok := node.reg.Instance("APP-03", "grp1-app-03-7")
	if !ok {
		t.Fatal("instance APP-03/grp1-app-03-7 not registered")
	}
	in := iv.Instance
	if in.HostName != "grp1-app-03-7" || !strings.HasPrefix(in.IPAddr, "10.") || in.VIPAddress != "app-03" ||
		in.RenewalIntervalSecs != 30 || in.LeaseDurationSecs != 90 || in.DataCenterInfo.Name != "MyOwn" ||
		in.Status != registry.StatusUp {
		t.Errorf("stored instance = %+v", in)
	}
	if z, _ := in.Metadata.Get("zone"); z != "a" {
		t.Errorf("metadata zone = %q, want a", z)
	}
}

func TestFleet_renew_failover(t *testing.T) {
	for name, bad := range map[string]func(*testing.T) string{
		"503":    func(t *testing.T) string { return statusServer(t, http.StatusServiceUnavailable) },
		"closed": closedServer,
	} {
		t.Run(name, func(t *testing.T) {
			node := newMusterNode(t)
			clk := registrytest.NewClock()
			// Given out of order: the zone-a server must still come first.
			f := mustNewFleet(t, testConfig(t, []Server{{Zone: "b", URL: node.url}, {Zone: "a", URL: bad(t)}}, func(c *Config) {
				c.Now, c.ZoneRetryInterval = clk.Now, time.Minute
			}))
			f.registerAll(t.Context())
			s := f.Stats()
			if s.Registrations != 10 || s.Failovers != 1 || s.CurrentServer != "b="+node.url {
				t.Fatalf("after registering: %+v, want 10 registrations, 1 failover, current b", s)
			}
			if node.reg.Len() != 10 {
				t.Fatalf("registry holds %d, want 10", node.reg.Len())
			}

			// ZoneRetryInterval later the fleet is back on the bad server:
			// each renewal fails there and is retried on the next one within
			// the same round.
			clk.Advance(time.Minute)
			for i := range f.insts {
				f.renew(t.Context(), i)
			}
			s = f.Stats()
			if s.RenewalsOK != 10 || s.RenewalsFailed != 0 || s.Failovers != 2 || s.ZoneReturns != 1 {
				t.Errorf("after renewing: ok %d failed %d failovers %d zone returns %d, want 10, 0, 2, 1",
					s.RenewalsOK, s.RenewalsFailed, s.Failovers, s.ZoneReturns)
			}
		})
	}
}

func TestFleet_renew_allServersDown(t *testing.T) {
	node := newMusterNode(t)
	a, aURL := newSwitchServer(t, node.h, 0)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: aURL}, {Zone: "b", URL: statusServer(t, http.StatusInternalServerError)}}))
	f.registerAll(t.Context())
	// Both answer 500 now: the renewal fails after one retry.
	a.code.Store(http.StatusInternalServerError)
	f.renew(t.Context(), 0)
	s := f.Stats()
	if s.RenewalsFailed != 1 || s.Failovers != 2 {
		t.Errorf("renewals failed %d, failovers %d; want 1, 2", s.RenewalsFailed, s.Failovers)
	}
}

func TestFleet_renew_reRegisterAfter404(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}))
	f.registerAll(t.Context())
	in := f.insts[3].inst
	dirty := f.insts[3].lastDirty
	if _, err := node.reg.Apply(registry.CancelOp(in.App, in.ID)); err != nil {
		t.Fatal(err)
	}

	f.renew(t.Context(), 3)

	s := f.Stats()
	if s.ReRegistrations != 1 || s.Registrations != 11 || s.Registered != 10 || s.RenewalsFailed != 0 {
		t.Errorf("stats = %+v, want 1 re-registration, 11 registrations, 10 registered", s)
	}
	iv, ok := node.reg.Instance(in.App, in.ID)
	if !ok {
		t.Fatal("instance not back in the registry")
	}
	if iv.LastDirtyTimestamp <= dirty {
		t.Errorf("lastDirtyTimestamp = %d, want > %d (marked dirty before re-registering)", iv.LastDirtyTimestamp, dirty)
	}
	f.renew(t.Context(), 3)
	if s := f.Stats(); s.RenewalsOK != 1 {
		t.Errorf("renewal after re-registering: ok %d, want 1", s.RenewalsOK)
	}
}

func TestFleet_renew_registersWhenRegistrationFailed(t *testing.T) {
	node := newMusterNode(t)
	a, aURL := newSwitchServer(t, node.h, http.StatusServiceUnavailable)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: aURL}}))
	f.registerAll(t.Context())
	if s := f.Stats(); s.RegistrationFailures != 10 || s.Registered != 0 {
		t.Fatalf("stats = %+v, want 10 registration failures", s)
	}
	a.code.Store(0) // the server came up
	f.renew(t.Context(), 0)
	if s := f.Stats(); s.Registrations != 1 || s.Registered != 1 || node.reg.Len() != 1 {
		t.Errorf("stats = %+v, registry %d; want the instance registered", s, node.reg.Len())
	}
}

func TestFleet_fetch_delta(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}))
	f.registerAll(t.Context())
	ctx := t.Context()

	mustFetch(t, f)
	s := f.Stats()
	if s.FullFetches != 1 || s.DeltaFetches != 0 || s.LastViewInstances != 10 || s.ViewHashcode != "UP_10_" {
		t.Fatalf("after the first fetch: %+v, want 1 full fetch, view of 10, UP_10_", s)
	}

	// Changes on the server reach the view through deltas.
	if _, err := node.reg.Apply(registry.RegisterOp(registrytest.NewInstance("OTHER", "other-1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := node.reg.Apply(registry.StatusOp("APP-00", "t-app-00-0", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	mustFetch(t, f)
	if st, ok := f.view.status("OTHER", "other-1"); !ok || st != client.StatusUp {
		t.Errorf("view lacks OTHER/other-1 after the delta")
	}
	if st, _ := f.view.status("APP-00", "t-app-00-0"); st != client.StatusOutOfService {
		t.Errorf("APP-00/t-app-00-0 is %s in the view, want OUT_OF_SERVICE", st)
	}
	if _, err := node.reg.Apply(registry.CancelOp("APP-01", "t-app-01-2")); err != nil {
		t.Fatal(err)
	}
	if err := f.fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.view.status("APP-01", "t-app-01-2"); ok {
		t.Errorf("APP-01/t-app-01-2 still in the view after its cancel")
	}
	s = f.Stats()
	want := node.reg.Snapshot().Hashcode
	if s.FullFetches != 1 || s.DeltaFetches != 2 || s.ReconcileFetches != 0 || s.ViewHashcode != want || s.LastViewInstances != 10 {
		t.Errorf("after two deltas: %+v, want 1 full, 2 delta, 0 reconcile, view 10 with hashcode %q", s, want)
	}
}

func mustFetch(t *testing.T, f *Fleet) {
	t.Helper()
	if err := f.fetch(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// fakeRegistry serves a full registry and a delta that the test sets,
// encoded by registry/wire as the real server encodes them.
type fakeRegistry struct {
	mu         sync.Mutex // guards full, delta and deltaHash
	full       []registry.AppView
	delta      []registry.AppView
	deltaHash  string
	fullCalls  int
	deltaCalls int
}

func (fr *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var body []byte
	switch strings.TrimPrefix(r.URL.Path, "/eureka/") {
	case "apps/", "apps":
		fr.fullCalls++
		body = wire.AppendApplicationsJSON(nil, fr.full, "1", registry.HashcodeOf(fr.full))
	case "apps/delta":
		fr.deltaCalls++
		body = wire.AppendApplicationsJSON(nil, fr.delta, "2", fr.deltaHash)
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (fr *fakeRegistry) set(full, delta []registry.AppView, deltaHash string) {
	fr.mu.Lock()
	fr.full, fr.delta, fr.deltaHash = full, delta, deltaHash
	fr.mu.Unlock()
}

func appView(name string, ids ...string) registry.AppView {
	app := registry.AppView{Name: name}
	for _, id := range ids {
		in := registrytest.NewInstance(name, id)
		in.ActionType = registry.ActionAdded
		app.Instances = append(app.Instances, registry.InstanceView{Instance: in})
	}
	return app
}

func TestFleet_fetch_reconcile(t *testing.T) {
	fr := &fakeRegistry{}
	ts := httptest.NewServer(fr)
	t.Cleanup(ts.Close)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: ts.URL + "/eureka/"}}, func(c *Config) { c.Instances = 0 }))

	fr.set([]registry.AppView{appView("ORDERS", "o-1", "o-2", "o-3")}, nil, "")
	mustFetch(t, f)
	// The server gained o-4, but its delta skips it while its hashcode
	// counts it: the client must notice and fetch everything.
	fr.set([]registry.AppView{appView("ORDERS", "o-1", "o-2", "o-3", "o-4")}, nil, "UP_4_")
	mustFetch(t, f)

	s := f.Stats()
	if s.DeltaFetches != 1 || s.ReconcileFetches != 1 || s.FullFetches != 2 || s.LastViewInstances != 4 || s.ViewHashcode != "UP_4_" {
		t.Errorf("stats = %+v, want 1 delta, 1 reconcile, 2 full fetches, view of 4 (UP_4_)", s)
	}
	if fr.deltaCalls != 1 || fr.fullCalls != 2 {
		t.Errorf("server saw %d delta and %d full fetches, want 1 and 2", fr.deltaCalls, fr.fullCalls)
	}

	// A delta that matches needs no full fetch.
	fr.set(nil, []registry.AppView{appView("PAYMENTS", "p-1")}, "UP_5_")
	mustFetch(t, f)
	if s := f.Stats(); s.ReconcileFetches != 1 || s.DeltaFetches != 2 || s.LastViewInstances != 5 {
		t.Errorf("after a consistent delta: %+v, want no new reconcile, view of 5", s)
	}
}

func TestFleet_fetch_emptyRegistrySeen(t *testing.T) {
	fr := &fakeRegistry{}
	ts := httptest.NewServer(fr)
	t.Cleanup(ts.Close)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: ts.URL + "/eureka/"}}, func(c *Config) { c.Instances = 0 }))

	mustFetch(t, f) // empty from the start: not counted
	if s := f.Stats(); s.EmptyRegistrySeen != 0 || s.FullFetches != 1 {
		t.Fatalf("stats = %+v, want no empty registry counted before a non-empty one", s)
	}
	fr.set([]registry.AppView{appView("ORDERS", "o-1")}, nil, "")
	mustFetch(t, f)
	// The delta deletes o-1 and so empties the view; the next fetch is
	// full and finds nothing.
	del := appView("ORDERS", "o-1")
	del.Instances[0].ActionType = registry.ActionDeleted
	fr.set(nil, []registry.AppView{del}, "")
	mustFetch(t, f)
	mustFetch(t, f)
	if s := f.Stats(); s.EmptyRegistrySeen != 1 || s.LastViewInstances != 0 {
		t.Errorf("stats = %+v, want 1 empty registry seen, view of 0", s)
	}
}

func TestFleet_fetch_403failsOver(t *testing.T) {
	node := newMusterNode(t)
	clk := registrytest.NewClock()
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: statusServer(t, http.StatusForbidden)}, {Zone: "b", URL: node.url}},
		func(c *Config) { c.Instances, c.Now, c.ZoneRetryInterval = 0, clk.Now, time.Minute }))
	if _, err := node.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o-1"))); err != nil {
		t.Fatal(err)
	}
	mustFetch(t, f)
	s := f.Stats()
	if s.Failovers != 1 || s.FullFetches != 1 || s.FetchFailures != 0 || s.LastViewInstances != 1 || s.CurrentServer != "b="+node.url {
		t.Errorf("stats = %+v, want 1 failover, 1 full fetch from b, view of 1", s)
	}
	// A delta refused with 403 on the zone's own server (back there after
	// ZoneRetryInterval) also ends on b, through the full fetch that
	// follows it.
	clk.Advance(time.Minute)
	mustFetch(t, f)
	if s := f.Stats(); s.Failovers != 2 || s.FullFetches != 2 || s.DeltaFetches != 0 || s.FetchFailures != 0 {
		t.Errorf("stats = %+v, want 2 failovers, 2 full fetches", s)
	}
}

func TestFleet_fetch_deltaDisabled(t *testing.T) {
	node := newMusterNode(t, func(_ *registry.Config, h *httpapi.Config) { h.DisableDelta = true })
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}, {Zone: "b", URL: statusServer(t, http.StatusServiceUnavailable)}}))
	f.registerAll(t.Context())
	mustFetch(t, f)
	mustFetch(t, f)
	// DiscoveryClient falls back to a full fetch on the same server.
	if s := f.Stats(); s.Failovers != 0 || s.FullFetches != 2 || s.DeltaFetches != 0 || s.FetchFailures != 0 || s.LastViewInstances != 10 {
		t.Errorf("stats = %+v, want 2 full fetches, no failover", s)
	}
}

func TestFleet_fetch_allServersDown(t *testing.T) {
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: closedServer(t)}, {Zone: "b", URL: statusServer(t, http.StatusBadGateway)}}))
	if err := f.fetch(t.Context()); err == nil {
		t.Fatal("fetch() = nil, want an error")
	}
	if s := f.Stats(); s.FetchFailures != 1 || s.Failovers != 2 {
		t.Errorf("stats = %+v, want 1 fetch failure, 2 failovers", s)
	}
}

func TestFleet_cancelAll(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}))
	f.registerAll(t.Context())
	if _, err := node.reg.Apply(registry.CancelOp("APP-00", "t-app-00-0")); err != nil {
		t.Fatal(err)
	}
	f.cancelAll(t.Context())
	if n := node.reg.Len(); n != 0 {
		t.Errorf("registry holds %d instances after cancelAll, want 0", n)
	}
	if s := f.Stats(); s.Cancels != 9 || s.CancelFailures != 1 || s.Registered != 0 {
		t.Errorf("stats = %+v, want 9 cancels, 1 failure (404), 0 registered", s)
	}
}

func TestFleet_cancelAll_timeout(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}))
	f.registerAll(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	f.cancelAll(ctx)
	if s := f.Stats(); s.Cancels != 0 || s.Registered != 10 {
		t.Errorf("stats = %+v, want nothing cancelled once out of time", s)
	}
}

func TestFleet_register_contextCancelledIsNotAFailure(t *testing.T) {
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: closedServer(t)}, {Zone: "b", URL: closedServer(t)}}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	f.registerAll(ctx)
	f.renew(ctx, 0)
	if s := f.Stats(); s.RegistrationFailures != 0 || s.Failovers != 0 {
		t.Errorf("stats = %+v, want nothing counted for a cancelled context", s)
	}
}

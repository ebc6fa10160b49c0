package simclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// runFleet runs f until the returned stop is called; stop waits for Run.
func runFleet(t *testing.T, f *Fleet) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestFleet_Run runs a fleet on real, short intervals against a real
// Muster API: it registers, renews, follows the registry through deltas
// and cancels everything at the end.
func TestFleet_Run(t *testing.T) {
	node := newMusterNode(t)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: node.url}}, func(c *Config) {
		c.Instances, c.Apps = 50, 5
		c.RenewalInterval = 200 * time.Millisecond
		c.FetchInterval = 200 * time.Millisecond
	}))
	stop := runFleet(t, f)

	testwait.True(t, 5*time.Second, "two renewal rounds and a view of 50 matching the server", func() bool {
		s := f.Stats()
		return s.RenewalsOK >= 100 && s.DeltaFetches >= 1 && s.LastViewInstances == 50 &&
			s.ViewHashcode == node.reg.Snapshot().Hashcode
	})
	if _, err := node.reg.Apply(registry.RegisterOp(registrytest.NewInstance("OTHER", "other-1"))); err != nil {
		t.Fatal(err)
	}
	testwait.True(t, 5*time.Second, "the new instance in the view", func() bool {
		s := f.Stats()
		return s.LastViewInstances == 51 && s.ViewHashcode == "UP_51_"
	})
	stop()

	s := f.Stats()
	if n := node.reg.Len(); n != 1 {
		t.Errorf("registry holds %d instances after Run, want 1 (the fleet's 50 cancelled)", n)
	}
	if s.Registrations != 50 || s.RegistrationFailures != 0 || s.RenewalsFailed != 0 || s.Cancels != 50 || s.Registered != 0 ||
		s.Failovers != 0 || s.FetchFailures != 0 || s.EmptyRegistrySeen != 0 || s.ReconcileFetches != 0 {
		t.Errorf("final stats = %+v", s)
	}
	if err := f.Run(context.Background()); err != ErrAlreadyRun {
		t.Errorf("second Run() = %v, want ErrAlreadyRun", err)
	}
}

// TestFleet_Run_zoneReturn: the zone's own server is down at first, so the
// fleet works through the other zone's; once it is back, the periodic
// zone retry brings the fleet home.
func TestFleet_Run_zoneReturn(t *testing.T) {
	node := newMusterNode(t)
	target, _ := url.Parse(node.url)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var down atomic.Bool
	down.Store(true)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(own.Close)
	ownURL := own.URL + "/eureka/"

	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "b", URL: node.url}, {Zone: "a", URL: ownURL}}, func(c *Config) {
		c.RenewalInterval = 100 * time.Millisecond
		c.FetchInterval = 100 * time.Millisecond
		c.ZoneRetryInterval = 150 * time.Millisecond
	}))
	runFleet(t, f)

	testwait.True(t, 5*time.Second, "renewals through zone b", func() bool {
		s := f.Stats()
		return s.Registered == 10 && s.RenewalsOK >= 10 && s.Failovers >= 1
	})
	down.Store(false)
	testwait.True(t, 5*time.Second, "the fleet back on zone a", func() bool {
		s := f.Stats()
		return s.ZoneReturns >= 1 && s.CurrentServer == "a="+ownURL
	})
	if s := f.Stats(); s.RenewalsFailed != 0 {
		t.Errorf("renewals failed = %d, want 0 (each failure is retried on the next server)", s.RenewalsFailed)
	}
}

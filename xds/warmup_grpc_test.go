package xds_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/xds"
)

// ackedEDS is the EDS version the one xDS client of s acknowledged last.
func ackedEDS(t *testing.T, s *xds.Server) string {
	t.Helper()
	cs := s.Clients()
	if len(cs) != 1 {
		t.Fatalf("xDS clients: %+v, want one", cs)
	}
	if cs[0].NACKs > 0 {
		t.Fatalf("the client rejected a push: %s", cs[0].LastNACK)
	}
	return cs[0].Version
}

// awaitPush waits until the client acknowledged an EDS version other than
// before, then lets its balancer take the new picker in.
func awaitPush(t *testing.T, s *xds.Server, cc *grpc.ClientConn, before string) {
	t.Helper()
	testwait.For(t, 15*time.Second, "the client acknowledges a new EDS version", func() error {
		if v := ackedEDS(t, s); v == before {
			return fmt.Errorf("still at %s", v)
		}
		return nil
	})
	if _, err := reached(cc, 50); err != nil {
		t.Fatal(err)
	}
}

// TestServer_warmupThroughGRPC: a real grpc-go client (xds:///orders)
// calls two gRPC servers; b registers after a, with a 50 s warm-up for
// ORDERS. At three steps of the ramp b's share of 2,000 calls is its
// weight's share (10 %, 46 %, 82 % of a's weight: 1/11, 46/146, 82/182),
// each larger than the last, and after the warm-up its full share (1/2).
func TestServer_warmupThroughGRPC(t *testing.T) {
	const calls = 2000
	a, b := startOrderServer(t, "a"), startOrderServer(t, "b")
	reg := newRegistry(t, order("o-a", a.port, "z1"))
	clk := registrytest.NewClock()
	metrics := prometheus.NewRegistry()
	cfg := xds.Config{AppWarmup: map[string]time.Duration{"ORDERS": 50 * time.Second}}
	s := start(t, cfg, xds.Options{Registry: reg, Clock: clk, Metrics: metrics})

	cc := dialOrders(t, s, "")
	waitOnly(t, cc, "a")
	before := ackedEDS(t, s)
	apply(t, reg, registry.RegisterOp(order("o-b", b.port, "z1")))
	awaitPush(t, s, cc, before)
	if w, ok := s.Weight("ORDERS", "o-b"); !ok || w.Percent != 10 || w.Weight != 10 || w.Full != 100 {
		t.Fatalf("o-b's weight at the start: %+v %v, want 10 of 100 (10 %%)", w, ok)
	}
	if g := gauge(t, metrics, "muster_xds_warming_endpoints"); g != 1 {
		t.Errorf("muster_xds_warming_endpoints = %v, want 1", g)
	}

	share := func(wantPercent int) float64 {
		t.Helper()
		seen, err := reached(cc, calls)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(seen["b"]) / calls
		want := float64(wantPercent) / float64(100+wantPercent)
		t.Logf("b at %d %% of its weight: %d of %d calls (%.3f, weight share %.3f)", wantPercent, seen["b"], calls, got, want)
		// A share is off its weight's by where the servers' addresses
		// hash on grpc-go's ring (4096 entries; the ports change every
		// run) and by the random hash of each call: over 100 runs' 400
		// points at most 0.04 (mean 0.009). 0.07 holds that with room,
		// and still tells the ramp from round robin's 0.5.
		if math.Abs(got-want) > 0.07 {
			t.Errorf("b's share at %d %%: %.3f, want %.3f ± 0.07 (%v)", wantPercent, got, want, seen)
		}
		return got
	}
	var shares []float64
	shares = append(shares, share(10))
	for _, step := range []struct {
		advance time.Duration
		percent int
	}{{20 * time.Second, 46}, {20 * time.Second, 82}} {
		before, builds := ackedEDS(t, s), gauge(t, metrics, "muster_xds_snapshots_total")
		clk.Advance(step.advance)
		awaitPush(t, s, cc, before)
		// The clock passed one step boundary or two: one build, at the
		// step it reached, not one per boundary or per tick.
		if n := gauge(t, metrics, "muster_xds_snapshots_total") - builds; n != 1 {
			t.Errorf("%v later: %v builds, want 1", step.advance, n)
		}
		if w, _ := s.Weight("ORDERS", "o-b"); w.Percent != step.percent {
			t.Fatalf("o-b's weight after %v more: %+v, want %d %%", step.advance, w, step.percent)
		}
		shares = append(shares, share(step.percent))
	}
	for i := 1; i < len(shares); i++ {
		if shares[i] <= shares[i-1] {
			t.Errorf("b's share did not grow along the ramp: %v", shares)
		}
	}

	before = ackedEDS(t, s)
	clk.Advance(10 * time.Second) // 50 s: warm
	awaitPush(t, s, cc, before)
	if w, _ := s.Weight("ORDERS", "o-b"); w.Percent != 100 || w.Weight != 100 || !w.WarmUntil.IsZero() {
		t.Fatalf("o-b's weight after the warm-up: %+v, want 100 of 100", w)
	}
	share(100)
	if g := gauge(t, metrics, "muster_xds_warming_endpoints"); g != 0 {
		t.Errorf("muster_xds_warming_endpoints = %v after the warm-up, want 0", g)
	}
}

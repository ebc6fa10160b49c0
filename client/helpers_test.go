package client_test

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// node is a real Muster node in-process: the registry on a manual clock
// behind the HTTP API, served over loopback.
type node struct {
	reg   *registry.Registry
	srv   *httpapi.Server
	clock *registrytest.Clock
	http  *httptest.Server
	url   string // Eureka base URL
}

func startNode(tb testing.TB) *node {
	tb.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	rcfg.Rand = rand.New(rand.NewPCG(1, 1))
	// The client's fake clock moves while this node's stays put, so the
	// client's lastDirtyTimestamp runs ahead of the node's clock.
	rcfg.Limits.MaxClockSkew = 24 * time.Hour
	reg, err := registry.New(rcfg)
	if err != nil {
		tb.Fatal(err)
	}
	reg.OpenForTraffic()
	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = reg
	hcfg.Now = clk.Now
	srv, err := httpapi.New(hcfg)
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	tb.Cleanup(ts.Close)
	// Runs first: held watch requests answer, and the node's watch hub
	// stops, before the listener closes.
	tb.Cleanup(srv.StopWatches)
	return &node{reg: reg, srv: srv, clock: clk, http: ts, url: ts.URL + "/eureka/"}
}

// newClient builds a client of servers on a manual clock, closed when the
// test ends.
func newClient(tb testing.TB, servers []client.Server, opts ...func(*client.Config)) (*client.Client, *client.FakeClock) {
	tb.Helper()
	clk := client.NewFakeClock()
	cfg := client.DefaultConfig()
	cfg.Servers = servers
	cfg.Clock = clk
	cfg.RequestTimeout = 5 * time.Second
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(tb))
	for _, o := range opts {
		o(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c, clk
}

func servers(urls ...string) []client.Server {
	out := make([]client.Server, len(urls))
	for i, u := range urls {
		out[i] = client.Server{URL: u}
	}
	return out
}

func testInstance(app string, n int) client.Instance {
	host := "host-" + string(rune('a'+n))
	return client.Instance{App: app, HostName: host, IPAddr: "10.0.0." + string(rune('1'+n)), Port: 8080, Zone: "zone-a"}
}

// waitTimeout bounds testwait.True in this package; only used where the
// thing waited for is another goroutine's HTTP round trip.
const waitTimeout = 10 * time.Second

// checkGoroutines fails the test if, after it ends and its cleanups ran,
// more goroutines run than before it started.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d after the test, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

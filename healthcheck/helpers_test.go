package healthcheck_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// backend is a real HTTP server on loopback whose health a test switches,
// counting the requests it gets.
type backend struct {
	healthy  atomic.Bool
	redirect atomic.Bool // answer 302 to another address
	requests atomic.Int64
	srv      *http.Server
	addr     netip.AddrPort
}

func newBackend(tb testing.TB) *backend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &backend{addr: netip.MustParseAddrPort(ln.Addr().String())}
	b.healthy.Store(true)
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		if b.redirect.Load() {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
			return
		}
		if r.Header.Get("Authorization") != "" {
			w.WriteHeader(http.StatusTeapot) // never sent: a probe carries no credentials
			return
		}
		if b.healthy.Load() {
			_, _ = w.Write([]byte(`{"status":"UP"}`))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = b.srv.Close() })
	return b
}

// instance is an instance of app served by b: ipAddr 127.0.0.1, its
// healthCheckUrl on b.
func (b *backend) instance(app, id string) *registry.Instance {
	in := registrytest.NewInstance(app, id)
	in.IPAddr = "127.0.0.1"
	in.HostName = "localhost"
	in.Port = registry.Port{Number: int(b.addr.Port()), Enabled: true}
	in.HealthCheckURL = "http://127.0.0.1:" + strconv.Itoa(int(b.addr.Port())) + "/actuator/health"
	return in
}

// counter is a TCP listener that counts the connections it accepts: the
// proof that nothing was requested from it.
type counter struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newCounter(tb testing.TB, addr string) *counter {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Skipf("cannot listen on %s here: %v", addr, err)
	}
	c := &counter{ln: ln}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			_ = conn.Close()
		}
	}()
	tb.Cleanup(func() { _ = ln.Close(); c.wg.Wait() })
	return c
}

func (c *counter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

var loopbackOnly = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// testConfig is the defaults with the test's clock and loopback allowed.
func testConfig(t *testing.T, now func() time.Time) healthcheck.Config {
	cfg := healthcheck.DefaultConfig()
	cfg.Enabled = true
	cfg.Apps = []string{"svc"}
	cfg.Timeout = 2 * time.Second
	cfg.AllowedCIDRs = loopbackOnly
	cfg.Now = now
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	return cfg
}

func round(c *healthcheck.Checker) healthcheck.RoundResult {
	return c.Round(context.Background())
}

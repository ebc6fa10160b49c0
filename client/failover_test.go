package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
)

// TestClient_failover_killedServer kills the server a registration talks
// to: the next heartbeat fails over to the other server, which does not
// know the instance (404), so the registration registers there and stays.
func TestClient_failover_killedServer(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t), startNode(t)
	c, clk := newClient(t, servers(a.url, b.url))
	ctx := ctxT(t)
	r, err := c.Register(ctx, testInstance("orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Instance().ID
	if _, ok := a.reg.Instance("ORDERS", id); !ok {
		t.Fatal("not registered on the first server")
	}
	a.http.Close()

	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "registration on the second server", func() bool { _, ok := b.reg.Instance("ORDERS", id); return ok })
	if s := c.Stats(); s.Failovers != 1 {
		t.Fatalf("failovers = %d, want 1", s.Failovers)
	}
	if c.CurrentServer().URL != b.url {
		t.Fatalf("current server %s, want %s", c.CurrentServer(), b.url)
	}
	// It stays on the working server.
	for i := range 3 {
		clk.BlockUntil(t, 1)
		clk.Advance(30 * time.Second)
		testwait.True(t, waitTimeout, "heartbeat on the second server", func() bool { return b.reg.Stats().Renewals == uint64(i+1) })
	}
	if s := c.Stats(); s.Failovers != 1 {
		t.Fatalf("failovers = %d after more heartbeats, want 1", s.Failovers)
	}
	apps, err := c.Fetch(ctx)
	if err != nil || len(apps["ORDERS"]) != 1 {
		t.Fatalf("fetch after failover: %v, %v", apps, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if b.reg.Len() != 0 {
		t.Fatal("Close did not cancel on the second server")
	}
}

// flaky serves h, or 503 while down is set.
type flaky struct {
	h    http.Handler
	down atomic.Bool
	hits atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	if f.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	f.h.ServeHTTP(w, r)
}

// TestClient_failover_zones puts the client's own zone first, moves on
// after a 5xx, and returns to its zone after ZoneRetryInterval.
func TestClient_failover_zones(t *testing.T) {
	checkGoroutines(t)
	far, near := startNode(t), startNode(t)
	nearFlaky := &flaky{h: near.http.Config.Handler}
	nearTS := httptest.NewServer(nearFlaky)
	t.Cleanup(nearTS.Close)
	nearURL := nearTS.URL + "/eureka"
	c, clk := newClient(t, []client.Server{{Zone: "zone-b", URL: far.url}, {Zone: "zone-a", URL: nearURL}}, func(cfg *client.Config) {
		cfg.Zone = "zone-a"
		cfg.ZoneRetryInterval = 10 * time.Minute
	})
	ctx := ctxT(t)
	r, err := c.Register(ctx, testInstance("orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Instance().ID
	if _, ok := near.reg.Instance("ORDERS", id); !ok || far.reg.Len() != 0 {
		t.Fatal("the registration did not go to the client's own zone first")
	}

	nearFlaky.down.Store(true)
	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "failover to the other zone", func() bool { _, ok := far.reg.Instance("ORDERS", id); return ok })
	nearFlaky.down.Store(false)

	// Before ZoneRetryInterval the client stays where it works.
	for i := range 2 {
		clk.BlockUntil(t, 1)
		clk.Advance(30 * time.Second)
		testwait.True(t, waitTimeout, "heartbeat in the other zone", func() bool { return far.reg.Stats().Renewals == uint64(i+1) })
	}
	clk.BlockUntil(t, 1)
	clk.Advance(10 * time.Minute)
	testwait.True(t, waitTimeout, "heartbeat back in the own zone", func() bool { return near.reg.Stats().Renewals == 1 })
	if s := c.Stats(); s.Failovers != 1 || s.ZoneReturns != 1 {
		t.Fatalf("stats %+v, want 1 failover and 1 zone return", s)
	}
	if cur := c.CurrentServer(); cur.URL != nearURL+"/" || cur.Zone != "zone-a" {
		t.Fatalf("current server %+v, want zone-a %s/", cur, nearURL)
	}
}

// TestClient_basicAuth sends the credentials of the server URL as basic
// auth and never shows them in errors.
func TestClient_basicAuth(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	var unauthorized atomic.Int64
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "svc" || p != "s3cret" {
			unauthorized.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="muster"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		n.http.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(guard.Close)
	withAuth := strings.Replace(guard.URL, "http://", "http://svc:s3cret@", 1) + "/eureka/"

	c, _ := newClient(t, servers(withAuth))
	ctx := ctxT(t)
	r, err := c.Register(ctx, testInstance("orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if unauthorized.Load() != 0 {
		t.Fatalf("%d requests without the right credentials", unauthorized.Load())
	}
	if strings.Contains(c.CurrentServer().URL, "s3cret") {
		t.Fatalf("CurrentServer shows the password: %s", c.CurrentServer())
	}

	// Wrong credentials: a 401, not a failover, and no password in the error.
	wrong := strings.Replace(guard.URL, "http://", "http://svc:wrong@", 1) + "/eureka/"
	c2, _ := newClient(t, servers(wrong, n.url))
	_, err = c2.Fetch(ctx)
	var se *client.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("fetch with a wrong password: %v, want a 401 StatusError", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error shows the password: %v", err)
	}
	if c2.Stats().Failovers != 0 {
		t.Fatal("a 401 failed over")
	}

	// A dead server with credentials: the error names it without them.
	guard.Close()
	_, err = c.Fetch(ctx)
	if !errors.Is(err, client.ErrNoServer) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("fetch from a dead server: %v, want ErrNoServer without the password", err)
	}
	if _, err := client.New(client.Config{Servers: servers("http://svc:s3cret@[::1")}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad URL error: %v", err)
	}
}

// TestClient_allServersDown ends with ErrNoServer after trying each
// server once.
func TestClient_allServersDown(t *testing.T) {
	checkGoroutines(t)
	var hits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	c, _ := newClient(t, servers(down.URL+"/a/", down.URL+"/b/"))
	_, err := c.Fetch(ctxT(t))
	var se *client.StatusError
	if !errors.Is(err, client.ErrNoServer) || !errors.As(err, &se) || se.Code != 500 {
		t.Fatalf("err %v, want ErrNoServer wrapping a 500", err)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d requests, want one per server", hits.Load())
	}
}

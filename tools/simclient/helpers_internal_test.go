package simclient

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// musterNode is a real Muster API (registry + httpapi) on a loopback
// listener.
type musterNode struct {
	reg *registry.Registry
	url string       // base URL, ending in /eureka/
	h   http.Handler // the API, to serve behind another listener
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

func newMusterNode(t *testing.T, opts ...func(*registry.Config, *httpapi.Config)) *musterNode {
	t.Helper()
	logger := testLogger(t)
	rcfg := registry.DefaultConfig()
	rcfg.Logger = logger
	hcfg := httpapi.DefaultConfig()
	hcfg.Logger = logger
	for _, o := range opts {
		o(&rcfg, &hcfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	hcfg.Registry = reg
	srv, err := httpapi.New(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &musterNode{reg: reg, url: ts.URL + "/eureka/", h: srv}
}

// statusServer answers every request with code.
func statusServer(t *testing.T, code int) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(code), code)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/eureka/"
}

// switchServer serves h, or answers code while code is not 0: a server
// that goes down and comes back at the same URL.
type switchServer struct {
	h    http.Handler
	code atomic.Int32
}

func (s *switchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code := int(s.code.Load()); code != 0 {
		http.Error(w, http.StatusText(code), code)
		return
	}
	s.h.ServeHTTP(w, r)
}

// newSwitchServer serves h (nil: 404 for everything) on loopback,
// answering code while code is set.
func newSwitchServer(t *testing.T, h http.Handler, code int) (*switchServer, string) {
	t.Helper()
	if h == nil {
		h = http.NotFoundHandler()
	}
	s := &switchServer{h: h}
	s.code.Store(int32(code))
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL + "/eureka/"
}

// closedServer returns the URL of a port nothing listens on.
func closedServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/eureka/"
}

// testConfig is a small fleet in zone a with quick timeouts; opts change it.
func testConfig(t *testing.T, servers []Server, opts ...func(*Config)) Config {
	cfg := DefaultConfig()
	cfg.Servers = servers
	cfg.Zone = "a"
	cfg.Instances = 10
	cfg.Apps = 2
	cfg.IDPrefix = "t"
	cfg.RequestTimeout = 2 * time.Second
	cfg.ConnectTimeout = time.Second
	cfg.Workers = 4
	cfg.Logger = testLogger(t)
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func mustNewFleet(tb testing.TB, cfg Config) *Fleet {
	tb.Helper()
	f, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.http.CloseIdleConnections)
	return f
}

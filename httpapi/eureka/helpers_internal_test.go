package eureka

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testhttp"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
)

// testNode is the API alone over a real HTTP listener on loopback, with a
// registry on a manual clock: its routes as the server mounts them, with
// the server's error answers (WriteError) and trailing-slash rule
// (httpkit.TrimSlash), and /metrics with the API's own collectors. The
// server's edge (authentication, limits) is httpapi's to test.
type testNode struct {
	api     *API
	reg     *registry.Registry
	clock   *registrytest.Clock
	handler http.Handler
	http    *httptest.Server
}

func newTestNode(t *testing.T, opts ...func(*registry.Config, *Config)) *testNode {
	t.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	rcfg.Rand = rand.New(rand.NewPCG(1, 1))
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	rcfg.Logger = logger
	cfg := Config{Logger: logger, Now: clk.Now,
		Node:         ops.NodeInfo{Name: "node-a", Zone: "zone-a", URL: "http://127.0.0.1:8761/eureka/", Environment: "test", Datacenter: "default"},
		MaxBodyBytes: 1 << 20, MaxBatchBodyBytes: 16 << 20, WatchMaxWait: 60 * time.Second, WatchMaxWatchers: 50_000}
	for _, o := range opts {
		o(&rcfg, &cfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	cfg.Registry = reg
	if cfg.Digests == nil {
		cfg.Digests = reg
	}
	if cfg.Batch == nil {
		rc, err := replication.NewReceiver(reg, logger)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Batch = rc.Handle
	}
	api := New(cfg)
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if !c.Response().Committed {
			WriteError(c, err)
		}
	}
	route := func(add func(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route) Route {
		return func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc) { add(path, h, extra...) }
	}
	api.Routes(func(base string) (post, put, get, del Route) {
		g := e.Group(base)
		return route(g.POST), route(g.PUT), route(g.GET), route(g.DELETE)
	}, route(e.GET))
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(api.Collectors()...)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(metrics, promhttp.HandlerOpts{})))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpkit.TrimSlash(r)
		e.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	// Runs before ts.Close, which would otherwise wait for held requests.
	t.Cleanup(api.StopWatches)
	return &testNode{api: api, reg: reg, clock: clk, handler: h, http: ts}
}

type response struct {
	code   int
	header http.Header
	body   string
}

// reason is an error answer's reason: the X-Muster-Error header on the
// Eureka client routes (their error bodies are empty), else the body.
func (r response) reason() string {
	if v := r.header.Get(ErrorHeader); v != "" {
		return v
	}
	return r.body
}

// do sends a request (testhttp.Do); headers alternate name, value.
func (n *testNode) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	r := testhttp.Do(t, n.http.URL, method, path, body, headers...)
	return response{r.Code, r.Header, r.Body}
}

// springBody and jsonHeaders are testhttp's.
const springBody = testhttp.SpringBody

func jsonHeaders() []string { return testhttp.JSONHeaders() }

// The API's insides, read by its tests.

// watchState is how many blocking fetches wait on app and whether the
// channel they wait on is still open (not yet woken).
func (n *testNode) watchState(app string) (waiters int, armed bool) {
	h := n.api.watch
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.apps[app]
	if a == nil {
		return 0, false
	}
	return a.waiters, a.changed != nil
}

// appVersion is the version of one app's view: the Seq of its newest
// change this node has applied, 0 when it has seen none.
func (h *watchHub) appVersion(app string) uint64 {
	h.start()
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.apps[strings.ToUpper(app)]; a != nil {
		return a.seq
	}
	return 0
}

// watchersHeld is how many blocking fetches are held now.
func (n *testNode) watchersHeld() int64 { return n.api.watch.held.Load() }

// chunkSpans is the apps per chunk of the registry's documents (delta
// false) or the delta's, by format: JSON, XML, gzip JSON, gzip XML.
func (n *testNode) chunkSpans(delta bool) [4]int {
	ps := n.api.pieces
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := &ps.spans[b2i(delta)]
	return [4]int{st[variantJSON].span, st[variantXML].span, st[variantJSONGzNext].span, st[variantXMLGz].span}
}

// bytes returns the payload in one slice (a copy when it has several
// parts).
func (p payload) bytes() []byte {
	if len(p.parts) == 1 {
		return p.parts[0]
	}
	b := make([]byte, 0, p.size)
	for _, part := range p.parts {
		b = append(b, part...)
	}
	return b
}

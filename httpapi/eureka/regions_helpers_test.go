package eureka_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi/eureka"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// The remote regions as the Eureka API serves them: regions=, the
// transparent fallback, merged deltas, gzip, the watch stream, blocking
// fetches, require-all. Each region is the API alone over a registry,
// mounted as the server mounts it, with a regions.Set fetching the other
// regions' APIs on a manual clock: the API reads the remote regions only
// through eureka.RemoteRegions, and regions.Set is the one it is given in
// a node. A whole node serving regions= is node's test.

// regionNode is one region: the Eureka API over its own registry, with a
// regions.Set of its remote regions, on an httptest server.
type regionNode struct {
	name    string
	reg     *registry.Registry
	regions *regions.Set
	api     *eureka.API
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
}

// newRegionServer starts region name's HTTP server (503 until mount), so
// that regions can be given each other's URLs before they fetch.
func newRegionServer(t *testing.T, name string) *regionNode {
	t.Helper()
	n := &regionNode{name: name}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := n.handler.Load()
		if h == nil {
			http.Error(w, "not mounted", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// mount builds the region's registry, its remote regions (region → comma-
// separated base URLs, as eureka.server.remote-region-urls-with-name) and
// the API over both, serves them and starts the fetchers on clock.
func (n *regionNode) mount(t *testing.T, clock *registrytest.Clock, remotes map[string]string, configs ...func(*regions.Config)) *regionNode {
	t.Helper()
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Str("region", n.name).Logger()
	rcfg := registry.DefaultConfig()
	rcfg.Logger = logger
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	cfg := regions.DefaultConfig()
	cfg.LocalRegion = n.name
	for r, u := range remotes {
		cfg.URLs[r] = strings.Split(u, ",")
	}
	for _, c := range configs {
		c(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	set := regions.NewSet(cfg, regions.FetcherConfig{Clock: clock, ID: "127.0.0.1",
		Retention: rcfg.DeltaRetention, Logger: logger, Metrics: metrics})
	api := eureka.New(eureka.Config{Registry: reg, Digests: reg, Logger: logger,
		Node:         ops.NodeInfo{Name: "node-" + n.name, URL: n.srv.URL + "/eureka/"},
		MaxBodyBytes: 1 << 20, MaxBatchBodyBytes: 16 << 20, WatchMaxWait: 60 * time.Second, WatchMaxWatchers: 50_000,
		Regions: set, DeltaRetention: rcfg.DeltaRetention})
	metrics.MustRegister(api.Collectors()...)

	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if !c.Response().Committed {
			eureka.WriteError(c, err)
		}
	}
	route := func(add func(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route) eureka.Route {
		return func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc) { add(path, h, extra...) }
	}
	api.Routes(func(base string) (post, put, get, del eureka.Route) {
		g := e.Group(base)
		return route(g.POST), route(g.PUT), route(g.GET), route(g.DELETE)
	}, route(e.GET))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(metrics, promhttp.HandlerOpts{})))
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpkit.TrimSlash(r)
		e.ServeHTTP(w, r)
	})
	n.reg, n.regions, n.api = reg, set, api
	n.handler.Store(&h)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		set.Run(ctx)
	}()
	// Before the server closes (which waits for held requests): the
	// fetchers stop, then the watches end.
	t.Cleanup(func() {
		cancel()
		<-done
		api.StopWatches()
	})
	return n
}

// regionNodeOf starts and mounts region name.
func regionNodeOf(t *testing.T, name string, clock *registrytest.Clock, remotes map[string]string, configs ...func(*regions.Config)) *regionNode {
	t.Helper()
	return newRegionServer(t, name).mount(t, clock, remotes, configs...)
}

// Addr is the region's host:port.
func (n *regionNode) Addr() string { return n.srv.Listener.Addr().String() }

// whitelist is eureka.server.remote-region-app-whitelist.<region>.
func whitelist(region string, apps ...string) func(*regions.Config) {
	return func(c *regions.Config) { c.Whitelist[region] = apps }
}

func register(t *testing.T, n *regionNode, app, id string) {
	t.Helper()
	if code := call(t, "POST", "http://"+n.Addr()+"/eureka/apps/"+app, instanceBody(app, id, 3600)); code != 204 {
		t.Fatalf("register %s/%s on %s: %d", app, id, n.name, code)
	}
}

func instanceBody(app, id string, leaseSecs int) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h-%s","app":%q,"ipAddr":"10.0.0.1","status":"UP",
"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":1,"durationInSecs":%d},"vipAddress":%q}}`, id, id, app, leaseSecs, strings.ToLower(app))
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// call sends a request (a JSON body if any) and returns the status.
func call(t *testing.T, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func metricValue(t *testing.T, n *regionNode, name string) float64 {
	t.Helper()
	code, body, err := httpGet("http://" + n.Addr() + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
			return v
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, timeout, what, cond)
}

// twoRegions is region a and region b, each a remote of the other; a
// reaches b through a switch that can cut it off.
type twoRegions struct {
	a, b  *regionNode
	clock *registrytest.Clock
	cut   atomic.Bool
}

func startTwoRegions(t *testing.T, configA ...func(*regions.Config)) *twoRegions {
	t.Helper()
	tr := &twoRegions{clock: registrytest.NewClock()}
	a, b := newRegionServer(t, "a"), newRegionServer(t, "b")
	bURL, _ := url.Parse(b.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(bURL)
	toB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tr.cut.Load() {
			http.Error(w, "cut off", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(toB.Close)
	tr.a = a.mount(t, tr.clock, map[string]string{"b": toB.URL + "/eureka"}, configA...)
	tr.b = b.mount(t, tr.clock, map[string]string{"a": a.srv.URL + "/eureka/"})
	return tr
}

// step moves the clock one fetch interval once both fetchers wait, and
// returns when both have fetched again and wait once more.
func (tr *twoRegions) step(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "both fetchers waiting", func() bool { return tr.clock.Waiting() == 2 })
	fa, fb := tr.a.regions.Fetchers()[0].Stats().Fetches, tr.b.regions.Fetchers()[0].Stats().Fetches
	tr.clock.Advance(30 * time.Second)
	waitFor(t, 10*time.Second, "both fetchers fetched", func() bool {
		return tr.a.regions.Fetchers()[0].Stats().Fetches > fa && tr.b.regions.Fetchers()[0].Stats().Fetches > fb && tr.clock.Waiting() == 2
	})
}

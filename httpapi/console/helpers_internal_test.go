package console

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testhttp"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// testNode is the console alone over a real HTTP listener on loopback,
// with a registry on a manual clock: its routes as the server mounts them
// (the server's authentication, and the Eureka API beside it, are
// httpapi's to test).
type testNode struct {
	console *Console
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
	cfg := Config{Logger: logger, Now: clk.Now, Security: ops.Security{ClientAuth: "none"},
		Node: ops.NodeInfo{Name: "node-a", Zone: "zone-a", URL: "http://127.0.0.1:8761/eureka/", Environment: "test", Datacenter: "default"}}
	for _, o := range opts {
		o(&rcfg, &cfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	cfg.Registry = reg
	c, h := mount(cfg)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &testNode{console: c, reg: reg, clock: clk, handler: h, http: ts}
}

// mount builds a console over cfg and mounts its routes, with errors
// answered as the server does: the status (an echo error's, or the
// registry's for its own) and the reason as plain text.
func mount(cfg Config) (*Console, http.Handler) {
	c := New(cfg)
	e := echo.New()
	e.HTTPErrorHandler = func(err error, ctx echo.Context) {
		if ctx.Response().Committed {
			return
		}
		code, msg := http.StatusInternalServerError, err.Error()
		var he *echo.HTTPError
		if errors.As(err, &he) {
			code, msg = he.Code, fmt.Sprint(he.Message)
		} else if sc, ok := registry.StatusCode(err); ok {
			code = sc
		}
		_ = ctx.String(code, msg+"\n")
	}
	c.Routes(func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc) { e.GET(path, h, extra...) },
		func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc) { e.POST(path, h, extra...) })
	return c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpkit.TrimSlash(r)
		e.ServeHTTP(w, r)
	})
}

// response is an answer as the tests read it.
type response = testhttp.Response

// do sends a request (testhttp.Do); headers alternate name, value.
func (n *testNode) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	return testhttp.Do(t, n.http.URL, method, path, body, headers...)
}

// statusOf is the instance's status in the registry, "" when it is gone.
func statusOf(t *testing.T, n *testNode, app, id string) registry.Status {
	t.Helper()
	v, ok := n.reg.Instance(app, id)
	if !ok {
		return ""
	}
	return v.Status
}

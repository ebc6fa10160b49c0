package httpapi_test

import (
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/internal/testhttp"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
)

type testNode struct {
	srv   *httpapi.Server
	reg   *registry.Registry
	clock *registrytest.Clock
	http  *httptest.Server
}

// newTestNode runs a server over a real HTTP listener on loopback, with a
// registry on a manual clock.
func newTestNode(t *testing.T, opts ...func(*registry.Config, *httpapi.Config)) *testNode {
	t.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	rcfg.Rand = rand.New(rand.NewPCG(1, 1))
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	rcfg.Logger = logger
	hcfg := httpapi.DefaultConfig()
	hcfg.Logger = logger
	hcfg.Now = clk.Now
	hcfg.Node = httpapi.NodeInfo{Name: "node-a", Zone: "zone-a", URL: "http://127.0.0.1:8761/eureka/", Environment: "test", Datacenter: "default"}
	for _, o := range opts {
		o(&rcfg, &hcfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	hcfg.Registry = reg
	if hcfg.Digests == nil {
		hcfg.Digests = reg
	}
	if hcfg.Batch == nil {
		rc, err := replication.NewReceiver(reg, logger)
		if err != nil {
			t.Fatal(err)
		}
		hcfg.Batch = rc.Handle
	}
	srv, err := httpapi.New(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	// Runs before ts.Close, which would otherwise wait for held requests.
	t.Cleanup(srv.StopWatches)
	return &testNode{srv: srv, reg: reg, clock: clk, http: ts}
}

// response is an answer as the tests read it.
type response = testhttp.Response

// do sends a request (testhttp.Do); headers alternate name, value.
func (n *testNode) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	return testhttp.Do(t, n.http.URL, method, path, body, headers...)
}

// springBody and jsonHeaders are testhttp's.
const springBody = testhttp.SpringBody

func jsonHeaders() []string { return testhttp.JSONHeaders() }

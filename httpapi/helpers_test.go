package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
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

type response struct {
	code   int
	header http.Header
	body   string
}

// reason is an error answer's reason: the X-Muster-Error header on the
// Eureka client routes (their error bodies are empty), else the body.
func (r response) reason() string {
	if v := r.header.Get("X-Muster-Error"); v != "" {
		return v
	}
	return r.body
}

// do sends a request; headers alternate name, value.
func (n *testNode) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, n.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	// Leave gzip to the test: a transport that adds Accept-Encoding itself
	// would hide what the server does.
	// Redirects are the test's to follow, too.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s %s: bad gzip: %v", method, path, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// springBody is a register body as Spring Cloud's client sends it.
const springBody = `{"instance":{
 "instanceId":"host-a:orders:8080","hostName":"host-a","app":"ORDERS","ipAddr":"10.0.0.12",
 "status":"UP","overriddenStatus":"UNKNOWN",
 "port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,
 "dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
 "leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},
 "metadata":{"management.port":"8080"},
 "homePageUrl":"http://host-a:8080/","statusPageUrl":"http://host-a:8080/actuator/info",
 "healthCheckUrl":"http://host-a:8080/actuator/health","vipAddress":"orders","secureVipAddress":"orders",
 "isCoordinatingDiscoveryServer":false,"lastUpdatedTimestamp":1718000000000,"lastDirtyTimestamp":1717999999000}}`

func jsonHeaders() []string {
	return []string{"Content-Type", "application/json", "Accept", "application/json"}
}

// newPeerTransport is the HTTP replication transport with a request
// timeout; edit changes more of its config.
func newPeerTransport(t testing.TB, requestTimeout time.Duration, edit ...func(*replication.HTTPTransportConfig)) *replication.HTTPTransport {
	t.Helper()
	cfg := replication.DefaultHTTPTransportConfig()
	cfg.RequestTimeout = requestTimeout
	for _, e := range edit {
		e(&cfg)
	}
	tr, err := replication.NewHTTPTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

package ops_test

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// actuatorNode is a real httpapi server on loopback over a registry on a
// manual clock, with its readiness in the test's hands.
type actuatorNode struct {
	srv   *httpapi.Server
	reg   *registry.Registry
	clock *registrytest.Clock
	http  *httptest.Server
	mgmt  *httptest.Server // the management port's listener, when Actuator.Port is set
	ready atomic.Bool
	reads atomic.Bool
}

func newActuatorNode(t *testing.T, opts ...func(*registry.Config, *httpapi.Config)) *actuatorNode {
	t.Helper()
	n := &actuatorNode{clock: registrytest.NewClock()}
	n.ready.Store(true)
	n.reads.Store(true)
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rcfg := registry.DefaultConfig()
	rcfg.Now, rcfg.Logger = n.clock.Now, logger
	rcfg.Rand = rand.New(rand.NewPCG(1, 1))
	hcfg := httpapi.DefaultConfig()
	hcfg.Logger, hcfg.Now = logger, n.clock.Now
	hcfg.Node = httpapi.NodeInfo{Name: "node-a", Zone: "zone-a", Version: "1.2.3"}
	hcfg.Ready, hcfg.ReadsAllowed = n.ready.Load, n.reads.Load
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
	n.srv, n.reg = srv, reg
	n.http = httptest.NewServer(srv)
	t.Cleanup(n.http.Close)
	t.Cleanup(srv.StopWatches)
	if h := srv.ManagementHandler(); h != nil {
		n.mgmt = httptest.NewServer(h)
		t.Cleanup(n.mgmt.Close)
	}
	return n
}

type actuatorResponse struct {
	code   int
	header http.Header
	body   string
}

// get sends a GET to base+path; headers alternate name, value; a
// "user:password" in userinfo is sent as HTTP Basic.
func actuatorGet(t *testing.T, base, path, userinfo string, headers ...string) actuatorResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user, password, ok := strings.Cut(userinfo, ":"); ok {
		req.SetBasicAuth(user, password)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return actuatorResponse{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (n *actuatorNode) register(t *testing.T, app, id string) {
	t.Helper()
	if _, err := n.reg.Apply(registry.Op{Kind: registry.OpRegister, Instance: registrytest.NewInstance(app, id)}); err != nil {
		t.Fatal(err)
	}
}

func TestActuatorHealth_defaultShowsStatusAndGroupsOnly(t *testing.T) {
	n := newActuatorNode(t)
	n.register(t, "billing", "b1")
	r := actuatorGet(t, n.http.URL, "/actuator/health", "")
	if r.code != 200 || r.body != `{"status":"UP","groups":["liveness","readiness"]}` {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != ops.ActuatorV3JSON {
		t.Errorf("content type without Accept %q, want Spring's %q", ct, ops.ActuatorV3JSON)
	}
	for accept, want := range map[string]string{
		"application/json":               "application/json",
		ops.ActuatorV2JSON:               ops.ActuatorV2JSON,
		"text/html, application/json":    "application/json",
		ops.ActuatorV3JSON + ";q=0.9":    ops.ActuatorV3JSON,
		"application/xml;q=0.9, */*;q=1": ops.ActuatorV3JSON,
	} {
		if ct := actuatorGet(t, n.http.URL, "/actuator/health", "", "Accept", accept).header.Get("Content-Type"); ct != want {
			t.Errorf("Accept %q: content type %q, want %q", accept, ct, want)
		}
	}
	// Components are hidden, so their paths are not found (as Spring's).
	if r := actuatorGet(t, n.http.URL, "/actuator/health/ping", ""); r.code != 404 {
		t.Errorf("/health/ping without details: %d %s", r.code, r.body)
	}
}

func TestActuatorHealth_groupsFollowReadyz(t *testing.T) {
	n := newActuatorNode(t)
	check := func(path string, code int, body string) {
		t.Helper()
		r := actuatorGet(t, n.http.URL, path, "")
		if r.code != code || r.body != body {
			t.Errorf("%s: %d %s, want %d %s", path, r.code, r.body, code, body)
		}
	}
	check("/actuator/health/liveness", 200, `{"status":"UP"}`)
	check("/actuator/health/readiness", 200, `{"status":"UP"}`)
	for _, notReady := range []func(){func() { n.ready.Store(false) }, func() { n.ready.Store(true); n.reads.Store(false) }} {
		notReady()
		if r := actuatorGet(t, n.http.URL, "/readyz", ""); r.code != 503 {
			t.Fatalf("/readyz %d", r.code)
		}
		check("/actuator/health/readiness", 503, `{"status":"OUT_OF_SERVICE"}`)
		check("/actuator/health/liveness", 200, `{"status":"UP"}`)
		check("/actuator/health", 503, `{"status":"OUT_OF_SERVICE","groups":["liveness","readiness"]}`)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health/nonsense", ""); r.code != 404 || !strings.Contains(r.body, "show-details") {
		t.Errorf("unknown group: %d %s", r.code, r.body)
	}
}

func TestActuatorHealth_showDetailsAlways(t *testing.T) {
	n := newActuatorNode(t, func(_ *registry.Config, h *httpapi.Config) { h.Actuator.ShowDetails = ops.ActuatorShowAlways })
	n.register(t, "billing", "b1")
	n.register(t, "billing", "b2")
	n.register(t, "orders", "o1")
	r := actuatorGet(t, n.http.URL, "/actuator/health", "")
	var h struct {
		Status     string
		Groups     []string
		Components map[string]struct {
			Status     string
			Components map[string]struct {
				Status  string
				Details struct {
					Applications map[string]int
					Instances    int
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(r.body), &h); err != nil || r.code != 200 {
		t.Fatalf("%d %s %v", r.code, r.body, err)
	}
	if h.Status != "UP" || len(h.Groups) != 2 || len(h.Components) != 4 {
		t.Fatalf("health %s", r.body)
	}
	for _, c := range []string{"ping", "livenessState", "readinessState", "discoveryComposite"} {
		if h.Components[c].Status != "UP" {
			t.Errorf("component %s: %q in %s", c, h.Components[c].Status, r.body)
		}
	}
	eureka := h.Components["discoveryComposite"].Components["eureka"]
	if eureka.Details.Instances != 3 || eureka.Details.Applications["BILLING"] != 2 || eureka.Details.Applications["ORDERS"] != 1 {
		t.Errorf("eureka details %+v", eureka.Details)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health/readiness", ""); r.body != `{"status":"UP","components":{"readinessState":{"status":"UP"}}}` {
		t.Errorf("readiness with details %s", r.body)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health/ping", ""); r.code != 200 || r.body != `{"status":"UP"}` {
		t.Errorf("/health/ping %d %s", r.code, r.body)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health/discoveryComposite/eureka", ""); r.code != 200 || !strings.Contains(r.body, `"ORDERS":1`) {
		t.Errorf("/health/discoveryComposite/eureka %d %s", r.code, r.body)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health/discoveryComposite/nope", ""); r.code != 404 {
		t.Errorf("unknown component %d %s", r.code, r.body)
	}
}

func withUsers(t *testing.T, show ops.ActuatorShowDetails) func(*registry.Config, *httpapi.Config) {
	return func(_ *registry.Config, h *httpapi.Config) {
		reader, err := auth.NewUser("reader", "r-secret", auth.RoleRead, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := auth.NewAuthenticator(reader)
		if err != nil {
			t.Fatal(err)
		}
		h.Auth, h.Security.Auth = a, true
		h.Actuator.ShowDetails = show
	}
}

// Health is open like /livez and /readyz; the rest needs the read role.
func TestActuator_authAsProbesAndReadRole(t *testing.T) {
	n := newActuatorNode(t, withUsers(t, ops.ActuatorShowWhenAuthorized))
	for _, p := range []string{"/actuator/health", "/actuator/health/liveness", "/actuator/health/readiness"} {
		if r := actuatorGet(t, n.http.URL, p, ""); r.code != 200 {
			t.Errorf("%s without credentials: %d", p, r.code)
		}
	}
	for _, p := range []string{"/actuator", "/actuator/info", "/actuator/prometheus", "/lastn"} {
		if r := actuatorGet(t, n.http.URL, p, ""); r.code != 401 {
			t.Errorf("%s without credentials: %d, want 401", p, r.code)
		}
		if r := actuatorGet(t, n.http.URL, p, "reader:wrong"); r.code != 401 {
			t.Errorf("%s with a bad password: %d, want 401", p, r.code)
		}
		if r := actuatorGet(t, n.http.URL, p, "reader:r-secret"); r.code != 200 {
			t.Errorf("%s as reader: %d %s", p, r.code, r.body)
		}
	}
	// when-authorized: details for good credentials only; bad ones are no
	// error on an open route, just no details.
	if r := actuatorGet(t, n.http.URL, "/actuator/health", "reader:wrong"); r.code != 200 || strings.Contains(r.body, "components") {
		t.Errorf("bad credentials: %d %s", r.code, r.body)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health", "reader:r-secret"); r.code != 200 || !strings.Contains(r.body, `"components"`) {
		t.Errorf("reader: %d %s", r.code, r.body)
	}
}

// when-authorized with authentication off shows nothing: Spring Boot
// without security has no principal.
func TestActuatorHealth_whenAuthorizedWithoutAuthShowsNoDetails(t *testing.T) {
	n := newActuatorNode(t, func(_ *registry.Config, h *httpapi.Config) { h.Actuator.ShowDetails = ops.ActuatorShowWhenAuthorized })
	if r := actuatorGet(t, n.http.URL, "/actuator/health", "any:thing"); strings.Contains(r.body, "components") {
		t.Errorf("%s", r.body)
	}
}

func TestActuator_infoPrometheusIndex(t *testing.T) {
	n := newActuatorNode(t)
	r := actuatorGet(t, n.http.URL, "/actuator/info", "")
	var info struct {
		Build struct{ Name, Version string }
	}
	if err := json.Unmarshal([]byte(r.body), &info); err != nil || r.code != 200 || info.Build.Version != "1.2.3" || info.Build.Name != "muster" {
		t.Errorf("info %d %s %v", r.code, r.body, err)
	}
	prom := actuatorGet(t, n.http.URL, "/actuator/prometheus", "")
	metrics := actuatorGet(t, n.http.URL, "/metrics", "")
	if prom.code != 200 || !strings.Contains(prom.body, "muster_") || prom.header.Get("Content-Type") != metrics.header.Get("Content-Type") {
		t.Errorf("prometheus %d %q %.200s", prom.code, prom.header.Get("Content-Type"), prom.body)
	}
	idx := actuatorGet(t, n.http.URL, "/actuator/", "")
	var links struct {
		Links map[string]struct {
			Href      string
			Templated bool
		} `json:"_links"`
	}
	if err := json.Unmarshal([]byte(idx.body), &links); err != nil || idx.code != 200 {
		t.Fatalf("index %d %s", idx.code, idx.body)
	}
	for name, want := range map[string]string{"self": "/actuator", "health": "/actuator/health", "health-path": "/actuator/health/{*path}", "info": "/actuator/info", "prometheus": "/actuator/prometheus"} {
		if l := links.Links[name]; l.Href != n.http.URL+want || l.Templated != (name == "health-path") {
			t.Errorf("link %s = %+v, want %s", name, l, n.http.URL+want)
		}
	}
	if r := actuatorGet(t, n.http.URL, links.Links["health"].Href[len(n.http.URL):], ""); r.code != 200 {
		t.Errorf("health link %d", r.code)
	}
}

func TestActuator_basePath(t *testing.T) {
	n := newActuatorNode(t, func(_ *registry.Config, h *httpapi.Config) { h.Actuator.BasePath = "/manage" })
	if r := actuatorGet(t, n.http.URL, "/manage/health", ""); r.code != 200 || !strings.Contains(r.body, `"UP"`) {
		t.Errorf("/manage/health %d %s", r.code, r.body)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health", ""); r.code != 404 {
		t.Errorf("/actuator/health after moving: %d", r.code)
	}
}

// management.server.port: the endpoints move to their own listener, with
// the same access rules; the API's port no longer serves them.
func TestActuator_separatePort(t *testing.T) {
	n := newActuatorNode(t, withUsers(t, ops.ActuatorShowNever), func(_ *registry.Config, h *httpapi.Config) {
		h.Actuator.Port, h.Actuator.BasePath = 26001, "/"
	})
	if n.mgmt == nil {
		t.Fatal("no management handler with Actuator.Port set")
	}
	if r := actuatorGet(t, n.mgmt.URL, "/health", ""); r.code != 200 || r.body != `{"status":"UP","groups":["liveness","readiness"]}` {
		t.Errorf("management /health %d %s", r.code, r.body)
	}
	if r := actuatorGet(t, n.mgmt.URL, "/prometheus", ""); r.code != 401 {
		t.Errorf("management /prometheus without credentials %d", r.code)
	}
	if r := actuatorGet(t, n.mgmt.URL, "/prometheus", "reader:r-secret"); r.code != 200 {
		t.Errorf("management /prometheus as reader %d", r.code)
	}
	if r := actuatorGet(t, n.http.URL, "/health", ""); r.code != 404 {
		t.Errorf("API port /health %d", r.code)
	}
	if r := actuatorGet(t, n.http.URL, "/actuator/health", ""); r.code == 200 {
		t.Errorf("API port still serves /actuator/health")
	}
}

func TestActuatorConfig_validate(t *testing.T) {
	for _, c := range []ops.ActuatorConfig{
		{BasePath: "actuator", ShowDetails: ops.ActuatorShowNever},
		{BasePath: "/", ShowDetails: ops.ActuatorShowNever},
		{BasePath: "/a*b", ShowDetails: ops.ActuatorShowNever},
		{BasePath: "/actuator", Port: 70000, ShowDetails: ops.ActuatorShowNever},
		{BasePath: "/actuator", ShowDetails: "sometimes"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
		h := httpapi.DefaultConfig()
		h.Actuator = c
		if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "Actuator") {
			t.Errorf("httpapi.Config with %+v: %v", c, err)
		}
	}
	if err := ops.DefaultActuatorConfig().Validate(); err != nil {
		t.Error(err)
	}
}

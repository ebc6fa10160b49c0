package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestReads_gatedUntilOpen(t *testing.T) {
	open := false
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.Ready = func() bool { return open } })
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1", registrytest.WithVIP("orders")))); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/eureka/apps", "/eureka/apps/delta", "/eureka/apps/ORDERS", "/eureka/vips/orders", "/eureka/svips/orders"} {
		if r := n.do(t, "GET", path, ""); r.Code != 403 {
			t.Errorf("GET %s while syncing: %d, want 403", path, r.Code)
		}
	}
	if r := n.do(t, "GET", "/eureka/apps/ORDERS/o1", ""); r.Code != 200 {
		t.Errorf("instance GET is not gated in Eureka: %d", r.Code)
	}
	if r := n.do(t, "GET", "/readyz", ""); r.Code != 503 {
		t.Errorf("/readyz while syncing: %d, want 503", r.Code)
	}
	open = true
	if r := n.do(t, "GET", "/eureka/apps", ""); r.Code != 200 {
		t.Errorf("GET /eureka/apps after open: %d", r.Code)
	}
	if r := n.do(t, "GET", "/readyz", ""); r.Code != 200 {
		t.Errorf("/readyz after open: %d", r.Code)
	}
}

func TestAdminStatus(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1"))); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", "/admin/status", "")
	var st map[string]any
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	for _, key := range []string{"node", "zone", "openForTraffic", "selfPreservation", "registry", "peers"} {
		if _, ok := st[key]; !ok {
			t.Errorf("/admin/status lacks %q", key)
		}
	}
	sp := st["selfPreservation"].(map[string]any)
	for _, key := range []string{"enabled", "active", "expectedRenewsPerMin", "renewsThreshold", "renewsLastMin"} {
		if _, ok := sp[key]; !ok {
			t.Errorf("selfPreservation lacks %q", key)
		}
	}
	reg := st["registry"].(map[string]any)
	if reg["apps"].(float64) != 1 || reg["instances"].(float64) != 1 || reg["appsHashcode"] != "UP_1_" {
		t.Errorf("registry = %v", reg)
	}
	if sp["expectedRenewsPerMin"].(float64) != 2 || sp["renewsThreshold"].(float64) != 1 {
		t.Errorf("selfPreservation = %v", sp)
	}
	if r := n.do(t, "GET", "/livez", ""); r.Code != 200 {
		t.Errorf("/livez: %d", r.Code)
	}
}

func TestMetrics(t *testing.T) {
	n := newTestNode(t)
	n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...)
	n.do(t, "PUT", "/eureka/apps/ORDERS/host-a:orders:8080", "")
	n.do(t, "POST", "/eureka/apps/ORDERS", strings.ReplaceAll(springBody, "host-a:orders:8080", "host-b:orders:8080"), jsonHeaders()...)
	n.do(t, "DELETE", "/eureka/apps/ORDERS/host-b:orders:8080", "")
	body := n.do(t, "GET", "/metrics", "").Body
	for _, want := range []string{
		"muster_registrations_total 2", "muster_renewals_total 1", "muster_cancels_total 1", "muster_evictions_total 0",
		"muster_tombstones 1", "muster_tombstones_dropped_total 0",
		"muster_renews_threshold 1", "muster_self_preservation_active 0", "muster_instances 1",
		`muster_http_request_duration_seconds_count{code="204",method="POST",route="/eureka/apps/:app"} 2`,
		`muster_http_request_duration_seconds_count{code="200",method="PUT",route="/eureka/apps/:app/:id"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestReads_peersCopyOnlyFromOpenNodes(t *testing.T) {
	open, readsOK := false, false
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Ready = func() bool { return open }
		h.ReadsAllowed = func() bool { return open && readsOK }
	})
	replication := []string{"x-netflix-discovery-replication", "true", "Accept", "application/json"}
	if r := n.do(t, "GET", "/eureka/apps", "", replication...); r.Code != 503 {
		t.Fatalf("a peer's sync fetch from a node still syncing: %d, want 503", r.Code)
	}
	// Opened without the registry (no peer had it): clients are refused a
	// while, and so are peers, which must not copy an empty registry as if
	// it had data.
	open = true
	if r := n.do(t, "GET", "/eureka/apps", "", replication...); r.Code != 503 {
		t.Fatalf("a peer's sync fetch while reads are refused: %d, want 503", r.Code)
	}
	if r := n.do(t, "GET", "/eureka/apps", ""); r.Code != 403 {
		t.Fatalf("a client's fetch while reads are refused: %d, want 403", r.Code)
	}
	if r := n.do(t, "GET", "/readyz", ""); r.Code != 503 {
		t.Fatalf("/readyz while reads are refused: %d, want 503", r.Code)
	}
	if r := n.do(t, "POST", "/eureka/apps/WEB", `{"instance":{"instanceId":"w1","hostName":"h","app":"WEB","ipAddr":"10.0.0.1","status":"UP","dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}}}`,
		"Content-Type", "application/json"); r.Code != 204 {
		t.Fatalf("a registration while reads are refused: %d %s, want 204", r.Code, r.Body)
	}
	readsOK = true
	if r := n.do(t, "GET", "/readyz", ""); r.Code != 200 {
		t.Fatalf("/readyz: %d", r.Code)
	}
	if r := n.do(t, "GET", "/eureka/apps", "", replication...); r.Code != 200 {
		t.Fatalf("a peer's sync fetch from an open node: %d, want 200", r.Code)
	}
}

package eureka

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

func TestRegister_exactStatusCodes(t *testing.T) {
	n := newTestNode(t)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register: %d %q, want exactly 204", r.code, r.body)
	}
	for _, req := range []struct{ method, path string }{
		{"PUT", "/eureka/apps/ORDERS/host-a:orders:8080?status=UP&lastDirtyTimestamp=1717999999000"},
		{"PUT", "/eureka/apps/ORDERS/host-a:orders:8080/status?value=OUT_OF_SERVICE&lastDirtyTimestamp=1717999999000"},
		{"DELETE", "/eureka/apps/ORDERS/host-a:orders:8080/status?lastDirtyTimestamp=1717999999000"},
		{"PUT", "/eureka/apps/ORDERS/host-a:orders:8080/metadata?version=2"},
		{"DELETE", "/eureka/apps/ORDERS/host-a:orders:8080"},
	} {
		if r := n.do(t, req.method, req.path, ""); r.code != 200 {
			t.Fatalf("%s %s: %d %q, want exactly 200", req.method, req.path, r.code, r.body)
		}
	}
}

func TestRegister_lenientBodies(t *testing.T) {
	minimal := `{"instance":{"hostName":"h1","app":"WEB","ipAddr":"10.1.1.1","dataCenterInfo":{"name":"MyOwn"}}}`
	tests := []struct{ name, path, body, ct string }{
		{"minimal JSON, Eureka's defaults", "/eureka/apps/WEB", minimal, "application/json"},
		{"app name in lower case in the path", "/eureka/apps/web", minimal, "application/json"},
		{"port as string, enabled as boolean", "/eureka/apps/WEB",
			`{"instance":{"hostName":"h1","app":"WEB","ipAddr":"10.1.1.1","port":{"$":"8080","@enabled":true},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}}}`, "application/json"},
		{"port as bare number", "/eureka/apps/WEB",
			`{"instance":{"hostName":"h1","app":"WEB","ipAddr":"10.1.1.1","port":8080,"dataCenterInfo":{"name":"MyOwn"}}}`, "application/json"},
		{"legacy overriddenstatus", "/eureka/apps/WEB",
			`{"instance":{"hostName":"h1","app":"WEB","ipAddr":"10.1.1.1","overriddenstatus":"UNKNOWN","dataCenterInfo":{"name":"MyOwn"}}}`, "application/json"},
		{"XML", "/eureka/v2/apps/WEB",
			`<instance><hostName>h1</hostName><app>WEB</app><ipAddr>10.1.1.1</ipAddr><port enabled="true">8080</port><dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo></instance>`,
			"application/xml"},
		{"no Content-Type, JSON sniffed", "/eureka/apps/WEB", minimal, ""},
		{"trailing slash", "/eureka/apps/WEB/", minimal, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			var headers []string
			if tt.ct != "" {
				headers = []string{"Content-Type", tt.ct}
			}
			if r := n.do(t, "POST", tt.path, tt.body, headers...); r.code != 204 {
				t.Fatalf("register: %d %q", r.code, r.body)
			}
			iv, ok := n.reg.Instance("WEB", "h1")
			if !ok {
				t.Fatal("not registered under WEB/h1")
			}
			if iv.Status != registry.StatusUp || iv.CountryID != 1 || !iv.Port.Enabled {
				t.Errorf("defaults not applied: %+v", iv.Instance)
			}
		})
	}
}

func TestGetApps_formatsAndPaths(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1"))); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/eureka/apps", "/eureka/apps/", "/eureka/v2/apps", "/v2/apps/"} {
		xmlResp := n.do(t, "GET", path, "")
		if xmlResp.code != 200 || !strings.HasPrefix(xmlResp.body, "<applications>") ||
			!strings.HasPrefix(xmlResp.header.Get("Content-Type"), "application/xml") {
			t.Errorf("GET %s without Accept: %d %s %.60q, want XML", path, xmlResp.code, xmlResp.header.Get("Content-Type"), xmlResp.body)
		}
		jsonResp := n.do(t, "GET", path, "", "Accept", "application/json")
		if jsonResp.code != 200 || !strings.HasPrefix(jsonResp.body, `{"applications":{`) {
			t.Errorf("GET %s with Accept json: %d %.60q", path, jsonResp.code, jsonResp.body)
		}
	}
	plain := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	zipped := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json", "Accept-Encoding", "gzip, deflate")
	if zipped.header.Get("Content-Encoding") != "gzip" || zipped.body != plain.body {
		t.Errorf("gzip: encoding %q, same body after gunzip: %v", zipped.header.Get("Content-Encoding"), zipped.body == plain.body)
	}
	apps, err := wire.DecodeApplicationsJSON([]byte(plain.body))
	if err != nil || apps.Hashcode != "UP_1_" || len(apps.Apps) != 1 {
		t.Fatalf("decoded %+v, %v", apps, err)
	}
}

func TestGetApps_encodedOncePerVersion(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1"))); err != nil {
		t.Fatal(err)
	}
	encodings := func() string {
		for _, line := range strings.Split(n.do(t, "GET", "/metrics", "").body, "\n") {
			if strings.HasPrefix(line, "muster_payload_encodings_total ") {
				return strings.TrimPrefix(line, "muster_payload_encodings_total ")
			}
		}
		t.Fatal("muster_payload_encodings_total missing from /metrics")
		return ""
	}
	first := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	base := encodings()
	for range 5 {
		n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	}
	n.clock.Advance(30 * time.Second)
	if _, err := n.reg.Apply(registry.RenewOp("ORDERS", "o1")); err != nil {
		t.Fatal(err)
	}
	again := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	if got := encodings(); got != base || again.body != first.body {
		t.Fatalf("unchanged registry re-encoded: encodings %s → %s", base, got)
	}
	// A write is visible to the very next read.
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatal(r.body)
	}
	after := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	if !strings.Contains(after.body, "host-a:orders:8080") || !strings.Contains(after.body, `"apps__hashcode":"UP_2_"`) {
		t.Fatalf("read after write does not show it: %.200s", after.body)
	}
	if encodings() == base {
		t.Fatal("changed registry not re-encoded")
	}
}

// A client applying the delta to its earlier full fetch reaches the full
// fetch's hashcode (DiscoveryClient#updateDelta + reconcile).
func TestGetDelta_reconcilesWithFullFetch(t *testing.T) {
	n := newTestNode(t)
	for _, id := range []string{"o1", "o2", "o3"} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", id))); err != nil {
			t.Fatal(err)
		}
	}
	full := n.do(t, "GET", "/eureka/apps/", "", "Accept", "application/json")
	client, err := wire.DecodeApplicationsJSON([]byte(full.body))
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]registry.Status{}
	for _, app := range client.Apps {
		for _, iv := range app.Instances {
			state[app.Name+"/"+iv.ID()] = iv.Status
		}
	}

	n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...)
	n.do(t, "PUT", "/eureka/apps/ORDERS/o1/status?value=OUT_OF_SERVICE", "")
	n.do(t, "DELETE", "/eureka/apps/ORDERS/o2", "")

	for _, format := range []string{"json", "xml"} {
		var delta *wire.Applications
		if format == "json" {
			r := n.do(t, "GET", "/eureka/apps/delta", "", "Accept", "application/json", "Accept-Encoding", "gzip")
			delta, err = wire.DecodeApplicationsJSON([]byte(r.body))
		} else {
			r := n.do(t, "GET", "/eureka/apps/delta", "")
			delta, err = wire.DecodeApplicationsXML([]byte(r.body))
		}
		if err != nil {
			t.Fatal(err)
		}
		actions := map[string]registry.ActionType{}
		local := map[string]registry.Status{}
		for k, v := range state {
			local[k] = v
		}
		for _, app := range delta.Apps {
			for _, iv := range app.Instances {
				key := app.Name + "/" + iv.ID()
				actions[key] = iv.ActionType
				switch iv.ActionType {
				case registry.ActionAdded, registry.ActionModified:
					local[key] = iv.Status
				case registry.ActionDeleted:
					delete(local, key)
				}
			}
		}
		want := map[string]registry.ActionType{
			"ORDERS/o1": "MODIFIED", "ORDERS/o2": "DELETED", "ORDERS/o3": "ADDED", "ORDERS/host-a:orders:8080": "ADDED",
		}
		for k, v := range want {
			if actions[k] != v {
				t.Errorf("%s: delta action of %s = %q, want %q", format, k, actions[k], v)
			}
		}
		var counts registry.StatusCounts
		for _, st := range local {
			counts.Add(st)
		}
		if got := counts.Hashcode(); got != delta.Hashcode || got != "OUT_OF_SERVICE_1_UP_2_" {
			t.Errorf("%s: client hash after delta %q, delta apps__hashcode %q", format, got, delta.Hashcode)
		}
	}
}

func TestGetDelta_disabled(t *testing.T) {
	n := newTestNode(t, func(_ *registry.Config, h *Config) { h.DisableDelta = true })
	if r := n.do(t, "GET", "/eureka/apps/delta", ""); r.code != 403 {
		t.Fatalf("delta with disable-delta: %d", r.code)
	}
}

func TestGetApp_instanceAndVIP(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1", registrytest.WithVIP("orders,shop")))); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		path, prefix string
		code         int
	}{
		{"/eureka/apps/orders", `{"application":{"name":"ORDERS","instance":[`, 200},
		{"/eureka/apps/NOPE", ``, 404},
		{"/eureka/apps/ORDERS/o1", `{"instance":{"instanceId":"o1"`, 200},
		{"/eureka/apps/ORDERS/zz", ``, 404},
		{"/eureka/instances/o1", `{"instance":{"instanceId":"o1"`, 200},
		{"/eureka/instances/zz", ``, 404},
		{"/eureka/vips/shop", `{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[{"name":"ORDERS"`, 200},
		{"/eureka/vips/nothing", `{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`, 200},
		{"/eureka/status", `{"generalStats":{`, 200},
	}
	for _, c := range checks {
		r := n.do(t, "GET", c.path, "", "Accept", "application/json")
		if r.code != c.code || !strings.HasPrefix(r.body, c.prefix) {
			t.Errorf("GET %s: %d %.120q, want %d %q…", c.path, r.code, r.body, c.code, c.prefix)
		}
	}
}

func TestHeartbeat_conflictReturnsOurCopyToPeers(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1", registrytest.WithDirty(2000)))); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "PUT", "/eureka/apps/ORDERS/o1?status=UP&lastDirtyTimestamp=1000", "",
		"x-netflix-discovery-replication", "true", "Accept", "application/json")
	if r.code != 409 || !strings.Contains(r.body, `"lastDirtyTimestamp":"2000"`) {
		t.Fatalf("stale replicated heartbeat: %d %q, want 409 with our instance", r.code, r.body)
	}
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/o1?status=UP&lastDirtyTimestamp=1000", ""); r.code != 200 {
		t.Fatalf("stale client heartbeat: %d, want 200", r.code)
	}
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/o1?status=UP&lastDirtyTimestamp=3000", ""); r.code != 404 {
		t.Fatalf("newer client heartbeat: %d, want 404 (register again)", r.code)
	}
}

// Instance ids may hold '%' or '/': the path is unescaped exactly once.
func TestPathParams_escapedIDs(t *testing.T) {
	n := newTestNode(t)
	for _, id := range []string{"host:app:50%", "host:%41", "a/b"} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", id))); err != nil {
			t.Fatal(err)
		}
		path := "/eureka/apps/APP/" + url.PathEscape(id)
		if id == "a/b" {
			path = "/eureka/apps/APP/a%2Fb"
		}
		if r := n.do(t, "PUT", path, ""); r.code != 200 {
			t.Errorf("heartbeat of %q via %s: %d %s", id, path, r.code, r.body)
		}
	}
}

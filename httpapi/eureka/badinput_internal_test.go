package eureka

import (
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// Every bad input gets its 4xx and a plain reason, and leaves the registry
// as it was (ARCHITECTURE.md decision 5). On the Eureka client routes the
// reason is in the X-Muster-Error header and the body is empty, as the Java
// server's error answers are: the Java client reads any non-HTML body as an
// InstanceInfo, and a heartbeat 404 it cannot read stops it registering
// again (issue 22). Peer replication keeps a plain-text body.
func TestBadInput(t *testing.T) {
	ct := func(v string) []string { return []string{"Content-Type", v} }
	jsonCT := ct("application/json")
	tests := []struct {
		name, method, path, body string
		headers                  []string
		want                     int
	}{
		{"malformed JSON", "POST", "/eureka/apps/ORDERS", `{"instance":{"hostName":`, jsonCT, 400},
		{"JSON without instance wrapper", "POST", "/eureka/apps/ORDERS", `{"hostName":"h","app":"ORDERS","ipAddr":"1.2.3.4"}`, jsonCT, 400},
		{"JSON array", "POST", "/eureka/apps/ORDERS", `[1,2,3]`, jsonCT, 400},
		{"port not a number", "POST", "/eureka/apps/ORDERS", strings.Replace(springBody, `"$":8080`, `"$":"eighty"`, 1), jsonCT, 400},
		{"malformed XML", "POST", "/eureka/apps/ORDERS", `<instance><hostName>h</hostName>`, ct("application/xml"), 400},
		{"XML unknown dataCenterInfo name", "POST", "/eureka/apps/ORDERS",
			`<instance><hostName>h</hostName><app>ORDERS</app><ipAddr>1.2.3.4</ipAddr><dataCenterInfo class="x"><name>Mars</name></dataCenterInfo></instance>`,
			ct("application/xml"), 400},
		{"empty body", "POST", "/eureka/apps/ORDERS", ``, jsonCT, 400},
		{"missing hostName", "POST", "/eureka/apps/ORDERS", strings.Replace(springBody, `"hostName":"host-a",`, ``, 1), jsonCT, 400},
		{"missing ipAddr", "POST", "/eureka/apps/ORDERS", strings.Replace(springBody, `"ipAddr":"10.0.0.12",`, ``, 1), jsonCT, 400},
		{"missing app", "POST", "/eureka/apps/ORDERS", strings.Replace(springBody, `"app":"ORDERS",`, ``, 1), jsonCT, 400},
		{"missing dataCenterInfo", "POST", "/eureka/apps/ORDERS",
			strings.Replace(springBody, `"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`, ``, 1), jsonCT, 400},
		{"app differs from path", "POST", "/eureka/apps/PAYMENTS", springBody, jsonCT, 400},
		{"unsupported media type", "POST", "/eureka/apps/ORDERS", springBody, ct("text/csv"), 415},
		{"oversized body", "POST", "/eureka/apps/ORDERS", `{"instance":{"hostName":"` + strings.Repeat("x", 2<<20) + `"}}`, jsonCT, 413},
		{"unknown status value", "PUT", "/eureka/apps/APP/a/status?value=SLEEPY", ``, nil, 400},
		{"missing status value", "PUT", "/eureka/apps/APP/a/status", ``, nil, 400},
		{"unknown status on delete", "DELETE", "/eureka/apps/APP/a/status?value=NOPE", ``, nil, 400},
		{"non-numeric lastDirtyTimestamp on heartbeat", "PUT", "/eureka/apps/APP/a?status=UP&lastDirtyTimestamp=yesterday", ``, nil, 404}, // heartbeat refusals are 404s: TestRule_heartbeatRefusalIs404
		{"non-numeric lastDirtyTimestamp on status", "PUT", "/eureka/apps/APP/a/status?value=DOWN&lastDirtyTimestamp=1e9", ``, nil, 400},
		{"bad overriddenstatus on heartbeat", "PUT", "/eureka/apps/APP/a?overriddenstatus=MAYBE", ``, nil, 404},
		{"metadata without entries", "PUT", "/eureka/apps/APP/a/metadata", ``, nil, 400},
		{"heartbeat of unknown instance", "PUT", "/eureka/apps/APP/nobody", ``, nil, 404},
		{"cancel of unknown instance", "DELETE", "/eureka/apps/APP/nobody", ``, nil, 404},
		{"status of unknown instance", "PUT", "/eureka/apps/APP/nobody/status?value=UP", ``, nil, 404},
		{"peer batch not JSON", "POST", "/eureka/peerreplication/batch", `nope`, jsonCT, 400},
		{"peer batch without replicationList", "POST", "/eureka/peerreplication/batch", `{"x":1}`, jsonCT, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "a"))); err != nil {
				t.Fatal(err)
			}
			before := n.reg.Snapshot()
			renewals := n.reg.Stats().Renewals
			resp := n.do(t, tt.method, tt.path, tt.body, tt.headers...)
			if resp.code != tt.want {
				t.Fatalf("%s %s: status %d, want %d (body %q)", tt.method, tt.path, resp.code, tt.want, resp.body)
			}
			reason := resp.body
			if !strings.Contains(tt.path, "/peerreplication/") {
				if resp.body != "" {
					t.Errorf("Eureka client route answered %d with a body %q, want none", resp.code, resp.body)
				}
				if ct := resp.header.Get("Content-Type"); ct != "application/xml" {
					t.Errorf("Content-Type %q, want application/xml (no Accept json) as the Java server sends", ct)
				}
				reason = resp.header.Get("X-Muster-Error")
			}
			if strings.TrimSpace(reason) == "" {
				t.Errorf("no reason given")
			}
			if len(reason) > 300 {
				t.Errorf("reason is not short: %d bytes", len(reason))
			}
			after := n.reg.Snapshot()
			if after.Version != before.Version || after.Hashcode != before.Hashcode || n.reg.Len() != 1 {
				t.Errorf("registry changed: version %d→%d, %d instances", before.Version, after.Version, n.reg.Len())
			}
			if tt.want != 404 && n.reg.Stats().Renewals != renewals {
				t.Errorf("a refused request renewed a lease")
			}
		})
	}
}

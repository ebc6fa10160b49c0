package eureka

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Why: lastDirtyTimestamp=9223372036854775807 on a status call was accepted;
// afterwards the owner's re-registration with a new IP answered 204 but was
// ignored and its heartbeats still got 200, so clients were served the
// stale address until a cancel. Now the future timestamp is refused.
func TestHostile_futureDirtyTimestampCannotPinRecord(t *testing.T) {
	n := newTestNode(t)
	mustRegisterInstance(t, n, "ORDERS", "o-1")
	far := n.clock.Now().Add(time.Hour).UnixMilli()
	for _, ts := range []string{strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(far, 10)} {
		r := n.do(t, "PUT", "/eureka/apps/ORDERS/o-1/status?value=UP&lastDirtyTimestamp="+ts, "")
		if r.code != 400 || !strings.Contains(r.reason(), "muster.max-clock-skew-ms") {
			t.Fatalf("status with lastDirtyTimestamp %s: %d %q, want 400 naming muster.max-clock-skew-ms", ts, r.code, r.reason())
		}
	}
	n.clock.Advance(time.Second)
	moved := strings.NewReplacer("host-a:orders:8080", "o-1", "10.0.0.12", "10.0.0.99", `"lastDirtyTimestamp":1717999999000`,
		`"lastDirtyTimestamp":`+strconv.FormatInt(n.clock.Now().UnixMilli(), 10)).Replace(springBody)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", moved, jsonHeaders()...); r.code != 204 {
		t.Fatalf("re-register: %d", r.code)
	}
	if r := n.do(t, "GET", "/eureka/apps/ORDERS/o-1", "", "Accept", "application/json"); !strings.Contains(r.body, "10.0.0.99") {
		t.Fatalf("clients are served %.300s, want the new address 10.0.0.99", r.body)
	}
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/o-1?lastDirtyTimestamp="+strconv.FormatInt(n.clock.Now().UnixMilli(), 10), ""); r.code != 200 {
		t.Fatalf("the owner's heartbeat: %d", r.code)
	}
	// A registration carrying a far-future timestamp is refused the same way.
	future := strings.Replace(springBody, `"lastDirtyTimestamp":1717999999000`, `"lastDirtyTimestamp":9223372036854775807`, 1)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", future, jsonHeaders()...); r.code != 400 {
		t.Fatalf("register with a far-future lastDirtyTimestamp: %d", r.code)
	}
}

// Why: the mismatched-appName 400 echoed the whole name (a 1 MB name made
// a 1 MB error body). Error bodies now quote a short prefix.
func TestHostile_errorBodiesQuoteShortPrefix(t *testing.T) {
	n := newTestNode(t)
	name := strings.Repeat("N", 900_000)
	body := strings.Replace(springBody, `"app":"ORDERS"`, `"app":"`+name+`"`, 1)
	r := n.do(t, "POST", "/eureka/apps/ORDERS", body, jsonHeaders()...)
	if r.code != 400 || len(r.body)+len(r.reason()) > 300 || !strings.Contains(r.reason(), "mismatched appName") {
		t.Fatalf("mismatched 900 KB appName: %d, %d-byte reason %.200q", r.code, len(r.reason()), r.reason())
	}
	long := strings.Repeat("i", 30_000)
	for _, path := range []string{"/eureka/apps/ORDERS/" + long, "/eureka/apps/" + long, "/eureka/instances/" + long} {
		r := n.do(t, "GET", path, "")
		if r.code != 404 || len(r.body)+len(r.reason()) > 300 {
			t.Fatalf("GET %.40s…: %d, %d-byte reason", path, r.code, len(r.reason()))
		}
	}
	r = n.do(t, "PUT", "/eureka/apps/ORDERS/o/status?value="+strings.Repeat("U", 30_000), "")
	if r.code != 400 || len(r.body) > 300 {
		t.Fatalf("bad status value: %d, %d-byte body", r.code, len(r.body))
	}
}

func mustRegisterInstance(t *testing.T, n *testNode, app, id string) {
	t.Helper()
	body := strings.NewReplacer("host-a:orders:8080", id, `"app":"ORDERS"`, `"app":"`+app+`"`).Replace(springBody)
	if r := n.do(t, "POST", "/eureka/apps/"+app, body, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register %s/%s: %d %s", app, id, r.code, r.body)
	}
}

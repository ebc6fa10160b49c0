package httpapi_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// TestColdStart_readsRefusedUntilClientsReRegister walks the start-up of a
// node of a fully restarted cluster without a data dir, on the registry's
// clock: reads (clients 403, peers' syncUp 503) and /readyz (503) are
// refused for the cold-start wait; heartbeats get 404 and the clients
// register again meanwhile; then the registry opens with them.
func TestColdStart_readsRefusedUntilClientsReRegister(t *testing.T) {
	var reg *registry.Registry
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Ready = func() bool { return reg.Opened() }
		h.ReadsAllowed = func() bool { return reg.ReadsAllowed() }
	})
	reg = n.reg
	const wait = 35 * time.Second
	reg.RefuseReadsFor(wait)

	replication := []string{"x-netflix-discovery-replication", "true", "Accept", "application/json"}
	refused := func(when string) {
		t.Helper()
		if r := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json"); r.Code != 403 {
			t.Fatalf("%s: a client's fetch answered %d %s, want 403", when, r.Code, r.Body)
		}
		if r := n.do(t, "GET", "/eureka/apps/delta", "", "Accept", "application/json"); r.Code != 403 {
			t.Fatalf("%s: a client's delta answered %d, want 403", when, r.Code)
		}
		if r := n.do(t, "GET", "/eureka/apps", "", replication...); r.Code != 503 {
			t.Fatalf("%s: a peer's syncUp fetch answered %d, want 503 (this node has no registry to give)", when, r.Code)
		}
		if r := n.do(t, "GET", "/readyz", ""); r.Code != 503 {
			t.Fatalf("%s: /readyz %d, want 503", when, r.Code)
		}
	}
	refused("at open")

	// A live client's heartbeat finds nothing, so it registers again.
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/host-a:orders:8080", ""); r.Code != 404 {
		t.Fatalf("heartbeat of an instance the cold node does not know: %d, want 404", r.Code)
	}
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, "Content-Type", "application/json"); r.Code != 204 {
		t.Fatalf("re-registration during the cold start: %d %s", r.Code, r.Body)
	}
	n.clock.Advance(wait - time.Millisecond)
	refused("just before the wait is over")

	n.clock.Advance(time.Millisecond)
	r := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json")
	if r.Code != 200 || !strings.Contains(r.Body, "host-a:orders:8080") {
		t.Fatalf("after the wait: %d %s, want 200 with the re-registered instance", r.Code, r.Body)
	}
	if r := n.do(t, "GET", "/readyz", ""); r.Code != 200 {
		t.Fatalf("/readyz after the wait: %d", r.Code)
	}
	if r := n.do(t, "GET", "/eureka/apps", "", replication...); r.Code != 200 {
		t.Fatalf("a peer's syncUp fetch after the wait: %d", r.Code)
	}
}

// TestColdStart_peerSyncUp503IsNotAnError: nodes started together answer
// each other's syncUp with 503 for a few seconds; an operator reading an
// error per answer would think of an outage. The answer is logged below
// error level, as a peer not ready yet; a real 5xx still is an error.
func TestColdStart_peerSyncUp503IsNotAnError(t *testing.T) {
	var buf bytes.Buffer
	var reg *registry.Registry
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Logger = zerolog.New(&buf).Level(zerolog.DebugLevel)
		h.Ready = func() bool { return reg.Opened() }
		h.ReadsAllowed = func() bool { return reg.ReadsAllowed() }
	})
	reg = n.reg
	reg.RefuseReadsFor(time.Minute)
	for range 3 {
		if r := n.do(t, "GET", "/eureka/apps", "", "x-netflix-discovery-replication", "true", "Accept", "application/json"); r.Code != 503 {
			t.Fatalf("a peer's syncUp fetch answered %d, want 503", r.Code)
		}
	}
	lines := 0
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var line struct{ Level, Message, Path string }
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		if line.Path != "/eureka/apps" {
			continue
		}
		if line.Level == "error" || line.Level == "warn" {
			t.Errorf("a peer's syncUp answered 503 logged at %s: %q; want below warn", line.Level, line.Message)
		}
		if strings.Contains(line.Message, "not ready yet") {
			lines++
		}
	}
	if lines != 3 {
		t.Fatalf("%d log lines for the three 503s say the node is not ready yet, want 3", lines)
	}
}

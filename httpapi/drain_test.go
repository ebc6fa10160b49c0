package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
)

func receiptOf(t *testing.T, r response) drain.Receipt {
	t.Helper()
	var rc drain.Receipt
	if err := json.Unmarshal([]byte(r.Body), &rc); err != nil {
		t.Fatalf("not a receipt (%d): %v: %s", r.Code, err, r.Body)
	}
	return rc
}

// identity is the Eureka identity headers of a Java client.
func identity(id string) []string {
	return []string{"DiscoveryIdentity-Name", "DefaultClient", "DiscoveryIdentity-Version", "1.4", "DiscoveryIdentity-Id", id}
}

func TestDrain_endpointsOnOneNode(t *testing.T) {
	n := newTestNode(t)
	if r := n.do(t, http.MethodPost, "/eureka/apps/ORDERS", registerBody("ORDERS", "o-1"), jsonHeaders()...); r.Code != http.StatusNoContent {
		t.Fatalf("register: %d %s", r.Code, r.Body)
	}
	// Two readers: a full fetch and an app read; a peer's read is none.
	n.do(t, http.MethodGet, "/eureka/apps", "", with(jsonHeaders(), identity("10.1.0.1"))...)
	n.do(t, http.MethodGet, "/eureka/apps/ORDERS", "", "Accept", "application/json", "User-Agent", "fargo")
	n.do(t, http.MethodGet, "/eureka/apps", "", with(jsonHeaders(), []string{"x-netflix-discovery-replication", "true"})...)

	r := n.do(t, http.MethodPost, "/admin/drain/orders/o-1", "")
	if r.Code != http.StatusAccepted {
		t.Fatalf("drain: %d %s, want 202 (readers pending)", r.Code, r.Body)
	}
	rc := receiptOf(t, r)
	if rc.App != "ORDERS" || rc.InstanceID != "o-1" || rc.DrainedAt == 0 || rc.Complete || rc.Readers != 2 || rc.Confirmed != 0 || len(rc.Pending) != 2 {
		t.Fatalf("receipt %+v, want 2 readers pending", rc)
	}
	clients := rc.Pending[0].Client + "|" + rc.Pending[1].Client
	if !strings.Contains(clients, "DefaultClient/1.4 (10.1.0.1)") || !strings.Contains(clients, "fargo") || rc.Pending[0].Address != "127.0.0.1" || rc.Pending[0].Node != "node-a" {
		t.Fatalf("pending %+v", rc.Pending)
	}
	// Clients see OUT_OF_SERVICE.
	if r := n.do(t, http.MethodGet, "/eureka/apps/ORDERS/o-1", "", jsonHeaders()...); !strings.Contains(r.Body, `"status":"OUT_OF_SERVICE"`) {
		t.Fatalf("drained instance as a client reads it: %s", r.Body)
	}

	// The full-fetch reader reads again (a delta): it confirms.
	n.do(t, http.MethodGet, "/eureka/apps/delta", "", with(jsonHeaders(), identity("10.1.0.1"))...)
	r = n.do(t, http.MethodGet, "/admin/drain/ORDERS/o-1", "")
	if rc2 := receiptOf(t, r); r.Code != http.StatusAccepted || rc2.Confirmed != 1 || len(rc2.Pending) != 1 || rc2.Pending[0].Client != "fargo" || rc2.DrainedAt != rc.DrainedAt {
		t.Fatalf("after a delta: %d %+v", r.Code, rc2)
	}
	// A waiting drain names the reader that did not read again, and
	// re-draining keeps drainedAt.
	r = n.do(t, http.MethodPost, "/admin/drain/ORDERS/o-1?wait=50ms", "")
	if rc2 := receiptOf(t, r); r.Code != http.StatusAccepted || rc2.DrainedAt != rc.DrainedAt || len(rc2.Pending) != 1 || rc2.Pending[0].Client != "fargo" {
		t.Fatalf("waiting re-drain: %d %+v", r.Code, rc2)
	}
	n.do(t, http.MethodGet, "/eureka/apps/ORDERS", "", "Accept", "application/json", "User-Agent", "fargo")
	r = n.do(t, http.MethodPost, "/admin/drain/ORDERS/o-1?wait=30", "")
	if rc2 := receiptOf(t, r); r.Code != http.StatusOK || !rc2.Complete || rc2.Confirmed != 2 || len(rc2.Pending) != 0 {
		t.Fatalf("all confirmed: %d %+v", r.Code, rc2)
	}

	// Listed while drained; DELETE undrains and leaves nothing behind.
	r = n.do(t, http.MethodGet, "/admin/drain", "")
	var list struct{ Drains []drain.Receipt }
	if err := json.Unmarshal([]byte(r.Body), &list); err != nil || len(list.Drains) != 1 || list.Drains[0].InstanceID != "o-1" {
		t.Fatalf("list: %d %s", r.Code, r.Body)
	}
	if r := n.do(t, http.MethodGet, "/metrics", ""); !strings.Contains(r.Body, "muster_drain_readers 2") || !strings.Contains(r.Body, "muster_drained_instances 1") {
		t.Errorf("metrics while drained lack the drain's figures")
	}
	if r := n.do(t, http.MethodDelete, "/admin/drain/ORDERS/o-1", ""); r.Code != http.StatusOK || receiptOf(t, r).InstanceID != "o-1" {
		t.Fatalf("undrain: %d %s", r.Code, r.Body)
	}
	if iv, _ := n.reg.Instance("ORDERS", "o-1"); iv.Status != registry.StatusUp || (iv.Pieces != nil && iv.Pieces.DrainedAt != 0) {
		t.Fatalf("undrained: %s %+v", iv.Status, iv.Pieces)
	}
	if r := n.do(t, http.MethodGet, "/admin/drain", ""); r.Body != `{"drains":[]}`+"\n" {
		t.Fatalf("list after undrain: %q", r.Body)
	}
	for _, req := range [][2]string{{http.MethodDelete, "/admin/drain/ORDERS/o-1"}, {http.MethodGet, "/admin/drain/ORDERS/o-1"}} {
		if r := n.do(t, req[0], req[1], ""); r.Code != http.StatusNotFound {
			t.Fatalf("%s of an undrained instance: %d %s", req[0], r.Code, r.Body)
		}
	}
}

func TestDrain_badInputChangesNothing(t *testing.T) {
	n := newTestNode(t)
	n.do(t, http.MethodPost, "/eureka/apps/ORDERS", registerBody("ORDERS", "o-1"), jsonHeaders()...)
	v := n.reg.Version()
	for _, path := range []string{"?wait=-1s", "?wait=6m", "?wait=301", "?wait=soon", "?wait=-5"} {
		if r := n.do(t, http.MethodPost, "/admin/drain/ORDERS/o-1"+path, ""); r.Code != http.StatusBadRequest {
			t.Errorf("wait %s: %d %s, want 400", path, r.Code, r.Body)
		}
	}
	if r := n.do(t, http.MethodPost, "/admin/drain/ORDERS/nope", ""); r.Code != http.StatusNotFound {
		t.Errorf("unknown instance: %d %s", r.Code, r.Body)
	}
	if r := n.do(t, http.MethodPost, "/admin/drain/NOAPP/o-1", ""); r.Code != http.StatusNotFound {
		t.Errorf("unknown app: %d %s", r.Code, r.Body)
	}
	if n.reg.Version() != v || len(n.reg.Drained()) != 0 {
		t.Fatal("bad input changed the registry")
	}
}

// A drain is the app's write: the admin, or a write user of the app (the
// app's own credentials in a preStop hook); the list of every drain is the
// admin's alone.
func TestDrain_needsTheAppsWriteRole(t *testing.T) {
	n := newSecuredNode(t, peerSecret, true)
	for _, app := range []string{"ORDERS", "BILLING"} {
		n.do(t, http.MethodPost, "/eureka/apps/"+app, registerBody(app, "x-1"), with(jsonHeaders(), basic("admin", adminPW))...)
	}
	for _, tc := range []struct {
		who                   []string
		orders, billing, list int
	}{
		{nil, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized},
		{basic("reader", readerPW), http.StatusForbidden, http.StatusForbidden, http.StatusForbidden},
		{basic("team", teamPW), http.StatusOK, http.StatusForbidden, http.StatusForbidden}, // write, orders only
		{basic("admin", adminPW), http.StatusOK, http.StatusOK, http.StatusOK},
	} {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			for app, want := range map[string]int{"ORDERS": tc.orders, "BILLING": tc.billing} {
				r := n.do(t, m, "/admin/drain/"+app+"/x-1", "", tc.who...)
				if want == http.StatusOK && (r.Code == http.StatusNotFound || r.Code == http.StatusAccepted) {
					r.Code = http.StatusOK // allowed: 202 pending, 404 once undrained
				}
				if r.Code != want {
					t.Errorf("%s %s as %v: %d, want %d", m, app, tc.who, r.Code, want)
				}
			}
		}
		if r := n.do(t, http.MethodGet, "/admin/drain", "", tc.who...); r.Code != tc.list {
			t.Errorf("GET /admin/drain as %v: %d, want %d", tc.who, r.Code, tc.list)
		}
	}
	// The peer endpoint wants a peer signature, whoever asks.
	if r := n.do(t, http.MethodPost, "/eureka/peerreplication/drain-readers", `{"app":"ORDERS","instanceId":"o-1"}`, with(jsonHeaders(), basic("admin", adminPW))...); r.Code != http.StatusForbidden {
		t.Errorf("drain-readers with user credentials: %d %s", r.Code, r.Body)
	}
}

// A watch stream is a reader: it confirms once the drain's change was
// delivered to it.
func TestDrain_watchStreamConfirms(t *testing.T) {
	n := newTestNode(t)
	t.Cleanup(n.srv.StopWatches)
	n.do(t, http.MethodPost, "/eureka/apps/ORDERS", registerBody("ORDERS", "o-1"), jsonHeaders()...)
	events := openStream(t, n.http.URL+"/eureka/watch?app=ORDERS", identity("watcher")...)
	if ev := nextEvent(t, events); ev != "open" {
		t.Fatalf("first event %q", ev)
	}
	var rc drain.Receipt
	testwait.True(t, 10*time.Second, "the stream noted as a reader", func() bool {
		return len(n.srv.Drainer().Readers().Of("ORDERS", 0, 0)) == 1
	})
	// 202, or 200 when the stream confirmed before the POST was answered
	// (the push and its delivery can beat the answer, under -race too).
	if r := n.do(t, http.MethodPost, "/admin/drain/ORDERS/o-1", ""); r.Code != http.StatusAccepted && r.Code != http.StatusOK {
		t.Fatalf("drain: %d %s", r.Code, r.Body)
	}
	if ev := nextEvent(t, events); ev != "MODIFIED" {
		t.Fatalf("the drain's event: %q", ev)
	}
	testwait.True(t, 10*time.Second, "the stream's reader to confirm", func() bool {
		r := n.do(t, http.MethodGet, "/admin/drain/ORDERS/o-1", "")
		rc = receiptOf(t, r)
		return r.Code == http.StatusOK
	})
	if rc.Readers != 1 || rc.Confirmed != 1 {
		t.Fatalf("receipt %+v", rc)
	}
}

// A client that cancels its own instance is a reader that left: in a
// rolling restart the pod stopped before the one now draining read the app
// too, and will never read again. Its cancel takes it out of the reader
// table, so the next drain does not wait for it; a reader that merely
// stopped reading (no cancel) is still waited for.
func TestDrain_aReaderThatCancelsIsNotWaitedFor(t *testing.T) {
	n := newTestNode(t)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if r := n.do(t, http.MethodPost, "/eureka/apps/ORDERS", registerBody("ORDERS", id), jsonHeaders()...); r.Code != http.StatusNoContent {
			t.Fatalf("register %s: %d %s", id, r.Code, r.Body)
		}
	}
	// o-1's and o-3's clients read the registry, as Spring apps do.
	n.do(t, http.MethodGet, "/eureka/apps", "", with(jsonHeaders(), identity("o-1"))...)
	n.do(t, http.MethodGet, "/eureka/apps", "", with(jsonHeaders(), identity("o-3"))...)
	// o-1 stops: it cancels from the client it read with.
	if r := n.do(t, http.MethodDelete, "/eureka/apps/ORDERS/o-1", "", identity("o-1")...); r.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Code, r.Body)
	}
	r := n.do(t, http.MethodPost, "/admin/drain/ORDERS/o-2?wait=50ms", "")
	rc := receiptOf(t, r)
	if r.Code != http.StatusAccepted || rc.Readers != 1 || len(rc.Pending) != 1 || rc.Pending[0].Client != "DefaultClient/1.4 (o-3)" {
		t.Fatalf("drain after o-1 left: %d %+v, want o-3's reader alone pending", r.Code, rc)
	}
	// A replicated cancel is a peer's, not the reader's: o-3's reader stays.
	n.do(t, http.MethodDelete, "/eureka/apps/ORDERS/o-3", "", with(identity("o-3"), []string{"x-netflix-discovery-replication", "true"})...)
	if rc := receiptOf(t, n.do(t, http.MethodGet, "/admin/drain/ORDERS/o-2", "")); rc.Readers != 1 {
		t.Fatalf("after a replicated cancel: %+v, want o-3's reader still waited for", rc)
	}
}

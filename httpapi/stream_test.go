package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// A client's register goes httpapi → registry → change stream → replicator
// → peer; the same write arriving from a peer (replication header) goes
// into the registry and stops there.
func TestRegister_flowsToReplicationAndNotBack(t *testing.T) {
	n := newTestNode(t)
	tr := replicationtest.NewTransport()
	cfg := replication.DefaultConfig()
	cfg.Now = n.clock.Now
	cfg.Transport = tr
	cfg.Store = n.reg
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t))
	rep, err := replication.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.SetPeers([]replication.Peer{{Name: "b"}})

	if r := n.do(t, "POST", "/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.code != 204 {
		t.Fatalf("register: %d %s", r.code, r.body)
	}
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/host-a:orders:8080", ""); r.code != 200 {
		t.Fatalf("heartbeat: %d %s", r.code, r.body)
	}
	if _, err := rep.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := tr.Batches()
	if len(got) != 1 || ids(got[0].Batch) != "Register:host-a:orders:8080 Heartbeat:host-a:orders:8080" {
		t.Fatalf("sent %d batches %v, want one with the register and the heartbeat", len(got), got)
	}

	// The same writes from a peer: applied, never sent on.
	peer := []string{"Content-Type", "application/json", "x-netflix-discovery-replication", "true"}
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", strings.Replace(springBody, `"instanceId":"host-a:orders:8080"`, `"instanceId":"from-peer"`, 1), peer...); r.code != 204 {
		t.Fatalf("replicated register: %d %s", r.code, r.body)
	}
	if r := n.do(t, "PUT", "/eureka/apps/ORDERS/from-peer", "", peer...); r.code != 200 {
		t.Fatalf("replicated heartbeat: %d %s", r.code, r.body)
	}
	if _, err := rep.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.reg.Instance("ORDERS", "from-peer"); !ok {
		t.Fatal("the peer's register was not applied")
	}
	if got := tr.Batches(); len(got) != 1 {
		t.Fatalf("a peer's writes went back out: %v", got[1:])
	}
}

func ids(b replication.Batch) string {
	var parts []string
	for _, t := range b.Tasks {
		parts = append(parts, string(t.Action)+":"+t.Key.ID)
	}
	return strings.Join(parts, " ")
}

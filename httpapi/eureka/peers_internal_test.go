package eureka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
	"github.com/rs/zerolog"
)

// The real round trip: replication.HTTPTransport against the echo batch
// route and replication.Receiver, over loopback HTTP.
func TestPeerBatch_roundTrip(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "stale", registrytest.WithDirty(5000)))); err != nil {
		t.Fatal(err)
	}
	// What a replicator would read from here on: the stream and the
	// renewal feed.
	cur := n.reg.Subscribe()
	defer cur.Close()
	n.reg.RenewalsReady()

	src := registrytest.NewInstance("APP", "new", registrytest.WithDirty(1000))
	older := registrytest.NewInstance("APP", "stale", registrytest.WithDirty(4000))
	down := src.Clone()
	down.Status = registry.StatusDown
	down.OverriddenStatus = registry.StatusDown
	key := func(in *registry.Instance) registry.InstanceKey {
		return registry.InstanceKey{App: "APP", ID: in.InstanceID}
	}
	batch := replication.Batch{Tasks: []replication.Task{
		{Action: registry.ActionRegister, Key: key(src), Instance: src},
		{Action: registry.ActionHeartbeat, Key: key(src), Instance: src},
		{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "APP", ID: "ghost"}, Instance: src},
		{Action: registry.ActionHeartbeat, Key: key(older), Instance: older},
		{Action: registry.ActionStatusUpdate, Key: key(down), Instance: down},
		{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "APP", ID: "ghost"}},
	}}
	tr := replicationtest.HTTPTransport(t, 5*time.Second)
	res, err := tr.Send(context.Background(), replication.Peer{Name: "b", URL: n.http.URL + "/eureka/"}, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{200, 200, 404, 409, 200, 404}
	if len(res.Items) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Items), len(want))
	}
	for i, w := range want {
		if res.Items[i].StatusCode != w {
			t.Errorf("item %d (%s): status %d, want %d", i, batch.Tasks[i].Action, res.Items[i].StatusCode, w)
		}
	}
	if in := res.Items[3].Instance; in == nil || in.LastDirtyTimestamp != 5000 {
		t.Errorf("409 entity = %+v, want our copy with lastDirtyTimestamp 5000", in)
	}
	iv, ok := n.reg.Instance("APP", "new")
	if !ok || iv.Status != registry.StatusDown {
		t.Fatalf("replicated register + status update not applied: %+v %v", iv.Instance, ok)
	}
	events, _ := cur.Read(nil)
	if len(events) == 0 {
		t.Fatal("the replicated writes left no events in the stream")
	}
	for _, ev := range events {
		if task, ok := replication.TaskFromEvent(ev); ok {
			t.Errorf("replicated write would be forwarded again: %+v", task)
		}
	}
	if rn := n.reg.TakeRenewals(nil); len(rn) != 0 {
		t.Errorf("replicated heartbeats would be forwarded again: %+v", rn)
	}
}

func TestPeerBatch_badItemFailsAlone(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "a"))); err != nil {
		t.Fatal(err)
	}
	body := `{"replicationList":[
	 {"appName":"APP","id":"a","status":"SLEEPING","action":"StatusUpdate"},
	 {"appName":"APP","id":"a","action":"Teleport"},
	 {"appName":"APP","id":"a","lastDirtyTimestamp":"not-a-number","action":"Heartbeat"},
	 {"appName":"APP","id":"a","action":"Register"},
	 {"appName":"APP","id":"a","action":"Register","instanceInfo":{"hostName":"h"}},
	 {"appName":"APP","id":"a","status":"OUT_OF_SERVICE","lastDirtyTimestamp":1,"action":"StatusUpdate"}
	]}`
	r := n.do(t, "POST", "/eureka/peerreplication/batch", body, "Content-Type", "application/json", "x-netflix-discovery-replication", "true")
	if r.code != 200 {
		t.Fatalf("batch: %d %s", r.code, r.body)
	}
	want := `{"responseList":[{"statusCode":400},{"statusCode":400},{"statusCode":400},{"statusCode":400},{"statusCode":400},{"statusCode":200}]}`
	if r.body != want {
		t.Fatalf("responses\n%s\nwant\n%s", r.body, want)
	}
	if iv, _ := n.reg.Instance("APP", "a"); iv.Status != registry.StatusOutOfService {
		t.Fatalf("the good item after bad ones was not applied: %s", iv.Status)
	}
}

func TestHTTPTransport_statusErrors(t *testing.T) {
	n := newTestNode(t)
	tr := replicationtest.HTTPTransport(t, 2*time.Second)
	_, err := tr.Send(context.Background(), replication.Peer{Name: "x", URL: n.http.URL + "/nowhere/"}, replication.Batch{})
	var se *replication.StatusError
	if !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("batch to a wrong path: %v, want StatusError 404", err)
	}
	_, err = tr.Send(context.Background(), replication.Peer{Name: "x", URL: "http://127.0.0.1:1/eureka/"}, replication.Batch{})
	if err == nil || errors.As(err, &se) {
		t.Fatalf("batch to a closed port: %v, want a network error", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("network error does not say where: %v", err)
	}
}

// Anti-entropy over real HTTP: a node that lost changes pulls them from a
// peer's /peerreplication/digest and /copies, and the next round finds
// both in sync in one small request.
func TestAntiEntropy_overHTTP(t *testing.T) {
	peer := newTestNode(t)
	for i := range 5 {
		if _, err := peer.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", fmt.Sprint("i-", i)))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := registry.DefaultConfig()
	cfg.Now = peer.clock.Now
	local, _ := registry.New(cfg)
	// local holds an older copy of i-0 and a cancelled i-1.
	snap := peer.reg.Snapshot()
	app, _ := snap.App("APP")
	for _, iv := range app.Instances[:2] {
		if _, err := local.Apply(registry.RegisterOp(iv.Instance.Clone()).From(registry.OriginPeer)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := peer.reg.Apply(registry.StatusOp("APP", "i-0", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.reg.Apply(registry.CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	tr := replicationtest.HTTPTransport(t, 5*time.Second)
	p := replication.Peer{Name: "peer", URL: peer.http.URL + "/eureka/", Muster: true}
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: local, Transport: tr, Peers: func() []replication.Peer { return []replication.Peer{p} }, Now: peer.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	res := ae.Round(context.Background(), p)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Repaired != (replication.Repairs{Missing: 3, Stale: 1, Cancelled: 1}) {
		t.Fatalf("repairs %+v", res.Repaired)
	}
	if local.RootDigest() != peer.reg.RootDigest() {
		t.Fatal("root digests differ after a round")
	}
	before := tr.AntiEntropyBytes()
	if res := ae.Round(context.Background(), p); !res.InSync || res.Requests != 1 {
		t.Fatalf("second round %+v", res)
	}
	if b := tr.AntiEntropyBytes() - before; b > 100 {
		t.Fatalf("a round in sync exchanged %d bytes", b)
	}
}

// Versions travel in batches to Muster peers: a status change arrives as
// the whole copy its write made, and a stale copy does not overwrite a
// newer one.
func TestPeerBatch_versionsBetweenMusterPeers(t *testing.T) {
	n := newTestNode(t)
	cfg := registry.DefaultConfig()
	cfg.Now = n.clock.Now
	src, _ := registry.New(cfg)
	in, err := src.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "i-1")))
	if err != nil {
		t.Fatal(err)
	}
	out, err := src.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
	if err != nil {
		t.Fatal(err)
	}
	k := registry.InstanceKey{App: "APP", ID: "i-1"}
	tr := replicationtest.HTTPTransport(t, 5*time.Second)
	p := replication.Peer{Name: "b", URL: n.http.URL + "/eureka/", Muster: true}
	// The status change first (its register was lost), then the stale
	// register arriving late.
	batch := replication.Batch{Versioned: true, Tasks: []replication.Task{
		{Action: registry.ActionStatusUpdate, Key: k, Instance: out},
		{Action: registry.ActionRegister, Key: k, Instance: in},
	}}
	res, err := tr.Send(context.Background(), p, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range res.Items {
		if it.StatusCode != 200 {
			t.Fatalf("item %d: %d", i, it.StatusCode)
		}
	}
	iv, ok := n.reg.Instance("APP", "i-1")
	if !ok || iv.Status != registry.StatusOutOfService || iv.WriteVersion != out.WriteVersion {
		t.Fatalf("stored %+v", iv.Instance)
	}
	// A heartbeat with an older version gets 409 and our copy, version
	// included.
	res, err = tr.Send(context.Background(), p, replication.Batch{Versioned: true, Tasks: []replication.Task{
		{Action: registry.ActionHeartbeat, Key: k, Instance: in},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if it := res.Items[0]; it.StatusCode != 409 || it.Instance == nil || it.Instance.WriteVersion != out.WriteVersion {
		t.Fatalf("stale heartbeat answer %+v", it)
	}
}

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

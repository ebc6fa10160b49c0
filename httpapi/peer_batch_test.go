package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
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
	tr := newPeerTransport(t, 5*time.Second)
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
	tr := newPeerTransport(t, 2*time.Second)
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

package replication

import (
	"bytes"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// markedInstance is an instance as a node stores it after its health
// checks marked it.
func markedInstance(t *testing.T) (*registry.Registry, *registry.Instance) {
	t.Helper()
	clk := registrytest.NewClock()
	cfg := registry.DefaultConfig()
	cfg.Now = clk.Now
	reg, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "a"))); err != nil {
		t.Fatal(err)
	}
	in, err := reg.Apply(registry.HealthOp("APP", "a", &registry.HealthMark{Reason: "http 503", Since: 7, By: "n1"}))
	if err != nil {
		t.Fatal(err)
	}
	return reg, in
}

func sameMark(a, b *registry.HealthMark) bool {
	return a != nil && b != nil && *a == *b
}

// The mark travels beside the instance on every path between Muster
// nodes (a batch item, a 409's answer, anti-entropy's copies), and never
// to a Java peer.
func TestHealthMark_travelsWithVersionedCopies(t *testing.T) {
	src, in := markedInstance(t)
	ev := registry.Event{Kind: registry.OpHealth, Origin: registry.OriginHealthCheck, Key: registry.InstanceKey{App: "APP", ID: "a"}, Instance: in, At: time.Now()}
	task, ok := TaskFromEvent(ev)
	if !ok || task.Action != registry.ActionRegister {
		t.Fatalf("a health-check event: task %+v %v, want a Register", task, ok)
	}

	// To a Muster peer: the receiver stores the marked copy.
	body, err := EncodeBatch(Batch{Tasks: []Task{task}, Versioned: true})
	if err != nil {
		t.Fatal(err)
	}
	dstCfg := registry.DefaultConfig()
	dst, _ := registry.New(dstCfg)
	rc, err := NewReceiver(dst, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Handle(body); err != nil {
		t.Fatal(err)
	}
	got, ok := dst.Instance("APP", "a")
	if !ok || got.Status != registry.StatusDown || !sameMark(got.Health, in.Health) || got.WriteVersion != in.WriteVersion {
		t.Fatalf("Muster peer stored %+v (mark %+v), want DOWN with the mark at version %d", got.Instance, got.Health, in.WriteVersion)
	}
	if dst.RootDigest() != src.RootDigest() {
		t.Error("the peer's digest differs from the marking node's")
	}

	// To a Java peer: a plain Register with status DOWN, no mark.
	plain, err := EncodeBatch(Batch{Tasks: []Task{task}, Versioned: false})
	if err != nil {
		t.Fatal(err)
	}
	read, err := wire.DecodeBatch(plain)
	if err == nil && len(read.Items) == 1 && read.Err(0) == nil && (read.Items[0].Health != nil || read.Items[0].Status != "DOWN") {
		t.Fatalf("to a Java peer: %+v", read.Items[0])
	}
	if bytes.Contains(plain, []byte(`"health"`)) {
		t.Fatalf("a Java peer's batch carries the mark: %s", plain)
	}

	// A 409's answer.
	resp, _ := read.EncodeResponse([]wire.ReplicationResponse{{StatusCode: 409, ResponseEntity: []byte(`{"instanceId":"a","hostName":"h","app":"APP","ipAddr":"10.0.0.1","status":"DOWN","dataCenterInfo":{"@class":"x","name":"MyOwn"}}`),
		Version: in.WriteVersion, Health: wire.HealthOf(in.Health)}})
	res, err := DecodeBatchResponse(resp)
	if err != nil || len(res.Items) != 1 || res.Items[0].Instance == nil || !sameMark(res.Items[0].Instance.Health, in.Health) {
		t.Fatalf("409 answer decoded %+v %v, want the mark", res, err)
	}

	// Anti-entropy's copies.
	req, _ := EncodeCopiesRequest([]registry.InstanceKey{{App: "APP", ID: "a"}})
	answer, err := AnswerCopies(src, req)
	if err != nil {
		t.Fatal(err)
	}
	copies, err := DecodeCopies(answer)
	if err != nil || len(copies) != 1 || !sameMark(copies[0].Instance.Health, in.Health) {
		t.Fatalf("copies %+v %v, want the mark", copies, err)
	}
}

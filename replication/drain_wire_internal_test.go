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

// The drain travels in the pieces on every path between Muster nodes (a
// batch item, anti-entropy's copies), and to a Java peer as what its
// clients must see: a Register with status OUT_OF_SERVICE, as the health
// mark goes as DOWN.
func TestDrain_travelsWithVersionedCopies(t *testing.T) {
	cfg := registry.DefaultConfig()
	cfg.Now = registrytest.NewClock().Now
	src, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "a"))); err != nil {
		t.Fatal(err)
	}
	in, err := src.Apply(registry.DrainOp("APP", "a", 7, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	ev := registry.Event{Kind: registry.OpDrain, Origin: registry.OriginClient, Key: registry.InstanceKey{App: "APP", ID: "a"}, Instance: in, At: time.Now()}
	task, ok := TaskFromEvent(ev)
	if !ok || task.Action != registry.ActionRegister {
		t.Fatalf("a drain event: task %+v %v, want a Register", task, ok)
	}

	body, err := EncodeBatch(Batch{Tasks: []Task{task}, Versioned: true})
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := registry.New(registry.DefaultConfig())
	rc, err := NewReceiver(dst, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Handle(body); err != nil {
		t.Fatal(err)
	}
	mark, got, ok := dst.Drain("APP", "a")
	if !ok || got.Status != registry.StatusOutOfService || mark.At != 7 || mark.By != "n1" || mark.Seq == 0 {
		t.Fatalf("Muster peer stored %+v, mark %+v %v, want OUT_OF_SERVICE drained at 7 by n1", got, mark, ok)
	}
	if dst.RootDigest() != src.RootDigest() {
		t.Error("the peer's digest differs from the draining node's")
	}

	plain, err := EncodeBatch(Batch{Tasks: []Task{task}, Versioned: false})
	if err != nil {
		t.Fatal(err)
	}
	read, err := wire.DecodeBatch(plain)
	if err != nil || len(read.Items) != 1 || read.Err(0) != nil || read.Items[0].Status != "OUT_OF_SERVICE" || read.Items[0].Pieces != nil {
		t.Fatalf("to a Java peer: %+v %v", read, err)
	}
	if bytes.Contains(plain, []byte(`drainedAt`)) {
		t.Fatalf("a Java peer's batch carries the drain: %s", plain)
	}

	req, _ := EncodeCopiesRequest([]registry.InstanceKey{{App: "APP", ID: "a"}})
	answer, err := AnswerCopies(src, req)
	if err != nil {
		t.Fatal(err)
	}
	copies, err := DecodeCopies(answer)
	if err != nil || len(copies) != 1 {
		t.Fatalf("copies %+v %v", copies, err)
	}
	if m, ok := copies[0].Instance.Drain(); !ok || m.At != 7 {
		t.Fatalf("anti-entropy copy lost the drain: %+v", copies[0].Instance.Pieces)
	}
}

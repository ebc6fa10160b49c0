package drain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// The receipt counts every node's answer: a peer that answers, one that
// does not serve readers (a Java server: unseen, not waited for) and one
// that cannot be reached (pending, named).
func TestDrainer_receiptOfEveryNode(t *testing.T) {
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now, rcfg.Logger = clk.Now, zerolog.Nop()
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o-1"))); err != nil {
		t.Fatal(err)
	}
	readers := drain.NewReaders(0, time.Minute)
	local := drain.Reader{Agent: "local-client", Address: "10.0.0.1"}
	readers.NoteApp(local, "ORDERS", reg.Version(), clk.Now())
	var mu sync.Mutex // peers are asked at once
	var asked []drain.Query
	d := drain.New(drain.Config{Registry: reg, Readers: readers, Node: "n1", Now: clk.Now, Window: time.Minute,
		Peers: func() []drain.Peer { return []drain.Peer{{Name: "n2"}, {Name: "java"}, {Name: "n3"}} },
		Ask: func(_ context.Context, p drain.Peer, q drain.Query) (drain.Answer, error) {
			mu.Lock()
			asked = append(asked, q)
			mu.Unlock()
			switch p.Name {
			case "n2":
				return drain.Answer{Node: "n2", Applied: true, Readers: []drain.ReaderState{
					{Client: "a", Address: "10.0.0.2", LastRead: 1, Confirmed: true},
					{Client: "b", Address: "10.0.0.3", LastRead: 2}}}, nil
			case "java":
				return drain.Answer{}, drain.ErrNotServed
			}
			return drain.Answer{}, errors.New("connection refused")
		}})
	rc, err := d.Drain(context.Background(), "orders", "o-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Complete || rc.Readers != 4 || rc.Confirmed != 1 || len(rc.Pending) != 3 || len(rc.Unseen) != 1 || rc.Unseen[0] != "java" {
		t.Fatalf("receipt %+v", rc)
	}
	want := []drain.Pending{
		{Client: "local-client", Address: "10.0.0.1", Node: "n1", LastRead: clk.Now().UnixMilli()},
		{Client: "b", Address: "10.0.0.3", Node: "n2", LastRead: 2},
		{Client: drain.ClientUnreachable, Node: "n3"},
	}
	for i, p := range rc.Pending {
		if p != want[i] {
			t.Errorf("pending[%d] = %+v, want %+v", i, p, want[i])
		}
	}
	for _, q := range asked {
		if q.App != "ORDERS" || q.ID != "o-1" || q.DrainedAt != rc.DrainedAt {
			t.Fatalf("asked %+v", q)
		}
	}
	if _, err := d.Drain(context.Background(), "ORDERS", "nope", 0); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
	if _, err := d.Undrain(context.Background(), "ORDERS", "o-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Receipt(context.Background(), "ORDERS", "o-1"); !errors.Is(err, drain.ErrNotDrained) {
		t.Fatalf("receipt after undrain: %v", err)
	}
}

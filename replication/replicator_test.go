package replication_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
	"github.com/rs/zerolog"
)

// mustRecv waits for the next recorded batch. The deadline only guards
// against a hang; the test never waits for time to pass.
func mustRecv(tb testing.TB, tr *replicationtest.Transport) replicationtest.Sent {
	tb.Helper()
	select {
	case s := <-tr.Sent():
		return s
	case <-time.After(10 * time.Second):
		tb.Fatal("no batch sent within 10s")
		return replicationtest.Sent{}
	}
}

// mustRecvFrom waits for batches until one for peer name satisfies ok,
// and returns it; batches for other peers are returned in others.
func mustRecvFrom(tb testing.TB, tr *replicationtest.Transport, name string, ok func(replicationtest.Sent) bool) replicationtest.Sent {
	tb.Helper()
	for {
		s := mustRecv(tb, tr)
		if s.Peer.Name == name && ok(s) {
			return s
		}
	}
}

func ids(b replication.Batch) string {
	var parts []string
	for _, t := range b.Tasks {
		parts = append(parts, string(t.Action)+":"+t.Key.ID)
	}
	return strings.Join(parts, " ")
}

// newReplicator returns a replicator reading a fresh registry (on the
// real clock: the senders run for real here).
func newReplicator(t *testing.T, tr replication.Transport) (*replication.Replicator, *registry.Registry) {
	t.Helper()
	reg, err := registry.New(registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := replication.DefaultConfig()
	cfg.Transport = tr
	cfg.Store = reg
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t))
	r, err := replication.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func mustApply(tb testing.TB, reg *registry.Registry, op registry.Op) {
	tb.Helper()
	if _, err := reg.Apply(op); err != nil {
		tb.Fatalf("Apply(%s %s/%s): %v", op.Kind, op.App, op.ID, err)
	}
}

func register(id string) registry.Op {
	return registry.RegisterOp(registrytest.NewInstance("ORDERS", id))
}

// replicationGoroutines lists the stacks of goroutines running code of
// package replication.
func replicationGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "muster/replication.(*") {
			out = append(out, g)
		}
	}
	return out
}

func TestReplicator_Run(t *testing.T) {
	tr := replicationtest.NewTransport()
	inFlight := make(chan struct{})
	release := make(chan struct{})
	hold := make(chan bool, 1) // a true in here holds the next batch to peer b
	tr.Respond = func(p replication.Peer, b replication.Batch) (replication.BatchResult, error) {
		if p.Name == "b" {
			select {
			case <-hold:
				inFlight <- struct{}{}
				<-release
			default:
			}
		}
		return replicationtest.OK(b), nil
	}

	r, reg := newReplicator(t, tr)
	r.SetPeers([]replication.Peer{{Name: "b", URL: "http://b/eureka/"}, {Name: "c", URL: "http://c/eureka/"}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()

	// 1. A lone change reaches both peers, one batch each: the register
	// goes registry → stream → replicator → sender.
	mustApply(t, reg, register("x"))
	got := map[string]string{}
	for range 2 {
		s := mustRecv(t, tr)
		got[s.Peer.Name] = ids(s.Batch)
		if s.Batch.Tasks[0].Instance == nil || s.Batch.Tasks[0].Instance.InstanceID != "x" {
			t.Errorf("register to %s carries %+v", s.Peer.Name, s.Batch.Tasks[0].Instance)
		}
	}
	if got["b"] != "Register:x" || got["c"] != "Register:x" {
		t.Fatalf("first batches = %v, want Register:x to b and c", got)
	}
	for i := range 10 {
		mustApply(t, reg, register(fmt.Sprint("z", i)))
	}
	mustApply(t, reg, register("y"))
	for seen := map[string]bool{}; !seen["b"] || !seen["c"]; {
		if s := mustRecv(t, tr); strings.HasSuffix(ids(s.Batch), "Register:y") {
			seen[s.Peer.Name] = true
		}
	}
	// A peer's write is never sent on.
	mustApply(t, reg, registry.RenewOp("ORDERS", "x").From(registry.OriginPeer))
	mustApply(t, reg, registry.StatusOp("ORDERS", "x", registry.StatusDown).From(registry.OriginPeer))

	// 2. While b's batch is in flight, changes queue up for b and go out,
	// in order, once it is answered. Client heartbeats come through the
	// renewal feed, in the order the instances first renewed.
	hold <- true
	mustApply(t, reg, registry.RenewOp("ORDERS", "x"))
	<-inFlight
	for i := range 10 {
		mustApply(t, reg, registry.RenewOp("ORDERS", fmt.Sprint("z", i)))
	}
	close(release)
	var toB []string
	for len(toB) < 11 {
		s := mustRecv(t, tr)
		if s.Peer.Name == "b" {
			toB = append(toB, strings.Fields(ids(s.Batch))...)
		}
	}
	// x went first, alone; the others follow in any order (renewals are
	// independent of each other).
	want := "Heartbeat:x Heartbeat:z0 Heartbeat:z1 Heartbeat:z2 Heartbeat:z3 Heartbeat:z4 Heartbeat:z5 Heartbeat:z6 Heartbeat:z7 Heartbeat:z8 Heartbeat:z9"
	if len(toB) > 0 {
		slices.SortFunc(toB[1:], func(a, b string) int { return cmpHeartbeat(a, b) })
	}
	if strings.Join(toB, " ") != want {
		t.Errorf("b received %v, want %s", toB, want)
	}

	// 3. A cut-off peer is retried until it is reachable again.
	tr.Disconnect("c")
	r.SetPeers([]replication.Peer{{Name: "b", URL: "http://b/eureka/"}, {Name: "c", URL: "http://c2/eureka/"}})
	mustApply(t, reg, registry.CancelOp("ORDERS", "y"))
	mustRecvFrom(t, tr, "c", func(s replicationtest.Sent) bool {
		return errors.Is(s.Err, replicationtest.ErrUnreachable) && strings.Contains(ids(s.Batch), "Cancel:y")
	})
	tr.Connect("c")
	s := mustRecvFrom(t, tr, "c", func(s replicationtest.Sent) bool {
		return s.Err == nil && strings.Contains(ids(s.Batch), "Cancel:y")
	})
	if s.Peer.URL != "http://c2/eureka/" {
		t.Errorf("retry went to %q, want the new URL", s.Peer.URL)
	}

	// 4. Removing a peer stops its sender; the totals keep its counts.
	before := r.Totals()
	r.SetPeers([]replication.Peer{{Name: "b", URL: "http://b/eureka/"}})
	if ps := r.Peers(); len(ps) != 1 || ps[0].Name != "b" {
		t.Errorf("Peers() = %+v, want only b", ps)
	}
	if after := r.Totals(); after.ItemsSent < before.ItemsSent || after.Retries < 1 {
		t.Errorf("Totals() after removing c = %+v, before %+v", after, before)
	}

	// 5. Shutdown stops every goroutine.
	r.Shutdown()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Shutdown")
	}
	mustApply(t, reg, register("late")) // nobody reads it now, and nothing blocks
	deadline := time.Now().Add(5 * time.Second)
	for gs := replicationGoroutines(); len(gs) > 0; gs = replicationGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still running after Shutdown:\n%s", len(gs), strings.Join(gs, "\n\n"))
		}
		runtime.Gosched() // a finished goroutine may still be unwinding its deferred Done
	}
	if err := r.Run(ctx); !errors.Is(err, replication.ErrClosed) {
		t.Errorf("Run after Shutdown = %v, want ErrClosed", err)
	}
}

func TestReplicator_New_invalidConfig(t *testing.T) {
	if _, err := replication.New(replication.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "Transport") {
		t.Errorf("New() = %v, want the config error", err)
	}
}

func TestReplicator_Shutdown_beforeRun(t *testing.T) {
	r, _ := newReplicator(t, replicationtest.NewTransport())
	r.SetPeers([]replication.Peer{{Name: "b"}})
	r.Shutdown()
	r.Shutdown()
	if err := r.Run(context.Background()); !errors.Is(err, replication.ErrClosed) {
		t.Errorf("Run after Shutdown = %v, want ErrClosed", err)
	}
}

func TestReplicator_Run_endsWithContext(t *testing.T) {
	tr := replicationtest.NewTransport()
	r, reg := newReplicator(t, tr)
	r.SetPeers([]replication.Peer{{Name: "b"}})
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	mustApply(t, reg, register("x"))
	mustRecv(t, tr)
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	r.Shutdown() // after Run has returned: returns at once
	if got := r.Totals().ItemsSent; got != 1 {
		t.Errorf("Totals().ItemsSent = %d, want 1", got)
	}
}

// cmpHeartbeat orders "Heartbeat:z2" before "Heartbeat:z10".
func cmpHeartbeat(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

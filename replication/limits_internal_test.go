package replication

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// heavy is a Register task whose instance carries size bytes of metadata.
func heavy(id string, size int) Task {
	in := registrytest.NewInstance("ORDERS", id, registrytest.WithMetadata(map[string]string{"blob": strings.Repeat("m", size)}))
	return Task{Action: registry.ActionRegister, Key: registry.InstanceKey{App: "ORDERS", ID: id}, Instance: in, CreatedAt: t0}
}

func TestBatcher_TakeSized_byteBudget(t *testing.T) {
	b := newBatcher(100, 30*time.Second, 30*time.Second)
	for _, tk := range []Task{heavy("a", 400), heavy("b", 400), heavy("huge", 5000), heavy("c", 400), hbFor("d")} {
		b.add(tk, t0)
	}
	one := taskWireSize(&Task{Action: registry.ActionRegister, Key: registry.InstanceKey{App: "ORDERS", ID: "a"}, Instance: heavy("a", 400).Instance})
	budget := 2*one + 10
	got, tooLarge := b.takeSized(t0, 250, budget, taskWireSize)
	if ids(got) != "a,b" || ids(tooLarge) != "huge" {
		t.Fatalf("first take = %s, too large %s; want a,b and huge", ids(got), ids(tooLarge))
	}
	got, tooLarge = b.takeSized(t0, 250, budget, taskWireSize)
	if ids(got) != "c,d" || len(tooLarge) != 0 {
		t.Fatalf("second take = %s, too large %s; want c,d", ids(got), ids(tooLarge))
	}
	if b.len() != 0 {
		t.Fatalf("%d left", b.len())
	}
}

// The encoded batch never exceeds the budget: the estimate is an upper
// bound of the wire size.
func TestTaskWireSize_upperBound(t *testing.T) {
	tasks := []Task{heavy("a<&>\u0001", 1000), hbFor("x\"y"), {Action: registry.ActionCancel, Key: registry.InstanceKey{App: "A", ID: "<<<<"}}}
	sum := 0
	for i := range tasks {
		sum += taskWireSize(&tasks[i])
	}
	body, err := EncodeBatch(Batch{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > sum {
		t.Fatalf("encoded %d bytes, estimate %d", len(body), sum)
	}
}

func ids(tasks []Task) string {
	var s []string
	for _, t := range tasks {
		s = append(s, t.Key.ID)
	}
	return strings.Join(s, ",")
}

func TestPeer_Step_tooLargeTaskDroppedForGood(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBatchBytes = 3000 })
	h.enqueue(heavy("huge", 5000), hbFor("a"))
	f := h.mustStep(t)
	if ids(f.batch.Tasks) != "a" {
		t.Fatalf("batch = %s, want a", ids(f.batch.Tasks))
	}
	if s := h.stats(); s.Drops.TooLarge != 1 || s.Drops.Total() != 1 {
		t.Fatalf("drops = %+v, want 1 too large", s.Drops)
	}
}

// A 413 to a batch of several: back to the queue, half the bytes, nothing
// dropped; a 413 to a single task drops it.
func TestPeer_OnResult_413HalvesTheBatch(t *testing.T) {
	limit := 0
	h := newHarness(t, func(c *Config) { c.MaxBatchBytes = 0 })
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) {
		size := 0
		for i := range b.Tasks {
			size += taskWireSize(&b.Tasks[i])
		}
		if size > limit {
			return BatchResult{}, &StatusError{Code: 413}
		}
		return allOK(b), nil
	}
	var tasks []Task
	for _, id := range []string{"a", "b", "c", "d"} {
		tasks = append(tasks, heavy(id, 1000))
	}
	limit = 2*taskWireSize(&tasks[0]) + 10
	h.enqueue(append(tasks, heavy("huge", 20000))...)
	for range 10 {
		f, _ := h.p.step(h.clk.Now())
		if f == nil {
			break
		}
		h.deliver(f)
	}
	s := h.stats()
	if s.ItemsSent != 4 || s.Drops.TooLarge != 1 || s.Drops.Permanent != 0 || s.Retries == 0 {
		t.Fatalf("ItemsSent %d, drops %+v, retries %d; want 4 sent, huge dropped as too large", s.ItemsSent, s.Drops, s.Retries)
	}
}

// Items the peer refuses for good are counted as refused drops and logged
// at error level under their own limiter: a Warn about a failed batch just
// before does not hide them.
func TestPeer_OnResult_refusedItemsHaveTheirOwnLogLimit(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) {
		if calls++; calls == 1 {
			return BatchResult{}, errors.New("connection refused") // transient: a Warn
		}
		return answer(b, 400, 403, 200), nil
	}
	h.enqueue(hbFor("a"), hbFor("b"), hbFor("c"))
	h.deliver(h.mustStep(t))
	h.clk.Advance(h.p.retryAt.Sub(h.clk.Now()))
	h.deliver(h.mustStep(t))
	s := h.stats()
	if s.Drops.Refused != 2 || s.ItemFailures != 0 {
		t.Fatalf("Refused %d, ItemFailures %d; want 2, 0", s.Drops.Refused, s.ItemFailures)
	}
	if h.p.errRefused.next.IsZero() {
		t.Fatal("no error line was allowed for the refused items")
	}
}

// Heartbeats fill a peer's inbox to three quarters at most: a change
// offered after a flood of them still gets in.
func TestPeer_Offer_heartbeatsLeaveRoomForChanges(t *testing.T) {
	cfg := DefaultConfig()
	cfg.InboxSize = 8
	p := newPeer(&cfg, time.Now, zerolog.Nop(), Peer{Name: "b"})
	in := registrytest.NewInstance("APP", "i-1")
	for range 20 {
		p.offerAll([]Task{{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "APP", ID: "i-1"}, Instance: in}}, false)
	}
	for range 2 {
		p.offerAll([]Task{{Action: registry.ActionStatusUpdate, Key: registry.InstanceKey{App: "APP", ID: "i-1"}, Instance: in}}, false)
	}
	if got := len(p.inbox); got != 8 {
		t.Fatalf("inbox holds %d, want 6 heartbeats and 2 changes", got)
	}
	if p.inboxFull.Load() != 14 {
		t.Fatalf("%d dropped, want 14 heartbeats", p.inboxFull.Load())
	}
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// fakeTransport records each batch and answers through respond (200 for
// every item when nil). The peer tests call it from one goroutine only.
type fakeTransport struct {
	noAntiEntropy
	respond func(Peer, Batch) (BatchResult, error)
	sent    []Batch
	peers   []Peer
}

func (f *fakeTransport) Send(_ context.Context, p Peer, b Batch) (BatchResult, error) {
	f.sent = append(f.sent, b)
	f.peers = append(f.peers, p)
	if f.respond != nil {
		return f.respond(p, b)
	}
	return allOK(b), nil
}

func (f *fakeTransport) FetchRegistry(context.Context, Peer) ([]*registry.Instance, error) {
	return nil, errors.New("fakeTransport: no registry to fetch")
}

// fakeStore is a real registry whose instance lookups and applied
// operations the peer tests choose and record: the 404 and 409 repairs
// read and write through it.
type fakeStore struct {
	*registry.Registry
	local   map[registry.InstanceKey]*registry.Instance
	adopted []*registry.Instance
}

func newFakeStore(t *testing.T) *fakeStore {
	reg, err := registry.New(registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &fakeStore{Registry: reg, local: map[registry.InstanceKey]*registry.Instance{}}
}

func (s *fakeStore) Instance(app, id string) (registry.InstanceView, bool) {
	in, ok := s.local[registry.InstanceKey{App: app, ID: id}]
	return registry.InstanceView{Instance: in}, ok
}

func (s *fakeStore) Apply(op registry.Op) (*registry.Instance, error) {
	if op.Kind == registry.OpRegister && op.OnlyIfNewer && op.Origin == registry.OriginPeer {
		s.adopted = append(s.adopted, op.Instance)
		return op.Instance, nil
	}
	return s.Registry.Apply(op)
}

func (f *fakeTransport) sizes() []int {
	out := make([]int, len(f.sent))
	for i, b := range f.sent {
		out[i] = len(b.Tasks)
	}
	return out
}

func allOK(b Batch) BatchResult { return answer(b, 200) }

// answer gives every item of b the status code, or the codes in turn.
func answer(b Batch, codes ...int) BatchResult {
	items := make([]wire.ItemResult, len(b.Tasks))
	for i := range items {
		items[i].StatusCode = codes[min(i, len(codes)-1)]
	}
	return BatchResult{Items: items}
}

// harness drives one peer's step/onResult with a moved clock and a fake
// transport, as the sender's goroutine would, but synchronously.
type harness struct {
	p     *peer
	clk   *registrytest.Clock
	ft    *fakeTransport
	store *fakeStore
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

func testConfig(t *testing.T, clk *registrytest.Clock, tr Transport, opts ...func(*Config)) Config {
	cfg := DefaultConfig()
	cfg.Now = clk.Now
	cfg.Transport = tr
	cfg.Store = newFakeStore(t)
	cfg.Logger = testLogger(t)
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func newHarness(t *testing.T, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{clk: registrytest.NewClock(), ft: &fakeTransport{}}
	cfg := testConfig(t, h.clk, h.ft, opts...)
	h.store, _ = cfg.Store.(*fakeStore)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h.p = newPeer(&cfg, cfg.Now, cfg.Logger, Peer{Name: "b", URL: "http://10.0.0.2:8761/eureka/", Zone: "z1"})
	return h
}

// enqueue hands tasks over as the feed does (a round of distinct tasks
// marked so, which the batcher may keep as it came) and lets the sender
// pick them up.
func (h *harness) enqueue(tasks ...Task) {
	h.p.offerAll(tasks, distinctTasks(tasks))
	h.p.takeInbox(h.clk.Now())
}

// mustStep runs step now and fails unless it starts a batch.
func (h *harness) mustStep(tb testing.TB) *flight {
	tb.Helper()
	f, wait := h.p.step(h.clk.Now())
	if f == nil {
		tb.Fatalf("step(%s) started no batch (wait %s, queue %d)", h.clk.Now().Sub(t0), wait, h.p.b.len())
	}
	return f
}

// idleStep runs step now and fails if it starts a batch; it returns the wait.
func (h *harness) idleStep(tb testing.TB) time.Duration {
	tb.Helper()
	f, wait := h.p.step(h.clk.Now())
	if f != nil {
		tb.Fatalf("step(%s) started a batch of %d, want none", h.clk.Now().Sub(t0), len(f.batch.Tasks))
	}
	return wait
}

// deliver sends f through the fake transport and hands the answer to
// onResult at the current time.
func (h *harness) deliver(f *flight) {
	h.p.onResult(h.p.send(context.Background(), f), h.clk.Now())
}

func (h *harness) stats() PeerStats {
	h.p.publish()
	return h.p.snapshot()
}

func hbFor(id string) Task {
	return Task{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "ORDERS", ID: id}, CreatedAt: registrytest.Epoch}
}

func TestPeer_Step_loneTaskGoesAtOnce(t *testing.T) {
	h := newHarness(t)
	if wait := h.idleStep(t); wait != 0 {
		t.Errorf("idle step with nothing queued: wait %s, want 0", wait)
	}
	h.enqueue(hbFor("a"))
	f, wait := h.p.step(h.clk.Now())
	if f == nil || wait != 0 {
		t.Fatalf("step(t0) = %v, %s, want a batch at once", f, wait)
	}
	if got := labels(f.batch.Tasks); !slices.Equal(got, []string{"H:a@0s"}) {
		t.Errorf("batch = %v, want [H:a@0s]", got)
	}
	if f.peer.URL != "http://10.0.0.2:8761/eureka/" {
		t.Errorf("batch goes to %q", f.peer.URL)
	}
	if s := h.stats(); s.InFlight != 1 || s.QueueDepth != 0 {
		t.Errorf("InFlight, QueueDepth = %d, %d, want 1, 0", s.InFlight, s.QueueDepth)
	}
}

func TestPeer_Step_oneBatchInFlight(t *testing.T) {
	h := newHarness(t)
	h.enqueue(hbFor("lone"))
	first := h.mustStep(t)

	burst := many(600, 0)
	h.enqueue(burst...)
	h.idleStep(t) // the lone batch is still in flight
	h.idleStep(t)
	if s := h.stats(); s.QueueDepth != 600 || s.InFlight != 1 {
		t.Errorf("QueueDepth, InFlight = %d, %d, want 600, 1", s.QueueDepth, s.InFlight)
	}

	h.clk.Advance(20 * time.Millisecond)
	h.deliver(first)
	var order []Task
	for range 3 {
		f := h.mustStep(t)
		h.idleStep(t)
		order = append(order, f.batch.Tasks...)
		h.deliver(f)
	}
	h.idleStep(t)
	if got, want := h.ft.sizes(), []int{1, 250, 250, 100}; !slices.Equal(got, want) {
		t.Errorf("batch sizes = %v, want %v", got, want)
	}
	if !slices.Equal(labels(order), labels(burst)) {
		t.Errorf("tasks went out out of order")
	}
	s := h.stats()
	if s.BatchesSent != 4 || s.ItemsSent != 601 || s.LastBatchSize != 100 {
		t.Errorf("BatchesSent, ItemsSent, LastBatchSize = %d, %d, %d, want 4, 601, 100", s.BatchesSent, s.ItemsSent, s.LastBatchSize)
	}
}

func TestPeer_OnResult_congestionBacksOff(t *testing.T) {
	h := newHarness(t)
	answers := []error{&StatusError{Code: 503}, &StatusError{Code: 503}, nil}
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) {
		err := answers[0]
		answers = answers[1:]
		if err != nil {
			return BatchResult{}, err
		}
		return allOK(b), nil
	}
	h.enqueue(hbFor("a"), hbFor("b"))
	h.deliver(h.mustStep(t)) // 503

	s := h.stats()
	if s.Retries != 1 || s.Failures != 1 || s.QueueDepth != 2 {
		t.Errorf("after a 503: Retries, Failures, QueueDepth = %d, %d, %d, want 1, 1, 2", s.Retries, s.Failures, s.QueueDepth)
	}
	if want := "send batch to b: replication: peer answered HTTP 503"; s.LastError != want {
		t.Errorf("LastError = %q, want %q", s.LastError, want)
	}
	if wait := h.idleStep(t); wait != time.Second {
		t.Errorf("wait after the first 503 = %s, want 1s", wait)
	}
	h.enqueue(hbFor("c")) // arrives during the backoff
	h.clk.Advance(999 * time.Millisecond)
	if wait := h.idleStep(t); wait != time.Millisecond {
		t.Errorf("wait at t0+999ms = %s, want 1ms", wait)
	}
	h.clk.Advance(time.Millisecond)
	f := h.mustStep(t)
	if got, want := labels(f.batch.Tasks), []string{"H:a@0s", "H:b@0s", "H:c@0s"}; !slices.Equal(got, want) {
		t.Errorf("retried batch = %v, want %v (the failed batch first)", got, want)
	}
	h.deliver(f) // 503 again: the delay doubles
	if wait := h.idleStep(t); wait != 2*time.Second {
		t.Errorf("wait after the second 503 = %s, want 2s", wait)
	}
	h.clk.Advance(2 * time.Second)
	h.deliver(h.mustStep(t)) // 200
	if s := h.stats(); s.Failures != 0 || s.Retries != 2 || s.ItemsSent != 3 || s.BatchesSent != 1 {
		t.Errorf("after recovery: Failures, Retries, ItemsSent, BatchesSent = %d, %d, %d, %d, want 0, 2, 3, 1",
			s.Failures, s.Retries, s.ItemsSent, s.BatchesSent)
	}
	h.enqueue(hbFor("d"))
	h.mustStep(t) // no backoff left after a success
}

func TestPeer_OnResult_networkErrorRetriesSooner(t *testing.T) {
	h := newHarness(t)
	h.ft.respond = func(Peer, Batch) (BatchResult, error) {
		return BatchResult{}, errors.New("dial tcp 10.0.0.2:8761: connection refused")
	}
	h.enqueue(hbFor("a"))
	h.deliver(h.mustStep(t))
	if wait := h.idleStep(t); wait != 100*time.Millisecond {
		t.Errorf("wait after a network error = %s, want 100ms", wait)
	}
	h.clk.Advance(100 * time.Millisecond)
	h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, context.DeadlineExceeded }
	h.deliver(h.mustStep(t))
	if wait := h.idleStep(t); wait != 200*time.Millisecond {
		t.Errorf("wait after a second failure (timeout) = %s, want 200ms", wait)
	}
	if s := h.stats(); s.Retries != 2 || s.QueueDepth != 1 || s.Drops.Total() != 0 {
		t.Errorf("Retries, QueueDepth, drops = %d, %d, %d, want 2, 1, 0", s.Retries, s.QueueDepth, s.Drops.Total())
	}
	if got := len(h.ft.sent); got != 2 {
		t.Errorf("sent %d batches, want 2", got)
	}
}

func TestPeer_OnResult_retryGivesUpOnExpiredTasks(t *testing.T) {
	h := newHarness(t)
	h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, errors.New("connection reset") }
	h.enqueue(Task{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "ORDERS", ID: "a"}, CreatedAt: h.clk.Now()})
	for range 60 {
		f, wait := h.p.step(h.clk.Now())
		if f == nil && wait == 0 {
			break
		}
		if f != nil {
			h.deliver(f)
		}
		h.clk.Advance(max(wait, time.Millisecond))
	}
	s := h.stats()
	if s.QueueDepth != 0 || s.Drops.Expired != 1 {
		t.Errorf("after 30 s of failures: QueueDepth, Drops.Expired = %d, %d, want 0, 1", s.QueueDepth, s.Drops.Expired)
	}
	if h.clk.Now().Sub(t0) < 30*time.Second {
		t.Errorf("gave up at t0+%s, before TaskMaxAge", h.clk.Now().Sub(t0))
	}
}

func TestPeer_OnResult_permanentErrorDrops(t *testing.T) {
	h := newHarness(t)
	h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, &StatusError{Code: 500} }
	h.enqueue(hbFor("a"), hbFor("b"))
	h.deliver(h.mustStep(t))
	s := h.stats()
	if s.Drops.Permanent != 2 || s.QueueDepth != 0 || s.Retries != 0 || s.Failures != 1 {
		t.Errorf("Drops.Permanent, QueueDepth, Retries, Failures = %d, %d, %d, %d, want 2, 0, 0, 1",
			s.Drops.Permanent, s.QueueDepth, s.Retries, s.Failures)
	}
	if !strings.Contains(s.LastError, "HTTP 500") || !s.LastErrorAt.Equal(t0) {
		t.Errorf("LastError, LastErrorAt = %q, %s", s.LastError, s.LastErrorAt)
	}
	h.enqueue(hbFor("c"))
	h.mustStep(t) // no backoff: the peer answered
}

func TestPeer_OnResult_heartbeat404Reregisters(t *testing.T) {
	h := newHarness(t)
	local := registrytest.NewInstance("ORDERS", "a", registrytest.WithDirty(42))
	h.store.local[registry.InstanceKey{App: "ORDERS", ID: "a"}] = local
	// ORDERS/b is gone locally: its cancel is on its way, nothing to do.
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) { return answer(b, 404), nil }
	h.enqueue(hbFor("a"), hbFor("b"))
	h.clk.Advance(time.Second)
	h.deliver(h.mustStep(t))

	h.ft.respond = nil
	f := h.mustStep(t)
	if got, want := labels(f.batch.Tasks), []string{"R:a@1s"}; !slices.Equal(got, want) {
		t.Fatalf("batch after the 404s = %v, want %v", got, want)
	}
	if f.batch.Tasks[0].Instance != local {
		t.Errorf("the register carries %+v, want the local instance", f.batch.Tasks[0].Instance)
	}
	h.deliver(f)
	if s := h.stats(); s.Reregistered != 1 || s.ItemFailures != 0 {
		t.Errorf("Reregistered, ItemFailures = %d, %d, want 1, 0", s.Reregistered, s.ItemFailures)
	}
}

func TestPeer_OnResult_heartbeat409Adopts(t *testing.T) {
	h := newHarness(t)
	theirs := registrytest.NewInstance("ORDERS", "a", registrytest.WithDirty(99), registrytest.WithStatus(registry.StatusOutOfService))
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) {
		return BatchResult{Items: []wire.ItemResult{{StatusCode: 409, Instance: theirs}, {StatusCode: 200}}}, nil
	}
	h.enqueue(hbFor("a"), hbFor("b"))
	h.deliver(h.mustStep(t))
	if len(h.store.adopted) != 1 || h.store.adopted[0] != theirs {
		t.Errorf("adopted %v, want the peer's instance", h.store.adopted)
	}
	if s := h.stats(); s.Adopted != 1 || s.ItemFailures != 0 || s.QueueDepth != 0 {
		t.Errorf("Adopted, ItemFailures, QueueDepth = %d, %d, %d, want 1, 0, 0", s.Adopted, s.ItemFailures, s.QueueDepth)
	}
}

func TestPeer_OnResult_otherItemFailures(t *testing.T) {
	h := newHarness(t)
	key := func(id string) registry.InstanceKey { return registry.InstanceKey{App: "ORDERS", ID: id} }
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) {
		// cancel 404: fine; status 500: failure; heartbeat 409 without
		// an instance: nothing to adopt, failure; register 200.
		return answer(b, 404, 500, 409, 200), nil
	}
	h.enqueue(
		Task{Action: registry.ActionCancel, Key: key("a"), CreatedAt: t0},
		Task{Action: registry.ActionStatusUpdate, Key: key("b"), CreatedAt: t0},
		Task{Action: registry.ActionHeartbeat, Key: key("c"), CreatedAt: t0},
		Task{Action: registry.ActionRegister, Key: key("d"), CreatedAt: t0},
	)
	h.deliver(h.mustStep(t))
	s := h.stats()
	if s.ItemFailures != 2 || s.Adopted != 0 || s.Reregistered != 0 || s.ItemsSent != 4 {
		t.Errorf("ItemFailures, Adopted, Reregistered, ItemsSent = %d, %d, %d, %d, want 2, 0, 0, 4",
			s.ItemFailures, s.Adopted, s.Reregistered, s.ItemsSent)
	}
}

func TestPeer_OnResult_itemCountMismatchSkipsItems(t *testing.T) {
	h := newHarness(t)
	h.store.local[registry.InstanceKey{App: "ORDERS", ID: "a"}] = registrytest.NewInstance("ORDERS", "a")
	h.ft.respond = func(Peer, Batch) (BatchResult, error) {
		return BatchResult{Items: []wire.ItemResult{{StatusCode: 404}}}, nil
	}
	h.enqueue(hbFor("a"), hbFor("b"))
	h.deliver(h.mustStep(t))
	s := h.stats()
	if s.Reregistered != 0 || s.ItemFailures != 0 || s.QueueDepth != 0 || s.BatchesSent != 1 {
		t.Errorf("Reregistered, ItemFailures, QueueDepth, BatchesSent = %d, %d, %d, %d, want 0, 0, 0, 1",
			s.Reregistered, s.ItemFailures, s.QueueDepth, s.BatchesSent)
	}
}

func TestPeer_OnResult_abortedBatchIsRequeued(t *testing.T) {
	h := newHarness(t)
	h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, context.Canceled }
	h.enqueue(hbFor("a"))
	h.deliver(h.mustStep(t))
	s := h.stats()
	if s.QueueDepth != 1 || s.Retries != 0 || s.Failures != 0 || s.LastError != "" {
		t.Errorf("QueueDepth, Retries, Failures, LastError = %d, %d, %d, %q, want 1, 0, 0, \"\"",
			s.QueueDepth, s.Retries, s.Failures, s.LastError)
	}
}

func TestPeer_Step_lagAndBatchDuration(t *testing.T) {
	h := newHarness(t)
	h.enqueue(hbFor("a"), hbFor("b")) // created at t0
	h.clk.Advance(2 * time.Second)
	f := h.mustStep(t)
	h.clk.Advance(35 * time.Millisecond)
	h.deliver(f)
	h.enqueue(Task{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "ORDERS", ID: "c"}, CreatedAt: h.clk.Now()})
	h.clk.Advance(500 * time.Millisecond)
	h.mustStep(t)
	s := h.stats()
	if s.LastLag != 500*time.Millisecond || s.MaxLag != 2*time.Second {
		t.Errorf("LastLag, MaxLag = %s, %s, want 500ms, 2s", s.LastLag, s.MaxLag)
	}
	if s.LastBatchMillis != 35 || s.LastBatchSize != 2 {
		t.Errorf("LastBatchMillis, LastBatchSize = %d, %d, want 35, 2", s.LastBatchMillis, s.LastBatchSize)
	}
}

func TestPeer_Drain_inboxFullIsCounted(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InboxSize = 2 })
	for i := range 5 {
		h.p.offerAll([]Task{hbFor(fmt.Sprint(i))}, false)
	}
	if s := h.stats(); s.Drops.InboxFull != 3 || s.QueueDepth != 2 {
		t.Errorf("Drops.InboxFull, QueueDepth = %d, %d, want 3, 2", s.Drops.InboxFull, s.QueueDepth)
	}
}

// --- Replicator, without goroutines: Run is never called here. ---

func newTestReplicator(t *testing.T, opts ...func(*Config)) (*Replicator, *registrytest.Clock) {
	t.Helper()
	clk := registrytest.NewClock()
	cfg := testConfig(t, clk, &fakeTransport{}, opts...)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, clk
}

func change(a registry.Action, id string) Task {
	in := registrytest.NewInstance("ORDERS", id)
	return Task{Action: a, Key: registry.InstanceKey{App: "ORDERS", ID: id}, Instance: in, CreatedAt: t0}
}

func TestReplicator_HandOut_doesNotAllocate(t *testing.T) {
	r, _ := newTestReplicator(t, func(c *Config) { c.InboxSize = 8 })
	r.SetPeers([]Peer{{Name: "b"}, {Name: "c"}, {Name: "d"}})
	hb := change(registry.ActionHeartbeat, "a")
	fb := feedBuffers{tasks: make([]Task, 0, 1)}
	if allocs := testing.AllocsPerRun(100, func() {
		fb.tasks = append(fb.tasks, hb)
		r.handOut(&fb, false)
	}); allocs != 0 {
		t.Errorf("handOut allocates %v times per call, want 0", allocs)
	}
	// 101 heartbeats into inboxes of 8, which take 6 of them (the rest is
	// kept for changes): the others are counted drops.
	if got := r.Totals().Drops.InboxFull; got != 3*(101-6) {
		t.Errorf("Totals().Drops.InboxFull = %d, want %d", got, 3*(101-6))
	}
}

// A round of the feed reaches a sender whole, in one wake-up, and leaves
// in one batch: a take of renewals is not cut into the few tasks that had
// arrived when the sender first woke.
func TestReplicator_HandOut_roundLeavesInOneBatch(t *testing.T) {
	r, clk := newTestReplicator(t)
	r.SetPeers([]Peer{{Name: "b", URL: "http://10.0.0.2:8761/eureka/", Muster: true}})
	pb := r.peers["b"]
	fb := feedBuffers{}
	for i := range 600 {
		fb.tasks = append(fb.tasks, change(registry.ActionHeartbeat, fmt.Sprint("i-", i)))
	}
	r.handOut(&fb, true)
	if len(fb.tasks) != 0 {
		t.Fatalf("handOut left %d tasks in the round's buffer", len(fb.tasks))
	}
	if len(pb.kick) != 1 {
		t.Fatalf("%d wake-ups pending for the sender, want 1", len(pb.kick))
	}
	pb.takeInbox(clk.Now())
	f, _ := pb.step(clk.Now())
	if f == nil || len(f.batch.Tasks) != 600 {
		t.Fatalf("step() = %+v, want one batch of the 600", f)
	}
}

func TestReplicator_SetPeers_keepsQueueOfStayingPeers(t *testing.T) {
	r, clk := newTestReplicator(t, func(c *Config) { c.InboxSize = 3 })
	r.SetPeers([]Peer{{Name: "b", URL: "http://10.0.0.2:8761/eureka/"}, {Name: "c", URL: "http://10.0.0.3:8761/eureka/"}})
	pb := r.peers["b"]
	fb := feedBuffers{}
	for _, id := range []string{"a1", "a2", "a3", "a4"} { // a4 overflows the inboxes
		fb.tasks = append(fb.tasks, change(registry.ActionRegister, id))
	}
	r.handOut(&fb, false)
	// b's sender has moved one task into its queue; two wait in the inbox.
	pb.b.add(pb.inbox[0], clk.Now())
	pb.inbox = pb.inbox[1:]
	pb.publish()

	r.SetPeers([]Peer{{Name: "b", URL: "http://10.0.0.22:8761/eureka/", Zone: "z2"}, {Name: "d", URL: "http://10.0.0.4:8761/eureka/"}})
	if r.peers["b"] != pb {
		t.Fatal("peer b got a new sender; want the old one kept")
	}
	got := r.Peers()
	if len(got) != 2 || got[0].Name != "b" || got[1].Name != "d" {
		t.Fatalf("Peers() = %+v, want b and d", got)
	}
	if got[0].QueueDepth != 3 || got[0].URL != "http://10.0.0.22:8761/eureka/" || got[0].Zone != "z2" {
		t.Errorf("b: QueueDepth, URL, Zone = %d, %q, %q, want 3 and the new address", got[0].QueueDepth, got[0].URL, got[0].Zone)
	}
	if got[1].QueueDepth != 0 {
		t.Errorf("new peer d: QueueDepth = %d, want 0", got[1].QueueDepth)
	}
	// The totals still count what the removed peer c dropped.
	if tot := r.Totals(); tot.Drops.InboxFull != 2 {
		t.Errorf("Totals().Drops.InboxFull = %d, want 2 (b's and removed c's)", tot.Drops.InboxFull)
	}
	// The queued work goes to b's new URL, in order.
	pb.takeInbox(clk.Now()) // takes both
	f, _ := pb.step(clk.Now())
	if f == nil || f.peer.URL != "http://10.0.0.22:8761/eureka/" {
		t.Fatalf("step() = %+v, want a batch for the new URL", f)
	}
	if got, want := labels(f.batch.Tasks), []string{"R:a1@0s", "R:a2@0s", "R:a3@0s"}; !slices.Equal(got, want) {
		t.Errorf("b's batch = %v, want %v", got, want)
	}
}

func TestReplicator_SetPeers_nameDefaultsToURLAndDuplicatesAreIgnored(t *testing.T) {
	r, _ := newTestReplicator(t)
	r.SetPeers([]Peer{{URL: "http://x/eureka/"}, {Name: "b", URL: "http://b1/"}, {Name: "b", URL: "http://b2/"}, {}})
	got := r.Peers()
	if len(got) != 2 || got[0].Name != "b" || got[0].URL != "http://b1/" || got[1].Name != "http://x/eureka/" {
		t.Errorf("Peers() = %+v", got)
	}
}

// A Muster peer (a member, or a static peer once it answered
// anti-entropy) gets batches of up to MaxMusterBatchSize; any other peer,
// perhaps a Java Eureka server, Eureka's 250.
func TestPeer_Step_musterPeersGetLargerBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(*peer)
		want []int
	}{
		{"eureka peer", func(*peer) {}, []int{250, 250, 250, 250, 250, 250, 250, 250, 250, 250}},
		{"member", func(p *peer) { p.info.Store(&Peer{Name: "b", URL: "http://10.0.0.2:8761/eureka/", Muster: true}) }, []int{2000, 500}},
		{"static peer that answered anti-entropy", func(p *peer) { p.muster.Store(true) }, []int{2000, 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.mark(h.p)
			h.enqueue(many(2500, 0)...)
			for range len(tc.want) {
				h.deliver(h.mustStep(t))
			}
			h.idleStep(t)
			if got := h.ft.sizes(); !slices.Equal(got, tc.want) {
				t.Errorf("batch sizes = %v, want %v", got, tc.want)
			}
		})
	}
}

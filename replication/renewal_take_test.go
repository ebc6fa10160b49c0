package replication_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
	"github.com/rs/zerolog"
)

// takeRecorder is the registry with the size of every take of renewals
// recorded.
type takeRecorder struct {
	*registry.Registry
	mu    sync.Mutex
	sizes []int
}

func (s *takeRecorder) TakeRenewals(buf []registry.Renewal) []registry.Renewal {
	buf = s.Registry.TakeRenewals(buf)
	s.mu.Lock()
	s.sizes = append(s.sizes, len(buf))
	s.mu.Unlock()
	return buf
}

func (s *takeRecorder) largest() (largest, takes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.sizes {
		largest = max(largest, n)
	}
	return largest, len(s.sizes)
}

// A flood of client heartbeats with the clock stopped, so that no pause
// between takes ever ends: the feed takes the renewals whenever about a
// batch waits, so every take is about a batch, the peer's inbox and queue
// (a few batches each here) never overflow, and no renewal is lost or sent
// twice. The last few wait for the pause; moving the clock sends them.
func TestReplicator_renewalFloodTakenInBoundedRounds(t *testing.T) {
	clk := &registrytest.Clock{}
	regCfg := registry.DefaultConfig()
	regCfg.Now = clk.Now
	reg, err := registry.New(regCfg)
	if err != nil {
		t.Fatal(err)
	}
	store := &takeRecorder{Registry: reg}
	tr := replicationtest.NewTransport()
	cfg := replication.DefaultConfig()
	cfg.Now, cfg.After = clk.Now, clk.After
	cfg.MaxBatchSize, cfg.MaxMusterBatchSize = 100, 400
	cfg.MaxQueueSize, cfg.InboxSize = 1000, 1024
	cfg.Transport, cfg.Store = tr, store
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	r, err := replication.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.SetPeers([]replication.Peer{{Name: "b", URL: "http://b/eureka/", Muster: true}})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); r.Shutdown() }()
	go func() { _ = r.Run(ctx) }()

	const n, chunk, bound = 10_300, 100, 400
	keys := make([]registry.InstanceKey, n)
	for i := range keys {
		keys[i] = registry.InstanceKey{App: "ORDERS", ID: fmt.Sprint("i-", i)}
		mustApply(t, reg, registry.RegisterOp(registrytest.NewInstance("ORDERS", keys[i].ID)))
	}
	var mu sync.Mutex
	heartbeats := map[registry.InstanceKey]int{}
	registers, sent := 0, 0
	received := make(chan struct{}, 1)
	go func() {
		for s := range tr.Sent() {
			mu.Lock()
			for _, task := range s.Batch.Tasks {
				switch task.Action {
				case registry.ActionRegister:
					registers++
				case registry.ActionHeartbeat:
					if registers < n {
						t.Errorf("heartbeat %s sent before all registers", task.Key)
					}
					heartbeats[task.Key]++
					sent++
				}
			}
			mu.Unlock()
			select {
			case received <- struct{}{}:
			default:
			}
		}
	}()
	// waitSent waits until the peer has at least want heartbeats; the
	// deadline only guards against a hang.
	waitSent := func(want int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			mu.Lock()
			got := sent
			mu.Unlock()
			if got >= want {
				return
			}
			select {
			case <-received:
			case <-deadline:
				largest, takes := store.largest()
				t.Fatalf("the peer has %d heartbeats, want %d, with the clock stopped (%d takes, the largest %d): renewals that wait are not taken", got, want, takes, largest)
			}
		}
	}
	// The registers all went at once, pause or not.
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		done := registers == n
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-received:
		case <-deadline:
			t.Fatal("registers not sent")
		}
	}

	// The pushes racing a take may count for the next one (renewals.go).
	const slack = 16
	for from := 0; from < n; from += chunk {
		for _, k := range keys[from:min(from+chunk, n)] {
			mustApply(t, reg, registry.RenewOp(k.App, k.ID))
		}
		waitSent(min(from+chunk, n) - bound - slack)
	}
	if largest, takes := store.largest(); largest > bound+chunk+slack || takes < n/(bound+chunk+slack) {
		t.Fatalf("%d renewals taken in %d takes, the largest %d; want takes of at most %d", n, takes, largest, bound+chunk+slack)
	}
	// The rest goes once the pause ends (the feed may start it after the
	// first move: move on until all arrived, far less than a task's 30 s).
	for step := 0; ; step++ {
		mu.Lock()
		got := sent
		mu.Unlock()
		if got >= n {
			break
		}
		if step == 10 {
			t.Fatalf("%d of %d heartbeats sent after the clock moved %d s", got, n, step)
		}
		clk.Advance(time.Second)
		select {
		case <-received:
		case <-time.After(100 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		if heartbeats[k] != 1 {
			t.Fatalf("%s sent %d heartbeats, want 1", k, heartbeats[k])
		}
	}
	if d := r.Totals().Drops; d.Total() != 0 {
		t.Fatalf("drops %+v, want none", d)
	}
}

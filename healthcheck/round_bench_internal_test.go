package healthcheck

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// BenchmarkRoundBookkeeping is a round's own work at 10k instances, the
// probes left out (every probe passes at once): the snapshot walk, the
// ownership, the states carried over, the verdicts and the publishing.
// ns/instance is what a round adds to each probe beyond the probe itself
// (BenchmarkProbe); B/op and allocs/op are per round.
func BenchmarkRoundBookkeeping(b *testing.B) {
	b.Run("cluster", func(b *testing.B) { benchRoundBookkeeping(b, func() []string { return []string{"a"} }) })
	b.Run("clientlive", func(b *testing.B) { benchRoundBookkeeping(b, nil) })
}

// benchRoundBookkeeping is BenchmarkRoundBookkeeping with the ownership
// of members (nil: without a cluster, the instances whose clients talk to
// this node, as the bench's nodes).
func benchRoundBookkeeping(b *testing.B, members func() []string) {
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	reg, _ := registry.New(rcfg)
	const n = 10_000
	for i := range n {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%03d", i%200), fmt.Sprintf("i-%d", i))
		in.IPAddr, in.HostName = "127.0.0.1", "localhost"
		in.HealthCheckURL = fmt.Sprintf("http://127.0.0.1:%d/actuator/health", 20000+i%16)
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Enabled, cfg.Apps = true, []string{"*"}
	cfg.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.Now = clk.Now
	chk, err := New(cfg, Options{Registry: reg, Self: "a", Members: members})
	if err != nil {
		b.Fatal(err)
	}
	chk.probeJobs = func(_ context.Context, jobs []job) {
		for i := range jobs {
			jobs[i].ok, jobs[i].result = true, httpResult(200)
		}
	}
	ctx := context.Background()
	chk.Round(ctx) // the first round parses every target
	b.ReportAllocs()
	for b.Loop() {
		if res := chk.Round(ctx); res.Probed != n {
			b.Fatalf("probed %d, want %d", res.Probed, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/instance")
}

// A round finds each instance's previous state whatever changed in the
// fleet between rounds (an instance gone from the middle, one added, an
// app added before the others): every streak goes on.
func TestRound_carriesStatesOverFleetChanges(t *testing.T) {
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	reg, _ := registry.New(rcfg)
	register := func(app, id string) {
		in := registrytest.NewInstance(app, id)
		in.IPAddr, in.HostName = "127.0.0.1", "localhost"
		in.HealthCheckURL = "http://127.0.0.1:20000/actuator/health"
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		register("APP-B", fmt.Sprintf("i-%d", i))
	}
	cfg := DefaultConfig()
	cfg.Enabled, cfg.Apps = true, []string{"*"}
	cfg.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.FailuresBeforeDown, cfg.MaxDownPercent = 100, 100 // streaks only grow
	cfg.Now = clk.Now
	chk, err := New(cfg, Options{Registry: reg, Self: "a", Members: func() []string { return []string{"a"} }})
	if err != nil {
		t.Fatal(err)
	}
	chk.probeJobs = func(_ context.Context, jobs []job) {
		for i := range jobs {
			jobs[i].ok, jobs[i].result = false, httpResult(503)
		}
	}
	ctx := context.Background()
	want := map[string]int{}
	round := func() {
		t.Helper()
		chk.Round(ctx)
		for id := range want {
			want[id]++
		}
		chk.mu.Lock()
		defer chk.mu.Unlock()
		if len(chk.states) != len(want) {
			t.Fatalf("%d states, want %d", len(chk.states), len(want))
		}
		for key, st := range chk.states {
			if id := key.App + "/" + key.ID; st.failures != want[id] || st.key != key {
				t.Errorf("%s: %d failures (key %v), want %d", id, st.failures, st.key, want[id])
			}
		}
	}
	for i := range 6 {
		want[fmt.Sprintf("APP-B/i-%d", i)] = 0
	}
	round()
	round()
	if _, err := reg.Apply(registry.CancelOp("APP-B", "i-2")); err != nil {
		t.Fatal(err)
	}
	delete(want, "APP-B/i-2")
	round()
	register("APP-B", "i-25")
	want["APP-B/i-25"] = 0
	round()
	register("APP-A", "i-9")
	want["APP-A/i-9"] = 0
	round()
	round() // and once more with nothing changed
}

type liveOnly struct {
	Registry
	live []*registry.Instance
}

func (r liveOnly) ClientLive() []*registry.Instance { return r.live }

// Without a cluster, an instance is this node's when its client talks to
// it: found by the stored pointer, or by its key when it was stored anew
// between ClientLive and the round's snapshot.
func TestOwnership_clientLive(t *testing.T) {
	a := registrytest.NewInstance("APP", "i-1")
	c := &Checker{opt: Options{Registry: liveOnly{live: []*registry.Instance{a}}}}
	owns := c.ownership(&RoundResult{})
	a2 := a.Clone()
	other := registrytest.NewInstance("APP", "i-2")
	if !owns(registry.InstanceKey{App: "APP", ID: "i-1"}, a) || !owns(registry.InstanceKey{App: "APP", ID: "i-1"}, a2) ||
		owns(registry.InstanceKey{App: "APP", ID: "i-2"}, other) {
		t.Fatal("ownership without a cluster: want i-1 by pointer and by key, not i-2")
	}
}

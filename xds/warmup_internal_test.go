package xds

import (
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestRampPercent(t *testing.T) {
	const total = 50 * time.Second
	for _, c := range []struct {
		elapsed time.Duration
		percent int
		next    time.Duration
	}{
		{-time.Second, 10, 10 * time.Second}, // a clock that stepped back: the start
		{0, 10, 10 * time.Second},
		{10*time.Second - 1, 10, 10 * time.Second},
		{10 * time.Second, 28, 20 * time.Second},
		{25 * time.Second, 46, 30 * time.Second},
		{30 * time.Second, 64, 40 * time.Second},
		{49 * time.Second, 82, 50 * time.Second},
		{50 * time.Second, 100, 0},
		{time.Hour, 100, 0},
	} {
		if p, next := rampPercent(c.elapsed, total); p != c.percent || next != c.next {
			t.Errorf("rampPercent(%v, %v) = %d, %v; want %d, %v", c.elapsed, total, p, next, c.percent, c.next)
		}
	}
	if p, next := rampPercent(0, 0); p != 100 || next != 0 {
		t.Errorf("rampPercent(0, 0) = %d, %v; want 100, 0 (no warm-up)", p, next)
	}
	// A total that does not divide into whole nanoseconds per step: at
	// each boundary given, the step has really moved on.
	odd := 7*time.Second + 3
	for elapsed, steps := time.Duration(0), 0; ; steps++ {
		p, next := rampPercent(elapsed, odd)
		if p == 100 {
			if steps != WarmupSteps {
				t.Errorf("%d steps to full weight over %v, want %d", steps, odd, WarmupSteps)
			}
			break
		}
		if next <= elapsed {
			t.Fatalf("rampPercent(%v, %v) next %v: not later", elapsed, odd, next)
		}
		if p2, _ := rampPercent(next, odd); p2 <= p {
			t.Fatalf("at the boundary %v the share stays %d", next, p2)
		}
		elapsed = next
	}
}

// ramp is a registry and a builder with warm-up cfg, on a clock the test
// moves.
type ramp struct {
	t   *testing.T
	reg *registry.Registry
	b   *builder
	clk *registrytest.Clock
	bt  *built
}

func newRamp(t *testing.T, cfg Config, ins ...*registry.Instance) *ramp {
	r := &ramp{t: t, reg: newRegistry(t, ins...), b: newBuilder("e", cfg), clk: registrytest.NewClock()}
	r.build()
	return r
}

func (r *ramp) build() *built {
	r.bt = r.b.update(r.reg.Snapshot(), r.clk.Now())
	return r.bt
}

func (r *ramp) apply(op registry.Op) {
	r.t.Helper()
	if _, err := r.reg.Apply(op); err != nil {
		r.t.Fatal(err)
	}
}

// weights lists the endpoint weights name serves as "addr=weight".
func (r *ramp) weights(name string) string {
	var out []string
	for _, l := range r.bt.sources[name].cla(name, "").GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()+"="+itoa(e.GetLoadBalancingWeight().GetValue()))
		}
	}
	return strings.Join(out, " ")
}

func (r *ramp) want(name, want string) {
	r.t.Helper()
	if got := r.weights(name); got != want {
		r.t.Errorf("%s at +%v: %s, want %s", name, r.clk.Now().Sub(registrytest.Epoch), got, want)
	}
}

// TestWarmup_steps: the instances served at the first build are warm; one
// that turns UP later starts at 10 % of its weight (metadata.weight 4,
// scaled ×100) and rises at each fifth of the warm-up, one build (a new
// piece) per step and none between, to its full weight; nextStep says
// when to build again.
func TestWarmup_steps(t *testing.T) {
	cfg := Config{Warmup: 50 * time.Second}
	r := newRamp(t, cfg, registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)))
	r.want("orders", "10.0.0.1=100")
	if !r.bt.nextStep.IsZero() || r.bt.warming != 0 {
		t.Fatalf("first build: next %v, warming %d; want none (instances there at start are warm)", r.bt.nextStep, r.bt.warming)
	}
	start := r.clk.Now()
	r.apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o2", at("10.0.0.2", 80),
		registrytest.WithMetadata(map[string]string{"weight": "4"}))))
	r.build()
	r.want("orders", "10.0.0.1=100 10.0.0.2=40")
	if r.bt.warming != 1 || !r.bt.nextStep.Equal(start.Add(10*time.Second)) {
		t.Fatalf("warming %d, next step %v; want 1, +10s", r.bt.warming, r.bt.nextStep.Sub(start))
	}
	piece := r.bt.sources["orders"].piece
	r.clk.Advance(9 * time.Second)
	if r.build(); r.bt.sources["orders"].piece != piece {
		t.Error("rebuilt within a step")
	}
	for _, step := range []struct {
		at   time.Duration
		want string
	}{
		{10 * time.Second, "10.0.0.1=100 10.0.0.2=112"},
		{20 * time.Second, "10.0.0.1=100 10.0.0.2=184"},
		{30 * time.Second, "10.0.0.1=100 10.0.0.2=256"},
		{40 * time.Second, "10.0.0.1=100 10.0.0.2=328"},
		{50 * time.Second, "10.0.0.1=100 10.0.0.2=400"},
	} {
		r.clk.Set(start.Add(step.at))
		r.build()
		r.want("orders", step.want)
	}
	if !r.bt.nextStep.IsZero() || r.bt.warming != 0 {
		t.Errorf("after the warm-up: next %v, warming %d", r.bt.nextStep, r.bt.warming)
	}
	if w := r.bt.sources["orders"].piece.weights["o2"]; w.Weight != 400 || w.Full != 400 || w.Percent != 100 {
		t.Errorf("o2's weight after the warm-up: %+v", w)
	}
}

// TestWarmup_downAndUpAgain: an instance that leaves UP (DOWN, a cancel)
// and comes back starts its ramp over; one registered again while UP (a
// client restarting its registration) does not.
func TestWarmup_downAndUpAgain(t *testing.T) {
	o2 := registrytest.NewInstance("ORDERS", "o2", at("10.0.0.2", 80))
	r := newRamp(t, Config{Warmup: 50 * time.Second},
		registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)), o2)
	r.want("orders", "10.0.0.1=100 10.0.0.2=100")

	r.apply(registry.RegisterOp(o2.Clone())) // again, still UP
	r.clk.Advance(time.Second)
	r.build()
	r.want("orders", "10.0.0.1=100 10.0.0.2=100")

	r.apply(registry.StatusOp("ORDERS", "o2", registry.StatusDown))
	r.build()
	r.want("orders", "10.0.0.1=100")
	r.clk.Advance(time.Minute)
	r.apply(registry.StatusOp("ORDERS", "o2", registry.StatusUp))
	r.build()
	r.want("orders", "10.0.0.1=100 10.0.0.2=10")

	// Down again within its warm-up: the next return starts from 10 %.
	r.clk.Advance(30 * time.Second)
	r.build()
	r.want("orders", "10.0.0.1=100 10.0.0.2=64")
	r.apply(registry.CancelOp("ORDERS", "o2"))
	r.build()
	r.want("orders", "10.0.0.1=100")
	r.clk.Advance(time.Second)
	r.apply(registry.RegisterOp(o2.Clone()))
	r.build()
	r.want("orders", "10.0.0.1=100 10.0.0.2=10")
}

// TestWarmup_perApp: muster.traffic.apps.<APP>.warmup-seconds overrides
// the global value, and 0 turns the ramp off for that app; an app new to
// the registry warms up too.
func TestWarmup_perApp(t *testing.T) {
	cfg := Config{Warmup: 50 * time.Second, AppWarmup: map[string]time.Duration{"BILLING": 0, "CART": 10 * time.Second}}
	r := newRamp(t, cfg)
	r.apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80))))
	r.apply(registry.RegisterOp(registrytest.NewInstance("BILLING", "b1", at("10.0.0.2", 80))))
	r.apply(registry.RegisterOp(registrytest.NewInstance("CART", "c1", at("10.0.0.3", 80))))
	r.build()
	r.want("orders", "10.0.0.1=10")
	r.want("billing", "10.0.0.2=100")
	r.want("cart", "10.0.0.3=10")
	if r.bt.warming != 2 {
		t.Errorf("warming %d, want 2 (orders, cart)", r.bt.warming)
	}
	r.clk.Advance(10 * time.Second)
	r.build()
	r.want("orders", "10.0.0.1=28")
	r.want("cart", "10.0.0.3=100")
}

// TestWarmup_offByDefault: without warm-up, weights are metadata.weight
// unscaled, clusters are ROUND_ROBIN, and a new instance gets its full
// weight at once. With warm-up on for one app, that app's cluster (and a
// VIP it lists) is RING_HASH and every other cluster stays ROUND_ROBIN.
func TestWarmup_offByDefault(t *testing.T) {
	r := newRamp(t, DefaultConfig(), registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)))
	r.apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o2", at("10.0.0.2", 80),
		registrytest.WithMetadata(map[string]string{"weight": "3"}))))
	r.build()
	r.want("orders", "10.0.0.1=1 10.0.0.2=3")
	if c := r.bt.clusters[0].(*clusterv3.Cluster); c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN || c.GetRingHashLbConfig() != nil {
		t.Errorf("cluster without warm-up: %v", c)
	}
	billing := registrytest.NewInstance("BILLING", "b1", at("10.0.0.5", 80))
	billing.VIPAddress = "pay-vip"
	on := newRamp(t, Config{AppWarmup: map[string]time.Duration{"BILLING": time.Minute}},
		registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)), billing)
	policies := map[string]clusterv3.Cluster_LbPolicy{}
	for _, res := range on.bt.clusters {
		c := res.(*clusterv3.Cluster)
		policies[c.GetName()] = c.GetLbPolicy()
		if c.GetLbPolicy() != clusterv3.Cluster_RING_HASH {
			continue
		}
		if c.GetRingHashLbConfig().GetHashFunction() != clusterv3.Cluster_RingHashLbConfig_XX_HASH ||
			c.GetRingHashLbConfig().GetMinimumRingSize().GetValue() != 4096 {
			t.Errorf("cluster with warm-up on: %v", c)
		}
		if err := c.ValidateAll(); err != nil { // Envoy's rules for the message
			t.Errorf("cluster with warm-up on: %v", err)
		}
	}
	want := map[string]clusterv3.Cluster_LbPolicy{"billing": clusterv3.Cluster_RING_HASH,
		"pay-vip": clusterv3.Cluster_RING_HASH, "orders": clusterv3.Cluster_ROUND_ROBIN,
		"ORDERS": clusterv3.Cluster_ROUND_ROBIN} // ORDERS: o1's VIP
	if !maps.Equal(policies, want) {
		t.Errorf("policies %v, want %v", policies, want)
	}
}

// TestFitWeights: scaled weights whose sum passes 2^32−1 (grpc-go's limit
// per locality) are divided down alike, ratios kept as integers allow.
func TestFitWeights(t *testing.T) {
	eps := make([]endpoint, 700)
	for i := range eps {
		eps[i].weight = MaxEndpointWeight * WeightScale
	}
	eps[0].weight = 10
	if div := fitWeights(eps); div != 2 {
		t.Errorf("divisor %d, want 2", div)
	}
	var sum uint64
	for _, ep := range eps {
		sum += uint64(ep.weight)
	}
	if sum > math.MaxUint32 || eps[0].weight != 5 || eps[1].weight != MaxEndpointWeight*WeightScale/2 {
		t.Errorf("sum %d, weights %d %d", sum, eps[0].weight, eps[1].weight)
	}
}

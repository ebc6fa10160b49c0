package healthcheck_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// hcCluster is a 3-node in-process cluster (registries replicating over
// replicationtest's network) with a checker on each node and a membership
// the test controls.
type hcCluster struct {
	t        *testing.T
	c        *replicationtest.Cluster
	members  []string
	checkers map[string]*healthcheck.Checker
	backends map[string]*backend // instance id → backend
}

func newHCCluster(t *testing.T, instances int, cfgFn func(*healthcheck.Config)) *hcCluster {
	t.Helper()
	names := []string{"n1", "n2", "n3"}
	h := &hcCluster{t: t, members: names, checkers: map[string]*healthcheck.Checker{}, backends: map[string]*backend{}}
	h.c = replicationtest.NewCluster(t, replicationtest.ClusterConfig{Seed: 1, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}, names...)
	for _, name := range names {
		cfg := testConfig(t, h.c.Clock.Now)
		if cfgFn != nil {
			cfgFn(&cfg)
		}
		chk, err := healthcheck.New(cfg, healthcheck.Options{
			Registry: h.c.Node(name).Reg, Self: name,
			Members: func() []string { return slices.Clone(h.members) },
		})
		if err != nil {
			t.Fatal(err)
		}
		h.checkers[name] = chk
	}
	for i := range instances {
		id := fmt.Sprintf("i-%d", i)
		b := newBackend(t)
		h.backends[id] = b
		h.c.MustApply(names[i%len(names)], registry.RegisterOp(b.instance("SVC", id)))
	}
	h.c.Settle(time.Minute)
	return h
}

// round moves the clock one interval and runs a round on every live node,
// then replicates; it checks that every instance was requested exactly
// once in the round, and returns the rounds' results.
func (h *hcCluster) round() map[string]healthcheck.RoundResult {
	h.t.Helper()
	h.c.Clock.Advance(10 * time.Second)
	before := map[string]int64{}
	for id, b := range h.backends {
		before[id] = b.requests.Load()
	}
	out := map[string]healthcheck.RoundResult{}
	for _, name := range h.members {
		out[name] = round(h.checkers[name])
	}
	for id, b := range h.backends {
		if got := b.requests.Load() - before[id]; got != 1 {
			h.t.Fatalf("instance %s requested %d times in one round, want exactly 1", id, got)
		}
	}
	h.c.Settle(time.Minute)
	return out
}

// status is the instance's status on every live node; it fails the test
// when the nodes disagree.
func (h *hcCluster) status(id string) registry.Status {
	h.t.Helper()
	var st registry.Status
	for _, name := range h.members {
		iv, ok := h.c.Node(name).Reg.Instance("SVC", id)
		if !ok {
			h.t.Fatalf("%s: instance %s missing", name, id)
		}
		if st != "" && iv.Status != st {
			h.t.Fatalf("nodes disagree on %s: %s has %s, another %s", id, name, iv.Status, st)
		}
		st = iv.Status
	}
	return st
}

func (h *hcCluster) owner(id string) string {
	return healthcheck.Owner(h.members, registry.InstanceKey{App: "SVC", ID: id})
}

func TestChecker_cluster_downOnEveryNodeAndBack(t *testing.T) {
	h := newHCCluster(t, 3, nil)
	h.backends["i-1"].healthy.Store(false)

	// failures-before-down is 3: UP after two failed rounds, DOWN on every
	// node after the third.
	for r := 1; r <= 2; r++ {
		h.round()
		if st := h.status("i-1"); st != registry.StatusUp {
			t.Fatalf("after %d failed rounds: %s, want UP", r, st)
		}
	}
	h.round()
	if st := h.status("i-1"); st != registry.StatusDown {
		t.Fatalf("after 3 failed rounds: %s, want DOWN on every node", st)
	}
	for _, id := range []string{"i-0", "i-2"} {
		if st := h.status(id); st != registry.StatusUp {
			t.Fatalf("healthy %s is %s", id, st)
		}
	}
	// Every node knows why, and who marked it.
	for _, name := range h.members {
		iv, _ := h.c.Node(name).Reg.Instance("SVC", "i-1")
		if iv.Health == nil || iv.Health.By != h.owner("i-1") || iv.Health.Reason != "http 503" {
			t.Fatalf("%s: mark %+v, want reason http 503 by %s", name, iv.Health, h.owner("i-1"))
		}
	}
	if snap := h.c.Node("n2").Reg.Snapshot(); snap.Hashcode != "DOWN_1_UP_2_" {
		t.Errorf("hashcode %q, want DOWN_1_UP_2_", snap.Hashcode)
	}
	rep, ok := h.checkers[h.owner("i-1")].Probe("SVC", "i-1")
	if !ok || rep.State != "down" || rep.LastResult != "http 503" {
		t.Errorf("owner's probe state %+v, want down with http 503", rep)
	}

	// Healthy again: still DOWN after one passed round, UP after two.
	h.backends["i-1"].healthy.Store(true)
	h.round()
	if st := h.status("i-1"); st != registry.StatusDown {
		t.Fatalf("after 1 passed round: %s, want DOWN (successes-before-up 2)", st)
	}
	h.round()
	if st := h.status("i-1"); st != registry.StatusUp {
		t.Fatalf("after 2 passed rounds: %s, want UP", st)
	}
	h.c.EnsureSame(t)
}

func TestChecker_cluster_operatorOverrideWins(t *testing.T) {
	h := newHCCluster(t, 3, nil)
	h.backends["i-2"].healthy.Store(false)
	for range 3 {
		h.round()
	}
	if st := h.status("i-2"); st != registry.StatusDown {
		t.Fatalf("marked instance is %s, want DOWN", st)
	}
	// The operator forces it UP on a node that does not probe it.
	var other string
	for _, n := range h.members {
		if n != h.owner("i-2") {
			other = n
			break
		}
	}
	h.c.MustApply(other, registry.StatusOp("SVC", "i-2", registry.StatusUp))
	h.c.Settle(time.Minute)
	h.round()
	if st := h.status("i-2"); st != registry.StatusUp {
		t.Fatalf("with an UP override: %s, want UP (the override wins)", st)
	}
	// OUT_OF_SERVICE stays OUT_OF_SERVICE too.
	h.c.MustApply(other, registry.StatusOp("SVC", "i-2", registry.StatusOutOfService))
	h.c.Settle(time.Minute)
	h.round()
	if st := h.status("i-2"); st != registry.StatusOutOfService {
		t.Fatalf("with an OUT_OF_SERVICE override: %s", st)
	}
	// The override removed (value=UP): the mark applies again.
	h.c.MustApply(other, registry.DeleteOverrideOp("SVC", "i-2", registry.StatusUp))
	h.c.Settle(time.Minute)
	if st := h.status("i-2"); st != registry.StatusDown {
		t.Fatalf("override removed: %s, want DOWN again", st)
	}
}

func TestChecker_cluster_killedProberHandsOver(t *testing.T) {
	h := newHCCluster(t, 6, nil)
	// A failing instance marked DOWN, and a healthy one, on the same
	// prober: that node is then killed.
	victim := h.owner("i-0")
	var healthyID string
	for id := range h.backends {
		if id != "i-0" && h.owner(id) == victim {
			healthyID = id
		}
	}
	h.backends["i-0"].healthy.Store(false)
	for range 3 {
		h.round()
	}
	if st := h.status("i-0"); st != registry.StatusDown {
		t.Fatalf("before the kill: %s, want DOWN", st)
	}

	h.c.Stop(victim)
	h.members = slices.DeleteFunc(slices.Clone(h.members), func(n string) bool { return n == victim })
	delete(h.checkers, victim)

	// The next round probes every instance exactly once (round checks it)
	// on the survivors: the victim's instances moved.
	res := h.round()
	probed := 0
	for _, r := range res {
		probed += r.Probed
	}
	if probed != len(h.backends) {
		t.Fatalf("survivors probed %d instances in the round after the kill, want %d", probed, len(h.backends))
	}
	if newOwner := h.owner("i-0"); newOwner == victim || res[newOwner].Verdicts[registry.InstanceKey{App: "SVC", ID: "i-0"}] {
		t.Fatalf("i-0: new owner %s, verdict healthy %v; want a survivor that keeps it down", newOwner, res[newOwner].Verdicts)
	}
	if st := h.status("i-0"); st != registry.StatusDown {
		t.Fatalf("after the takeover: %s, want still DOWN (the mark was taken over)", st)
	}
	if healthyID != "" && h.status(healthyID) != registry.StatusUp {
		t.Fatalf("healthy %s of the victim is %s", healthyID, h.status(healthyID))
	}
	// The new prober lifts it once it passes.
	h.backends["i-0"].healthy.Store(true)
	h.round()
	h.round()
	if st := h.status("i-0"); st != registry.StatusUp {
		t.Fatalf("passing under the new prober: %s, want UP", st)
	}
}

func TestChecker_cluster_guardHolds(t *testing.T) {
	h := newHCCluster(t, 4, nil)
	for _, id := range []string{"i-0", "i-1", "i-2"} {
		h.backends[id].healthy.Store(false)
	}
	guarded := false
	for range 6 {
		for _, r := range h.round() {
			guarded = guarded || slices.Contains(r.Guarded, "SVC")
		}
	}
	down := 0
	for id := range h.backends {
		if h.status(id) == registry.StatusDown {
			down++
		}
	}
	// 3 of 4 fail in the same round: more than 50 %, none is marked (the
	// app's one prober sees all of them).
	if down != 0 {
		t.Fatalf("%d of %d instances DOWN with 3 failing: the guard did not hold", down, len(h.backends))
	}
	if !guarded {
		t.Fatal("no node reported the guard for SVC")
	}
	// One recovers: 2 of 4 fail, not more than 50 %: those two go DOWN.
	h.backends["i-2"].healthy.Store(true)
	for range 3 {
		h.round()
	}
	for id, want := range map[string]registry.Status{"i-0": registry.StatusDown, "i-1": registry.StatusDown, "i-2": registry.StatusUp, "i-3": registry.StatusUp} {
		if st := h.status(id); st != want {
			t.Errorf("guard released: %s is %s, want %s", id, st, want)
		}
	}
}

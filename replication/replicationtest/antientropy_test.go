package replicationtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// The cases of issue 11's "Why": each loses a change the replication
// stream cannot bring back, then anti-entropy makes the nodes identical.

func newAECluster(t *testing.T, seed uint64, selfPreservation bool, names ...string) *replicationtest.Cluster {
	t.Helper()
	return replicationtest.NewCluster(t, replicationtest.ClusterConfig{
		Seed:        seed,
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Registry:    func(c *registry.Config) { c.SelfPreservation = selfPreservation },
		AntiEntropy: true,
	}, names...)
}

// converge runs anti-entropy rounds until every node holds the same
// registry (at most rounds of them) and fails the test otherwise.
func converge(t *testing.T, c *replicationtest.Cluster, rounds int) []replication.RoundResult {
	t.Helper()
	var all []replication.RoundResult
	for range rounds {
		all = append(all, c.AntiEntropyRound()...)
		if c.InSync() {
			c.EnsureSame(t)
			return all
		}
	}
	c.EnsureSame(t)
	t.Fatalf("root digests still differ after %d rounds", rounds)
	return nil
}

func repaired(rs []replication.RoundResult) replication.Repairs {
	var sum replication.Repairs
	for _, r := range rs {
		sum.Missing += r.Repaired.Missing
		sum.Stale += r.Repaired.Stale
		sum.Cancelled += r.Repaired.Cancelled
	}
	return sum
}

// cutBoth cuts the link between a and b both ways.
func cutBoth(c *replicationtest.Cluster, a, b string) {
	c.Net.Cut(a, b)
	c.Net.Cut(b, a)
}

// expireQueued lets queued tasks expire (max-time-for-replication, 30 s)
// while the link is down.
func expireQueued(c *replicationtest.Cluster) {
	c.Advance(31*time.Second, time.Second)
}

func TestAntiEntropy_overrideMadeWhileTheLinkWasDown(t *testing.T) {
	c := newAECluster(t, 1, false, "a", "b")
	k := key("APP", "i-1")
	c.MustApply("a", register(k.App, k.ID))
	c.Settle(time.Second)
	cutBoth(c, "a", "b")
	c.MustApply("a", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	expireQueued(c)
	if got := c.Node("a").Rep.Peers()[0].Drops.Expired; got == 0 {
		t.Fatal("the status task did not expire: the case is not reproduced")
	}
	c.Net.Heal()
	c.Settle(time.Second)
	if iv, _ := c.Node("b").Reg.Instance(k.App, k.ID); iv.Status != registry.StatusUp {
		t.Fatalf("b already %s before anti-entropy", iv.Status)
	}
	rs := converge(t, c, 1)
	if iv, _ := c.Node("b").Reg.Instance(k.App, k.ID); iv.Status != registry.StatusOutOfService {
		t.Fatalf("b: %s after anti-entropy", iv.Status)
	}
	if r := repaired(rs); r.Stale != 1 {
		t.Fatalf("repairs %+v, want 1 stale", r)
	}
	st := c.Node("b").AE.Stats()
	if len(st) != 1 || st[0].Repairs.Stale != 1 || st[0].Last.IsZero() {
		t.Fatalf("b's anti-entropy stats %+v", st)
	}
	// The next round finds both in sync, in one request each.
	for _, r := range c.AntiEntropyRound() {
		if !r.InSync || r.Requests != 1 || r.Divergent != 0 {
			t.Fatalf("round after convergence: %+v", r)
		}
	}
	// Cut off, the peer no longer shows in sync.
	cutBoth(c, "a", "b")
	c.AntiEntropyRound()
	if st := c.Node("b").AE.Stats(); st[0].InSync || st[0].LastError == "" {
		t.Fatalf("unreachable peer shows %+v", st[0])
	}
}

func TestAntiEntropy_droppedCancelWithSelfPreservation(t *testing.T) {
	c := newAECluster(t, 2, true, "a", "b")
	k := key("APP", "i-1")
	c.MustApply("a", register(k.App, k.ID))
	c.MustApply("a", register("APP", "i-2"))
	c.Settle(time.Second)
	cutBoth(c, "a", "b")
	c.MustApply("a", registry.CancelOp(k.App, k.ID))
	expireQueued(c)
	c.Net.Heal()
	c.Settle(time.Second)
	c.Node("b").Reg.EvictExpired() // self-preservation keeps the lease
	mustHaveOn(t, c, "b", k, true)
	rs := converge(t, c, 1)
	mustHave(t, c, k, false)
	if r := repaired(rs); r.Cancelled != 1 {
		t.Fatalf("repairs %+v, want 1 cancelled", r)
	}
}

func TestAntiEntropy_peerMarkedDeadAndBack(t *testing.T) {
	c := newAECluster(t, 3, false, "a", "b", "c")
	for i := range 6 {
		c.MustApply("a", register("APP", fmt.Sprint("i-", i)))
	}
	c.Settle(time.Second)
	// memberlist declares c dead on a and b: their senders and queues for c
	// are discarded, and c drops them.
	cutBoth(c, "a", "c")
	cutBoth(c, "b", "c")
	c.SetPeers("a", c.PeersExcept("a", "c"))
	c.SetPeers("b", c.PeersExcept("b", "c"))
	c.SetPeers("c", nil)
	c.MustApply("a", registry.StatusOp("APP", "i-0", registry.StatusOutOfService))
	c.MustApply("b", registry.CancelOp("APP", "i-1"))
	c.MustApply("a", registry.MetadataOp("APP", "i-2", map[string]string{"v": "2"}))
	c.MustApply("b", register("APP", "new-on-b"))
	c.MustApply("c", register("APP", "new-on-c"))
	c.MustApply("c", registry.StatusOp("APP", "i-3", registry.StatusDown))
	c.Settle(time.Second)
	// c comes back: every node runs a round with it at once.
	c.Net.Heal()
	c.FullyConnect()
	if !c.InSync() {
		c.EnsureSame(t)
		t.Fatal("not in sync right after the peer came back")
	}
	c.EnsureSame(t)
	mustHave(t, c, key("APP", "i-1"), false)
	mustHave(t, c, key("APP", "new-on-c"), true)
	if iv, _ := c.Node("c").Reg.Instance("APP", "i-0"); iv.Status != registry.StatusOutOfService {
		t.Fatalf("c: i-0 %s", iv.Status)
	}
}

func TestAntiEntropy_batchDroppedByANon503Answer(t *testing.T) {
	c := newAECluster(t, 4, false, "a", "b")
	c.MustApply("a", register("APP", "i-1"))
	c.Settle(time.Second)
	c.Net.FailNext("a", "b", 500)
	c.MustApply("a", registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
	c.MustApply("a", register("APP", "i-2"))
	c.Settle(time.Second)
	if c.Node("a").Rep.Peers()[0].Drops.Permanent == 0 {
		t.Fatal("the batch was not dropped: the case is not reproduced")
	}
	mustHaveOn(t, c, "b", key("APP", "i-2"), false)
	rs := converge(t, c, 1)
	if r := repaired(rs); r.Missing != 1 || r.Stale != 1 {
		t.Fatalf("repairs %+v, want 1 missing and 1 stale", r)
	}
}

func TestAntiEntropy_lateJoinerMissingAChange(t *testing.T) {
	c := newAECluster(t, 5, false, "a")
	c.MustApply("a", register("APP", "before"))
	// b syncs up from a, but a does not list b yet (memberlist and the
	// replicator's peer list are updated apart).
	c.Join("b")
	c.MustApply("a", register("APP", "between"))
	c.MustApply("a", registry.StatusOp("APP", "before", registry.StatusOutOfService))
	c.Settle(time.Second)
	mustHaveOn(t, c, "b", key("APP", "between"), false)
	c.FullyConnect() // the round with the new peer repairs it at once
	c.EnsureSame(t)
}

func TestAntiEntropy_nodesThatOpenedAloneMergeWhenTheyMeet(t *testing.T) {
	c := newAECluster(t, 6, false, "a")
	c.MustApply("a", register("APP", "on-a"))
	c.Net.Partition([]string{"a"}, []string{"b"})
	c.Join("b") // reaches no one: opens alone
	c.MustApply("b", register("APP", "on-b"))
	c.Net.Heal()
	c.FullyConnect()
	c.EnsureSame(t)
	mustHave(t, c, key("APP", "on-a"), true)
	mustHave(t, c, key("APP", "on-b"), true)
}

// A write made more than the clock skew after another wins, whichever
// node's clock is ahead: one node off by ±5 s and writes 5.1 s apart, or
// both off in opposite directions (10 s between them) and writes 10.1 s
// apart.
func TestAntiEntropy_clockSkewDoesNotLetAnOlderWriteWin(t *testing.T) {
	for _, tc := range []struct {
		skewA, skewB, gap time.Duration
	}{
		{5 * time.Second, 0, 5100 * time.Millisecond},
		{-5 * time.Second, 0, 5100 * time.Millisecond},
		{5 * time.Second, -5 * time.Second, 10100 * time.Millisecond},
		{-5 * time.Second, 5 * time.Second, 10100 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("a %s b %s", tc.skewA, tc.skewB), func(t *testing.T) {
			c := newAECluster(t, 7, false, "a", "b")
			c.SetSkew("a", tc.skewA)
			c.SetSkew("b", tc.skewB)
			c.MustApply("a", register("APP", "i-1"))
			c.Settle(time.Second)
			cutBoth(c, "a", "b")
			// The node whose clock is ahead writes first, the other later.
			first, second := "a", "b"
			if tc.skewA < tc.skewB {
				first, second = "b", "a"
			}
			c.MustApply(first, registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
			c.Clock.Advance(tc.gap)
			c.MustApply(second, registry.StatusOp("APP", "i-1", registry.StatusDown))
			c.Net.Heal()
			c.Settle(time.Minute)
			converge(t, c, 2)
			if iv, _ := c.Node(first).Reg.Instance("APP", "i-1"); iv.Status != registry.StatusDown {
				t.Fatalf("%s: %s, want the later write's DOWN", first, iv.Status)
			}
		})
	}
}

// An instance that expired on every node is not brought back by a node
// that still holds it (self-preservation), and one renewing through
// another node is never removed.
func TestAntiEntropy_evictionsStayLocal(t *testing.T) {
	c := newAECluster(t, 8, false, "a", "b")
	c.MustApply("a", register("APP", "dead"))
	c.MustApply("a", register("APP", "alive"))
	c.Settle(time.Second)
	cutBoth(c, "a", "b")
	// alive renews through b only; nobody renews dead.
	for range 10 {
		c.Advance(10*time.Second, time.Second)
		c.Heartbeats("b", []registry.InstanceKey{key("APP", "alive")})
	}
	c.Node("a").Reg.EvictExpired() // a evicts both: no renewals reach it
	mustHaveOn(t, c, "a", key("APP", "alive"), false)
	mustHaveOn(t, c, "b", key("APP", "dead"), true) // b has not run eviction yet
	c.Net.Heal()
	c.AntiEntropyRound()
	c.AntiEntropyRound()
	mustHaveOn(t, c, "a", key("APP", "dead"), false)
	mustHaveOn(t, c, "a", key("APP", "alive"), true)
	mustHaveOn(t, c, "b", key("APP", "alive"), true)
	c.Node("b").Reg.EvictExpired()
	converge(t, c, 1)
	mustHave(t, c, key("APP", "dead"), false)
}

func mustHaveOn(t *testing.T, c *replicationtest.Cluster, node string, k registry.InstanceKey, want bool) {
	t.Helper()
	if _, ok := c.Node(node).Reg.Instance(k.App, k.ID); ok != want {
		t.Fatalf("node %s: has %s = %v, want %v", node, k, ok, want)
	}
}

// A static peer (not known to be a Muster node) gets Eureka's plain items;
// once it has served anti-entropy, its batches carry versions.
func TestAntiEntropy_staticMusterPeerGetsVersionsOnceKnown(t *testing.T) {
	c := newCluster(t, 9, "a", "b") // no anti-entropy round unless asked
	static := c.PeersExcept("a")
	static[0].Muster = false
	c.Node("a").Rep.SetPeers(static)
	c.MustApply("a", register("APP", "i-1"))
	c.Settle(time.Second)
	if iv, _ := c.Node("b").Reg.Instance("APP", "i-1"); iv.WriteVersion != 0 {
		t.Fatalf("plain Eureka items carried version %d", iv.WriteVersion)
	}
	c.Node("a").AE.RoundAll(context.Background()) // b serves anti-entropy: a Muster node
	stored := c.MustApply("a", registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
	c.Settle(time.Second)
	if iv, _ := c.Node("b").Reg.Instance("APP", "i-1"); iv.WriteVersion != stored.WriteVersion {
		t.Fatalf("b holds version %d, a wrote %d", iv.WriteVersion, stored.WriteVersion)
	}
}

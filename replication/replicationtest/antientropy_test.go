package replicationtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
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

// Inside a large app anti-entropy narrows to buckets of instance ids:
// repairing one instance of a 20,000-instance app exchanges a small part
// of what the app's whole entries would take, and repairs it all the
// same: a stale copy, a missing one and a cancel, in three buckets.
func TestAntiEntropy_largeAppNarrowsToBuckets(t *testing.T) {
	const n = 20_000
	c := newAECluster(t, 10, false, "a")
	for i := range n {
		c.MustApply("a", register("BIG", fmt.Sprint("i-", i)))
	}
	c.MustApply("a", register("SMALL", "s-1"))
	c.Start("b") // copies a's registry
	c.Settle(time.Minute)
	if !c.InSync() {
		t.Fatal("not in sync before the cut")
	}
	whole, err := json.Marshal(wire.DigestReply{Entries: map[string][]wire.DigestEntry{"BIG": entriesOf(c.Node("a").Reg, "BIG")}})
	if err != nil {
		t.Fatal(err)
	}

	cutBoth(c, "a", "b")
	c.MustApply("a", registry.StatusOp("BIG", "i-17", registry.StatusOutOfService))
	before := c.Net.Stats().AntiEntropyBytes
	c.Net.Heal()
	rs := c.Node("b").AE.Round(context.Background(), replication.Peer{Name: "a", URL: "mem://a/eureka/", Muster: true})
	if rs.Err != nil || rs.Repaired != (replication.Repairs{Stale: 1}) {
		t.Fatalf("round: %+v", rs)
	}
	one := c.Net.Stats().AntiEntropyBytes - before
	t.Logf("repairing 1 instance of %d: %d bytes exchanged; the app's whole entries are %d bytes", n, one, len(whole))
	if one*20 > uint64(len(whole)) {
		t.Fatalf("repairing one instance exchanged %d bytes, over 1/20 of the app's entries (%d bytes)", one, len(whole))
	}
	c.EnsureSame(t)

	// A missing copy, a cancel and a stale copy at once, both ways.
	cutBoth(c, "a", "b")
	c.MustApply("a", register("BIG", "new-on-a"))
	c.MustApply("b", registry.CancelOp("BIG", "i-5"))
	c.MustApply("b", registry.MetadataOp("BIG", "i-9000", map[string]string{"k": "v"}))
	c.Net.Heal()
	converge(t, c, 2)
	mustHave(t, c, key("BIG", "new-on-a"), true)
	mustHave(t, c, key("BIG", "i-5"), false)
}

func entriesOf(r *registry.Registry, app string) []wire.DigestEntry {
	var out []wire.DigestEntry
	for _, e := range r.AppEntries(app, nil) {
		out = append(out, wire.DigestEntry{ID: e.ID, Version: e.Version, Digest: e.Digest, Live: e.Live, Tombstone: e.Tombstone})
	}
	return out
}

// oldPeer is a transport to peers that know nothing of buckets: they
// ignore the fields (as encoding/json does with unknown ones) and answer
// without them.
type oldPeer struct{ replication.Transport }

func (o oldPeer) Digest(ctx context.Context, p replication.Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	req.Buckets, req.Only = nil, nil
	reply, err := o.Transport.Digest(ctx, p, req)
	reply.Sizes, reply.BucketDigests = nil, nil
	return reply, err
}

// A peer that answers no bucket digests gets large apps compared whole:
// more bytes, the same repairs.
func TestAntiEntropy_largeAppWithAPeerWithoutBuckets(t *testing.T) {
	c := newAECluster(t, 11, false, "a")
	for i := range 600 {
		c.MustApply("a", register("BIG", fmt.Sprint("i-", i)))
	}
	c.Start("b")
	c.Settle(time.Minute)
	cutBoth(c, "a", "b")
	c.MustApply("a", registry.StatusOp("BIG", "i-17", registry.StatusOutOfService))
	c.MustApply("a", registry.CancelOp("BIG", "i-18"))
	c.MustApply("a", register("BIG", "new"))
	c.Net.Heal()
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: c.Node("b").Reg, Transport: oldPeer{c.Net.From("b")},
		Peers: func() []replication.Peer { return c.PeersExcept("b") },
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := ae.Round(context.Background(), c.PeersExcept("b")[0])
	if rs.Err != nil || rs.Repaired != (replication.Repairs{Missing: 1, Stale: 1, Cancelled: 1}) {
		t.Fatalf("round: %+v", rs)
	}
	if !c.InSync() {
		t.Fatal("not in sync after the round")
	}
}

// countingPeer records the largest number of entries one answer held.
type countingPeer struct {
	replication.Transport
	most *int
}

func (cp countingPeer) Digest(ctx context.Context, p replication.Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	reply, err := cp.Transport.Digest(ctx, p, req)
	n := 0
	for _, es := range reply.Entries {
		n += len(es)
	}
	*cp.most = max(*cp.most, n)
	return reply, err
}

// A large app that differs everywhere (a node that lost it) is asked for
// in several answers of about MaxEntries entries, not one unbounded one.
func TestAntiEntropy_largeAppAnswersAreBounded(t *testing.T) {
	c := newAECluster(t, 12, false, "a", "b")
	cutBoth(c, "a", "b")
	for i := range 2000 {
		c.MustApply("a", register("BIG", fmt.Sprint("i-", i)))
	}
	c.Net.Heal()
	most := 0
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: c.Node("b").Reg, Transport: countingPeer{c.Net.From("b"), &most},
		Peers: func() []replication.Peer { return c.PeersExcept("b") }, MaxEntries: 300,
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := ae.Round(context.Background(), c.PeersExcept("b")[0])
	if rs.Err != nil || rs.Repaired.Missing != 2000 {
		t.Fatalf("round: %+v", rs)
	}
	if most > 450 || rs.Requests < 2+2000/450 {
		t.Fatalf("largest answer %d entries in %d requests, want about 300 each", most, rs.Requests)
	}
	if c.Node("a").Reg.RootDigest() != c.Node("b").Reg.RootDigest() {
		t.Fatal("not in sync after the round")
	}
}

// A tombstone goes everywhere once its time is up: anti-entropy does not
// hand it back and forth between nodes that prune at different moments
// (each copy taken from a peer with a fresh lifetime would outlive the
// one it came from, for good).
func TestAntiEntropy_tombstonesExpireEverywhere(t *testing.T) {
	c := newAECluster(t, 13, false, "a", "b", "c")
	c.MustApply("a", register("APP", "i-1"))
	c.MustApply("a", register("APP", "keep")) // so the app digests differ from empty
	c.Settle(time.Minute)
	cutBoth(c, "a", "c")
	c.MustApply("a", registry.CancelOp("APP", "i-1")) // reaches b by replication, c by anti-entropy
	c.Settle(time.Second)
	c.Net.Heal()
	for s := 10; s <= 30*60; s += 10 {
		c.Clock.Advance(10 * time.Second)
		c.Heartbeats("a", []registry.InstanceKey{key("APP", "keep")})
		c.AntiEntropyRound()
		for i, name := range []string{"a", "b", "c"} {
			if s%60 == 20*i {
				c.Node(name).Reg.EvictExpired()
			}
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		if st := c.Node(name).Reg.Tombstones(); st.Kept != 0 {
			t.Errorf("%s still keeps %d tombstones 30 min after a 90 s lease's cancel", name, st.Kept)
		}
	}
}

// smallAnswers is a transport to a peer whose copies answers are over the
// bound when they hold more than max copies (instances with large
// metadata).
type smallAnswers struct {
	replication.Transport
	max int
}

func (s smallAnswers) Copies(ctx context.Context, p replication.Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	if len(keys) > s.max {
		return nil, fmt.Errorf("copies answer: %w", replication.ErrAnswerTooLarge)
	}
	return s.Transport.Copies(ctx, p, keys)
}

// Copies whose answer would be too large are asked for fewer at a time,
// instead of failing every round.
func TestAntiEntropy_tooLargeCopiesAnswerIsSplit(t *testing.T) {
	c := newAECluster(t, 14, false, "a", "b")
	cutBoth(c, "a", "b")
	for i := range 700 {
		c.MustApply("a", register(fmt.Sprint("APP-", i%7), fmt.Sprint("i-", i)))
	}
	c.Net.Heal()
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: c.Node("b").Reg, Transport: smallAnswers{c.Net.From("b"), 40},
		Peers: func() []replication.Peer { return c.PeersExcept("b") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rs := ae.Round(context.Background(), c.PeersExcept("b")[0]); rs.Err != nil || rs.Repaired.Missing != 700 {
		t.Fatalf("round: %+v", rs)
	}
}

// inflatedSizes is a peer that reports absurd app sizes.
type inflatedSizes struct{ replication.Transport }

func (s inflatedSizes) Digest(ctx context.Context, p replication.Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	reply, err := s.Transport.Digest(ctx, p, req)
	for app := range reply.AppDigests {
		if reply.Sizes == nil {
			reply.Sizes = map[string]int{}
		}
		reply.Sizes[app] = 1 << 50
	}
	return reply, err
}

// A peer's app sizes only steer how finely the app is compared: absurd
// ones cost a few requests more, never thousands.
func TestAntiEntropy_absurdSizesStayBounded(t *testing.T) {
	c := newAECluster(t, 15, false, "a", "b")
	cutBoth(c, "a", "b")
	for i := range 50 {
		c.MustApply("a", register("APP", fmt.Sprint("i-", i)))
	}
	c.Net.Heal()
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: c.Node("b").Reg, Transport: inflatedSizes{c.Net.From("b")},
		Peers: func() []replication.Peer { return c.PeersExcept("b") },
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := ae.Round(context.Background(), c.PeersExcept("b")[0])
	if rs.Err != nil || rs.Repaired.Missing != 50 || rs.Requests > 20 {
		t.Fatalf("round: %+v", rs)
	}
}

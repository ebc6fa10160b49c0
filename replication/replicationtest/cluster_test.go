package replicationtest_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

var seeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

func newCluster(t *testing.T, seed uint64, names ...string) *replicationtest.Cluster {
	t.Helper()
	return replicationtest.NewCluster(t, replicationtest.ClusterConfig{
		Seed:     seed,
		Logger:   zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Registry: func(c *registry.Config) { c.SelfPreservation = false },
	}, names...)
}

func key(app, id string) registry.InstanceKey { return registry.InstanceKey{App: app, ID: id} }

func register(app, id string, opts ...registrytest.Option) registry.Op {
	return registry.RegisterOp(registrytest.NewInstance(app, id, opts...))
}

func mustHave(t *testing.T, c *replicationtest.Cluster, k registry.InstanceKey, want bool) {
	t.Helper()
	for _, name := range c.Names() {
		if _, ok := c.Node(name).Reg.Instance(k.App, k.ID); ok != want {
			t.Fatalf("node %s: has %s = %v, want %v", name, k, ok, want)
		}
	}
}

// Registers, heartbeats, cancels, status changes, override removals and
// metadata made on any node reach every node, and heartbeats sent to one
// node keep the leases alive everywhere.
func TestCluster_replicatesEveryWrite(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			rnd := rand.New(rand.NewPCG(seed, 0))
			var keys []registry.InstanceKey
			for i := range 60 {
				node := c.Names()[rnd.IntN(3)]
				k := key(fmt.Sprint("APP-", i%4), fmt.Sprint("i-", i))
				c.MustApply(node, register(k.App, k.ID))
				keys = append(keys, k)
			}
			c.Settle(time.Second)
			c.EnsureSame(t)
			if n := c.Node("c").Reg.Len(); n != 60 {
				t.Fatalf("c holds %d, want 60", n)
			}

			c.MustApply("b", registry.CancelOp(keys[0].App, keys[0].ID))
			c.MustApply("c", registry.StatusOp(keys[1].App, keys[1].ID, registry.StatusOutOfService))
			c.MustApply("a", registry.StatusOp(keys[2].App, keys[2].ID, registry.StatusDown))
			// Conflicting writes to one instance on two nodes at once have no
			// order on Eureka's wire; an operator's next write goes after the
			// first has spread.
			c.Settle(time.Second)
			c.MustApply("b", registry.DeleteOverrideOp(keys[2].App, keys[2].ID, registry.StatusUp))
			c.MustApply("a", registry.MetadataOp(keys[3].App, keys[3].ID, map[string]string{"version": "2"}))
			c.Settle(time.Second)
			c.EnsureSame(t)
			mustHave(t, c, keys[0], false)
			if iv, _ := c.Node("a").Reg.Instance(keys[1].App, keys[1].ID); iv.Status != registry.StatusOutOfService {
				t.Fatalf("status on a: %s", iv.Status)
			}
			if iv, _ := c.Node("c").Reg.Instance(keys[3].App, keys[3].ID); func() string { v, _ := iv.Metadata.Get("version"); return v }() != "2" {
				t.Fatalf("metadata on c: %v", iv.Metadata)
			}

			// Two lease durations of heartbeats, all to a: nobody evicts.
			for range 6 {
				c.Advance(30*time.Second, time.Second)
				c.Heartbeats("a", keys[1:])
				c.Settle(time.Second)
			}
			for _, name := range c.Names() {
				if ev := c.Node(name).Reg.EvictExpired(); len(ev) != 0 {
					t.Fatalf("%s evicted %v: heartbeats did not reach it", name, ev)
				}
			}
			c.EnsureSame(t)
		})
	}
}

// A peer that lost an instance answers the heartbeat 404 and gets a
// Register; a peer with a newer copy answers 409 and the sender adopts it.
func TestCluster_404And409Repair(t *testing.T) {
	c := newCluster(t, 1, "a", "b")
	c.Net.Cut("a", "b")
	c.MustApply("a", register("WEB", "w1", registrytest.WithDirty(100)))
	c.Flush()
	if _, ok := c.Node("b").Reg.Instance("WEB", "w1"); ok {
		t.Fatal("b got w1 over a cut link")
	}
	c.Net.Heal()
	c.Advance(10*time.Second, 100*time.Millisecond) // the register's retries run out of backoff… or expire
	c.MustApply("a", registry.RenewOp("WEB", "w1"))
	c.Settle(time.Second)
	c.EnsureSame(t)
	if st := c.Node("a").Rep.Totals(); st.Reregistered+st.ItemsSent == 0 {
		t.Fatalf("nothing sent: %+v", st)
	}

	// b takes a newer registration a cannot hear of; a's next heartbeat
	// carries the older lastDirtyTimestamp and gets b's copy back.
	c.Net.Cut("b", "a")
	c.MustApply("b", register("WEB", "w1", registrytest.WithDirty(200), registrytest.WithVIP("web-v2")))
	c.MustApply("a", registry.RenewOp("WEB", "w1"))
	c.Settle(time.Second)
	if st := c.Node("a").Rep.Totals(); st.Adopted != 1 {
		t.Fatalf("a adopted %d copies, want 1", st.Adopted)
	}
	c.EnsureSame(t)
	if iv, _ := c.Node("a").Reg.Instance("WEB", "w1"); iv.VIPAddress != "web-v2" || iv.LastDirtyTimestamp != 200 {
		t.Fatalf("a holds %s / %d, want b's newer copy", iv.VIPAddress, iv.LastDirtyTimestamp)
	}
}

// A node that restarts copies the registry from a peer while the others
// keep changing it: cancels, status changes and registrations that race
// the copy all end up on the restarted node, and nothing cancelled comes
// back.
func TestCluster_restartSyncsUpDuringLiveChanges(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			for i := range 30 {
				c.MustApply([]string{"a", "b"}[i%2], register("ORDERS", fmt.Sprint("o-", i)))
			}
			c.Settle(time.Second)
			c.Stop("c")
			for i := range 10 {
				c.MustApply("a", registry.CancelOp("ORDERS", fmt.Sprint("o-", i)))
				c.MustApply("b", register("BILLING", fmt.Sprint("b-", i)))
			}
			c.MustApply("a", registry.StatusOp("ORDERS", "o-20", registry.StatusDown))
			c.Settle(time.Second)

			// While c copies, b cancels one instance the copy holds, sets a
			// status on another, and a registers a new one; the peers send
			// all of it to c before c applies its copy.
			c.Net.OnFetch(func(from, to string) {
				c.MustApply("b", registry.CancelOp("ORDERS", "o-25"))
				c.MustApply("a", registry.StatusOp("ORDERS", "o-26", registry.StatusOutOfService))
				c.MustApply("a", register("ORDERS", "late"))
				c.Flush()
			})
			restarted := c.Start("c")
			c.Net.OnFetch(nil)
			if !restarted.Sync.Reached || restarted.Sync.Instances == 0 {
				t.Fatalf("syncUp: %+v", restarted.Sync)
			}
			c.Settle(2 * time.Second)
			c.EnsureSame(t)
			mustHave(t, c, key("ORDERS", "o-25"), false)
			mustHave(t, c, key("ORDERS", "late"), true)
			if n := restarted.Reg.Len(); n != 30-10-1+10+1 {
				t.Fatalf("restarted node holds %d, want 30", n)
			}
			if iv, _ := restarted.Reg.Instance("ORDERS", "o-26"); iv.Status != registry.StatusOutOfService {
				t.Fatalf("o-26 on the restarted node: %s", iv.Status)
			}
		})
	}
}

// A node the others learn of late (membership reached one node before the
// replicators' peer lists) misses the changes made in between; its peers'
// new senders catch it up.
func TestCluster_lateJoinCatchesUp(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "seed")
			c.MustApply("seed", register("WEB", "before"))
			c.Flush()
			c.Join("late") // copies "before"
			c.MustApply("seed", register("WEB", "between"))
			c.Flush() // seed's replicator does not know late yet: nothing goes there
			if _, ok := c.Node("late").Reg.Instance("WEB", "between"); ok {
				t.Fatal("late got a change before anyone knew it")
			}
			c.FullyConnect()
			c.Settle(time.Second)
			c.EnsureSame(t)
			mustHave(t, c, key("WEB", "between"), true)
			if st := c.Node("seed").Rep.Totals(); st.CatchUps == 0 || st.Reregistered == 0 {
				t.Fatalf("seed's totals %+v: want a catch-up that re-registered", st)
			}
		})
	}
}

// The catch-up asks the live leases whether an instance is alive, not the
// snapshot: an app that has not changed for minutes keeps the renewal
// times of its last change in snapshots, but its heartbeating instances
// are alive and must be caught up.
func TestCluster_lateJoinCatchesUpQuietApps(t *testing.T) {
	c := newCluster(t, seeds[0], "seed")
	c.MustApply("seed", register("WEB", "before"))
	c.Flush()
	c.Join("late")
	c.MustApply("seed", register("WEB", "between"))
	c.Flush()
	_ = c.Node("seed").Reg.Snapshot() // views taken now
	keys := []registry.InstanceKey{key("WEB", "before"), key("WEB", "between")}
	for range 8 { // 4 minutes of heartbeats and nothing else
		c.Advance(30*time.Second, 30*time.Second)
		c.Heartbeats("seed", keys)
		c.Heartbeats("late", keys[:1])
	}
	c.FullyConnect()
	c.Settle(time.Second)
	mustHave(t, c, key("WEB", "between"), true)
	if st := c.Node("seed").Rep.Totals(); st.CatchUps < 2 {
		t.Fatalf("seed's totals %+v: want a catch-up heartbeat for both live instances", st)
	}
}

// A node that was cut off long enough to be dropped from its peers' lists
// comes back holding an instance that was cancelled meanwhile. The
// catch-ups on both sides replay only what clients renew through each node,
// so its stale copy is not registered again on the nodes that saw the
// cancel; an instance whose client registered through it meanwhile does
// reach them. (The stale copy itself is left to its lease: anti-entropy.)
func TestCluster_returningPeerDoesNotResurrectCancels(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			gone, kept := key("WEB", "gone"), key("WEB", "kept")
			c.MustApply("a", register(gone.App, gone.ID))
			c.MustApply("a", register(kept.App, kept.ID))
			c.Settle(time.Second)
			c.Heartbeats("a", []registry.InstanceKey{gone, kept})
			c.Settle(time.Second)

			// c is cut off and, as memberlist would, dropped by both sides.
			c.Net.Partition([]string{"a", "b"}, []string{"c"})
			without := func(self string) []replication.Peer {
				var out []replication.Peer
				for _, n := range []string{"a", "b", "c"} {
					if n != self && (self == "c") == (n == "c") {
						out = append(out, replication.Peer{Name: n, URL: "mem://" + n + "/eureka/", Zone: "default"})
					}
				}
				return out
			}
			for _, n := range []string{"a", "b", "c"} {
				c.Node(n).Rep.SetPeers(without(n))
			}
			c.MustApply("a", registry.CancelOp(gone.App, gone.ID))
			c.MustApply("c", register("WEB", "new-on-c"))
			c.Advance(10*time.Second, time.Second)
			c.Heartbeats("a", []registry.InstanceKey{kept})
			c.Settle(time.Second)
			if _, ok := c.Node("c").Reg.Instance(gone.App, gone.ID); !ok {
				t.Fatal("c heard of the cancel across the partition")
			}

			c.Net.Heal()
			c.FullyConnect() // new senders everywhere: each catches up
			c.Settle(10 * time.Second)
			for _, n := range []string{"a", "b"} {
				if _, ok := c.Node(n).Reg.Instance(gone.App, gone.ID); ok {
					t.Fatalf("node %s: the cancelled instance came back from c's catch-up", n)
				}
				if _, ok := c.Node(n).Reg.Instance("WEB", "new-on-c"); !ok {
					t.Fatalf("node %s: lacks the instance registered through c", n)
				}
			}
			mustHave(t, c, kept, true)
		})
	}
}

// A partitioned node misses changes; after the partition heals, queued
// changes (still young enough) and heartbeats bring it back in line.
func TestCluster_partitionHeals(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			c.MustApply("a", register("WEB", "w1"))
			c.MustApply("a", register("WEB", "w2"))
			c.Settle(time.Second)
			c.Net.Partition([]string{"a", "b"}, []string{"c"})
			c.MustApply("a", registry.CancelOp("WEB", "w1"))
			c.MustApply("b", register("WEB", "w3"))
			c.MustApply("c", registry.StatusOp("WEB", "w2", registry.StatusOutOfService))
			c.Settle(time.Second) // settles a and b; c's link is down
			if _, ok := c.Node("c").Reg.Instance("WEB", "w1"); !ok {
				t.Fatal("c heard of a cancel across the partition")
			}
			c.Advance(3*time.Second, 100*time.Millisecond)
			c.Net.Heal()
			c.Settle(10 * time.Second)
			c.EnsureSame(t)
			mustHave(t, c, key("WEB", "w1"), false)
			mustHave(t, c, key("WEB", "w3"), true)
		})
	}
}

// Lost and duplicated batches do not change the outcome: the senders retry
// until every write has landed, and applying one twice is harmless.
func TestCluster_dropsAndDuplicatesConverge(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			c.Net.SetFaults(replicationtest.Faults{Drop: 0.3, Duplicate: 0.3})
			runRandomOps(t, c, seed, 200, true)
			c.Settle(20 * time.Second)
			c.EnsureSame(t)
			if st := c.Net.Stats(); st.Dropped == 0 || st.Duplicated == 0 {
				t.Fatalf("network stats %+v: the faults did not happen", st)
			}
		})
	}
}

// Delayed (stale) and reordered batches can resurrect a cancelled instance
// on a peer: Eureka's wire has no write versions (the convergence work
// adds them). What it does guarantee is that such leftovers expire: no
// client renews them, so after a lease and an eviction run every node
// holds the same live registry again.
func TestCluster_delaysAndReorderConvergeByLeaseExpiry(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			c := newCluster(t, seed, "a", "b", "c")
			c.Net.SetFaults(replicationtest.Faults{Delay: 0.3, MaxDelay: 2 * time.Second, Reorder: 0.5, Duplicate: 0.1})
			live := runRandomOps(t, c, seed, 200, false)
			c.Settle(20 * time.Second)
			c.Net.SetFaults(replicationtest.Faults{})
			// Clients of live instances keep renewing on their home node;
			// after two leases every node evicts what nobody renews.
			for range 7 {
				c.Advance(30*time.Second, 5*time.Second)
				for k, home := range live {
					c.MustApply(home, registry.RenewOp(k.App, k.ID))
				}
				c.Settle(10 * time.Second)
			}
			for _, name := range c.Names() {
				c.Node(name).Reg.EvictExpired()
			}
			c.EnsureSame(t)
			for _, name := range c.Names() {
				if n := c.Node(name).Reg.Len(); n != len(live) {
					t.Fatalf("%s holds %d, want the %d live instances", name, n, len(live))
				}
			}
			if st := c.Net.Stats(); st.Delayed == 0 || st.Reordered == 0 {
				t.Fatalf("network stats %+v: the faults did not happen", st)
			}
		})
	}
}

// runRandomOps makes n client writes on random nodes, flushing now and
// then, and returns the instances left registered with the node their
// client talks to. Status writes are only made when statuses is true.
func runRandomOps(t *testing.T, c *replicationtest.Cluster, seed uint64, n int, statuses bool) map[registry.InstanceKey]string {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 1))
	live := map[registry.InstanceKey]string{}
	var keys []registry.InstanceKey
	names := c.Names()
	for i := range n {
		node := names[rnd.IntN(len(names))]
		switch r := rnd.IntN(10); {
		case r < 5 || len(keys) == 0:
			k := key("APP", fmt.Sprint("i-", i))
			c.MustApply(node, register(k.App, k.ID))
			keys = append(keys, k)
			live[k] = node
		case r < 7:
			k := keys[rnd.IntN(len(keys))]
			if home, ok := live[k]; ok {
				c.MustApply(home, registry.CancelOp(k.App, k.ID))
				delete(live, k)
			}
		case r < 9 || !statuses:
			k := keys[rnd.IntN(len(keys))]
			if home, ok := live[k]; ok {
				c.MustApply(home, registry.RenewOp(k.App, k.ID))
			}
		default:
			k := keys[rnd.IntN(len(keys))]
			if home, ok := live[k]; ok {
				st := []registry.Status{registry.StatusOutOfService, registry.StatusUp, registry.StatusDown}[rnd.IntN(3)]
				c.MustApply(home, registry.StatusOp(k.App, k.ID, st))
			}
		}
		if rnd.IntN(8) == 0 {
			c.Flush()
		}
		c.Clock.Advance(time.Duration(rnd.IntN(20)) * time.Millisecond)
	}
	return live
}

// The same seed gives the same run: the same faults, the same registries.
func TestCluster_seedReplays(t *testing.T) {
	run := func() (replicationtest.NetworkStats, *replicationtest.Cluster) {
		c := newCluster(t, 42, "a", "b", "c")
		c.Net.SetFaults(replicationtest.Faults{Drop: 0.2, Duplicate: 0.2, Delay: 0.2, MaxDelay: time.Second, Reorder: 0.2})
		runRandomOps(t, c, 42, 150, true)
		c.Settle(20 * time.Second)
		return c.Net.Stats(), c
	}
	s1, c1 := run()
	s2, c2 := run()
	if s1 != s2 {
		t.Fatalf("network stats differ between runs of one seed:\n%+v\n%+v", s1, s2)
	}
	for _, name := range c1.Names() {
		if d := replicationtest.Diff(c1.Node(name).Reg, c2.Node(name).Reg); len(d) > 0 {
			t.Fatalf("node %s differs between runs: %v", name, d)
		}
	}
}

var _ replication.Transport = replicationtest.NewNetwork(registrytest.NewClock(), 0).From("x")

// A replicator that falls further behind the registry's change stream than
// the stream keeps is told so, and re-sends every instance: the peers end
// up with everything, never with a silent gap.
func TestCluster_replicatorBehindTheStreamResyncs(t *testing.T) {
	c := replicationtest.NewCluster(t, replicationtest.ClusterConfig{
		Seed:     1,
		Logger:   zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
		Registry: func(c *registry.Config) { c.OutboxSize = 8 },
	}, "a", "b")
	for i := range 20 { // more changes than the stream keeps, with nobody reading
		c.MustApply("a", register("APP", fmt.Sprint("i-", i)))
	}
	c.MustApply("a", registry.CancelOp("APP", "i-3"))
	c.Settle(time.Second)
	c.EnsureSame(t)
	if st := c.Node("a").Rep.Totals(); st.Resyncs != 1 {
		t.Fatalf("Resyncs = %d, want 1", st.Resyncs)
	}
	if n := c.Node("b").Reg.Len(); n != 19 {
		t.Fatalf("b holds %d, want 19", n)
	}
}

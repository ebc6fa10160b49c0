package replicationtest_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// writeSnapshot writes node's registry and tombstones to dir, as
// cmd/muster does periodically and on shutdown.
func writeSnapshot(t *testing.T, c *replicationtest.Cluster, node, dir string) {
	t.Helper()
	n := c.Node(node)
	if _, err := persist.Write(dir, "test", node, n.Reg.Snapshot(), n.Reg.LiveTombstones(), c.Clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// restartFrom starts node and loads dir's snapshot as cmd/muster does:
// its instances when no peer had the registry, then its tombstones unless
// withTombstones is false (a file written before they were kept).
func restartFrom(t *testing.T, c *replicationtest.Cluster, node, dir string, withTombstones bool) {
	t.Helper()
	c.StartWith(node, func(n *replicationtest.Node) {
		f, err := persist.ReadFile(dir, "test")
		if err != nil {
			t.Fatal(err)
		}
		if n.Sync.Instances == 0 {
			if _, refused := persist.Restore(n.Reg, f.Instances); len(refused) > 0 {
				t.Fatal(refused)
			}
		}
		if withTombstones {
			persist.RestoreTombstones(n.Reg, f.Written, f.Tombstones, c.Clock.Now())
		}
	})
}

// A full-cluster restart from snapshots where b's snapshot still holds
// an instance a cancelled (the cancel never reached b). Either a comes
// back first, alone, and b finds it holding nothing, so each loads its
// own file; or b comes back first and a copies b's registry (syncUp),
// then applies its file's tombstones over the copy. Either way the
// cancel's tombstone comes back with a, and the stale copy goes instead
// of spreading. With snapshots without tombstones (the control), the
// instance comes back on both nodes for its whole lease: an hour.
func TestSnapshotRestart_cancelledInstanceStaysCancelled(t *testing.T) {
	for _, tc := range []struct {
		name           string
		order          []string
		withTombstones bool
	}{
		{"a first", []string{"a", "b"}, true},
		{"b first, a syncs up from b", []string{"b", "a"}, true},
		{"control: a first, no tombstones", []string{"a", "b"}, false},
		{"control: b first, no tombstones", []string{"b", "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newAECluster(t, 3, false, "a", "b")
			k := key("APP", "i-1")
			c.MustApply("a", register(k.App, k.ID, registrytest.WithLeaseDuration(3600)))
			c.Settle(time.Second)
			mustHave(t, c, k, true)

			// The cancel never reaches b: its task expires while the link
			// is down. Both nodes write their snapshots, then go down.
			cutBoth(c, "a", "b")
			c.MustApply("a", registry.CancelOp(k.App, k.ID))
			expireQueued(c)
			dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
			writeSnapshot(t, c, "a", dirs["a"])
			writeSnapshot(t, c, "b", dirs["b"])
			c.Stop("a")
			c.Stop("b")
			c.Net.Heal()
			c.Advance(time.Minute, 10*time.Second)

			for _, node := range tc.order {
				restartFrom(t, c, node, dirs[node], tc.withTombstones)
			}
			converge(t, c, 5)
			c.Advance(10*time.Minute, time.Minute)
			converge(t, c, 5)
			mustHave(t, c, k, !tc.withTombstones)
			if tc.withTombstones {
				if _, ok := c.Node("b").Reg.Tombstone(k.App, k.ID); !ok {
					t.Fatal("b holds no tombstone for the cancel")
				}
			}
		})
	}
}

// A replicated cancel of an instance b never had (its register expired
// while the link was down) leaves b a tombstone for the instance's hour
// lease, as on a, not the default 90 s: the cancel carries the lease.
func TestReplicatedCancel_unknownInstanceKeepsItsLease(t *testing.T) {
	c := newAECluster(t, 5, false, "a", "b")
	k := key("APP", "i-1")
	cutBoth(c, "a", "b")
	c.MustApply("a", register(k.App, k.ID, registrytest.WithLeaseDuration(3600)))
	expireQueued(c)
	c.Net.Heal()
	c.MustApply("a", registry.CancelOp(k.App, k.ID))
	c.Settle(time.Second)
	ttl := func(node string) time.Duration {
		for _, ts := range c.Node(node).Reg.LiveTombstones() {
			if ts.Key == k {
				return ts.TTL
			}
		}
		return 0
	}
	want := time.Hour + registry.DefaultConfig().TombstoneGrace
	if a, b := ttl("a"), ttl("b"); a < want-2*time.Second || b < want-2*time.Second {
		t.Fatalf("tombstones kept %s on a, %s on b; want about %s on both", a, b, want)
	}
}

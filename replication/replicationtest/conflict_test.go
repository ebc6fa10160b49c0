package replicationtest_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// The conflict cases of issue 42: writes made on both sides of a
// partition, then healed. Each piece of an instance (the client's
// registration, the operator's override, metadata keys, the cancel) must
// end on every node as its last acknowledged write left it, as on a
// single node (docs/how-it-works.md, "Conflicts").

// splitCluster is three nodes that have replicated k (registered through
// n3) and been in sync once, then split: n1 alone, n2 and n3 together.
func splitCluster(t *testing.T, seed uint64, before ...func(c *replicationtest.Cluster)) (*replicationtest.Cluster, registry.InstanceKey) {
	t.Helper()
	c := newAECluster(t, seed, false, "n1", "n2", "n3")
	k := key("APP", "i-1")
	c.MustApply("n3", register(k.App, k.ID))
	c.Settle(time.Second)
	for _, f := range before {
		f(c)
		c.Settle(time.Second)
	}
	converge(t, c, 2)
	c.Net.Partition([]string{"n1"}, []string{"n2", "n3"})
	return c, k
}

// heal reconnects every node and lets replication and anti-entropy bring
// them together; every node then holds the same registry.
func heal(t *testing.T, c *replicationtest.Cluster) {
	t.Helper()
	c.Net.Heal()
	c.Settle(5 * time.Second)
	converge(t, c, 3)
}

// statusEverywhere checks k's status and override on every node.
func statusEverywhere(t *testing.T, c *replicationtest.Cluster, k registry.InstanceKey, status, override registry.Status) {
	t.Helper()
	for _, name := range c.Names() {
		iv, ok := c.Node(name).Reg.Instance(k.App, k.ID)
		if !ok {
			t.Fatalf("%s: %s is gone", name, k)
		}
		if iv.Status != status || iv.OverriddenStatus != override {
			t.Fatalf("%s: %s is %s (override %s), want %s (override %s)", name, k, iv.Status, iv.OverriddenStatus, status, override)
		}
	}
}

func outOfService(c *replicationtest.Cluster) {
	c.MustApply("n1", registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
}

// Symptom 1: the later write changes nothing on its own node (the copy
// there is OUT_OF_SERVICE already) and still wins over the earlier
// removal made on the other side.
func TestConflict_laterOverrideThatChangesNothingLocallyWins(t *testing.T) {
	c, k := splitCluster(t, 11, outOfService)
	c.MustApply("n3", registry.DeleteOverrideOp(k.App, k.ID, registry.StatusUp))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n1", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusOutOfService, registry.StatusOutOfService)
}

// And the mirror: a removal that finds nothing to remove on its node
// (the override was set meanwhile on the other side) still removes it.
func TestConflict_laterRemovalWhereNoOverrideWasInForceWins(t *testing.T) {
	c, k := splitCluster(t, 12)
	outOfService(c)
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", registry.DeleteOverrideOp(k.App, k.ID, registry.StatusUp))
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)
}

// Symptom 2: the instance's own re-registration on one side does not undo
// an override made on the other, as on a single node.
func TestConflict_reRegistrationKeepsAnOverrideMadeOnTheOtherSide(t *testing.T) {
	c, k := splitCluster(t, 13)
	outOfService(c)
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", register(k.App, k.ID)) // UP, from its home node
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusOutOfService, registry.StatusOutOfService)
}

// The mirror case: the override removed on one side, the instance
// registered again (UP) on the other, where the override was still in
// force: UP everywhere, no override.
func TestConflict_reRegistrationDoesNotReviveARemovedOverride(t *testing.T) {
	c, k := splitCluster(t, 14, outOfService)
	c.MustApply("n1", registry.DeleteOverrideOp(k.App, k.ID, registry.StatusUp))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", register(k.App, k.ID))
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)
}

// An override made before a re-registration that reports DOWN: the later
// client status wins (Eureka's DownOrStartingRule), the override stays
// recorded; made after it, the override wins.
func TestConflict_downFromTheClientAfterAnOverride(t *testing.T) {
	c, k := splitCluster(t, 15)
	outOfService(c)
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", register(k.App, k.ID, registrytest.WithStatus(registry.StatusDown)))
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusDown, registry.StatusOutOfService)

	c, k = splitCluster(t, 16)
	c.MustApply("n3", register(k.App, k.ID, registrytest.WithStatus(registry.StatusDown)))
	c.Advance(3*time.Second, time.Second)
	outOfService(c)
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusOutOfService, registry.StatusOutOfService)
}

// Metadata keys are pieces of their own: a key written after a
// re-registration on the other side stays on top of the new registration;
// one written before it goes with the old registration (a registration
// replaces all metadata, as on a single node).
func TestConflict_metadataKeysAndReRegistration(t *testing.T) {
	c, k := splitCluster(t, 17)
	c.MustApply("n3", register(k.App, k.ID, registrytest.WithVIP("new-vip")))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n1", registry.MetadataOp(k.App, k.ID, map[string]string{"weight": "5"}))
	heal(t, c)
	for _, name := range c.Names() {
		iv, _ := c.Node(name).Reg.Instance(k.App, k.ID)
		if w, _ := iv.Metadata.Get("weight"); w != "5" || iv.VIPAddress != "new-vip" {
			t.Fatalf("%s: vip %q, weight %q; want the new registration with weight 5", name, iv.VIPAddress, w)
		}
	}

	c, k = splitCluster(t, 18)
	c.MustApply("n1", registry.MetadataOp(k.App, k.ID, map[string]string{"weight": "5"}))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", register(k.App, k.ID, registrytest.WithVIP("new-vip")))
	heal(t, c)
	for _, name := range c.Names() {
		iv, _ := c.Node(name).Reg.Instance(k.App, k.ID)
		if w, ok := iv.Metadata.Get("weight"); ok || iv.VIPAddress != "new-vip" {
			t.Fatalf("%s: vip %q, weight %q; want the new registration without the older write", name, iv.VIPAddress, w)
		}
	}
}

// A node that learns of a re-registration through replication shows it as
// ADDED, as the node that took it does (and the Spring Cloud Eureka Server
// on both).
func TestConflict_replicatedReRegistrationIsAdded(t *testing.T) {
	c := newAECluster(t, 19, false, "n1", "n2")
	k := key("APP", "i-1")
	c.MustApply("n2", register(k.App, k.ID))
	c.Settle(time.Second)
	c.MustApply("n1", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	c.Settle(time.Second)
	if iv, _ := c.Node("n2").Reg.Instance(k.App, k.ID); iv.ActionType != registry.ActionModified {
		t.Fatalf("replicated override: %s, want MODIFIED", iv.ActionType)
	}
	c.Advance(time.Minute, time.Second)
	c.MustApply("n1", register(k.App, k.ID))
	c.Settle(time.Second)
	iv, _ := c.Node("n2").Reg.Instance(k.App, k.ID)
	if iv.ActionType != registry.ActionAdded || iv.RegistrationTimestamp != c.Clock.Now().UnixMilli() {
		t.Fatalf("replicated re-registration: %s, registered at %d; want ADDED, now (%d)", iv.ActionType, iv.RegistrationTimestamp, c.Clock.Now().UnixMilli())
	}
}

// Symptom 3: a cancel made while n1 was cut off for far longer than the
// tombstones' lifetime (lease + grace) stays a cancel: at the heal a
// heartbeat the client sent before its cancel reaches n1 late and
// refreshes n1's stale copy, and neither replication (the heartbeat's 404,
// then the copy) nor anti-entropy brings the instance back on n2 or n3;
// n1 takes the cancel instead.
func TestConflict_cancelStaysCancelledAfterALongCut(t *testing.T) {
	c, k := splitCluster(t, 20)
	c.MustApply("n3", registry.CancelOp(k.App, k.ID))
	for range 10 { // 5 minutes: the tombstones' lifetime is 2
		c.Advance(30*time.Second, time.Second)
		c.AntiEntropyRound()
		for _, name := range []string{"n2", "n3"} {
			c.Node(name).Reg.EvictExpired() // prunes what may go
			mustHaveOn(t, c, name, k, false)
		}
	}
	if _, ok := c.Node("n2").Reg.Tombstone(k.App, k.ID); !ok {
		t.Fatal("n2 dropped the tombstone while n1 had not been in sync since the cancel")
	}
	c.MustApply("n1", registry.RenewOp(k.App, k.ID)) // the late heartbeat
	c.Net.Heal()
	c.Settle(5 * time.Second)
	mustHaveOn(t, c, "n2", k, false)
	mustHaveOn(t, c, "n3", k, false)
	converge(t, c, 3)
	mustHave(t, c, k, false)
	// In sync again, the tombstones may go at their next pruning.
	c.Advance(time.Second, time.Second)
	c.AntiEntropyRound()
	c.Advance(time.Second, time.Second)
	for _, name := range c.Names() {
		c.Node(name).Reg.EvictExpired()
		if _, ok := c.Node(name).Reg.Tombstone(k.App, k.ID); ok {
			t.Fatalf("%s still holds the tombstone with every peer in sync", name)
		}
	}
}

// A cancel removes the override with the instance (as Eureka's does), so a
// registration after it starts without one — also where the registration
// was taken by a node that had not heard of the cancel and still held the
// override: the cancel, older than the registration, takes the old
// incarnation's pieces when it arrives.
func TestConflict_cancelEndsTheOverrideOfTheOldIncarnation(t *testing.T) {
	c := newAECluster(t, 21, false, "n1", "n2", "n3")
	k := key("APP", "i-1")
	c.MustApply("n2", register(k.App, k.ID))
	c.Settle(time.Second)
	c.MustApply("n1", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	c.Settle(time.Second)
	c.Net.Partition([]string{"n1"}, []string{"n2", "n3"})
	c.MustApply("n1", registry.CancelOp(k.App, k.ID))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n2", register(k.App, k.ID)) // the client registers again through n2
	c.Settle(time.Second)
	if iv, _ := c.Node("n3").Reg.Instance(k.App, k.ID); iv.OverriddenStatus != registry.StatusOutOfService {
		t.Fatalf("n3 before the cancel: override %s; the case is not reproduced", iv.OverriddenStatus)
	}
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)

	// The same with the cancel heard first by the node that takes the
	// registration: the registration carries the cancel it came after.
	c = newAECluster(t, 22, false, "n1", "n2", "n3")
	c.MustApply("n2", register(k.App, k.ID))
	c.Settle(time.Second)
	c.MustApply("n1", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	c.Settle(time.Second)
	cutBoth(c, "n1", "n3")
	cutBoth(c, "n2", "n3")
	c.MustApply("n1", registry.CancelOp(k.App, k.ID))
	c.Settle(time.Second)
	c.MustApply("n2", register(k.App, k.ID))
	c.Settle(time.Second)
	c.Net.Heal()
	c.Net.Cut("n1", "n3") // n3 hears of the registration, not of the cancel
	c.Settle(5 * time.Second)
	if iv, _ := c.Node("n3").Reg.Instance(k.App, k.ID); iv.OverriddenStatus != registry.StatusUnknown {
		t.Fatalf("n3 took the registration and kept the cancelled override %s", iv.OverriddenStatus)
	}
	heal(t, c)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)
}

// An override written after a cancel, on a copy that had not heard of it
// (a split), is a later write: the cancel does not undo it. The instance
// stays cancelled (the override brings nothing back), and when its client
// registers again the override holds for the new registration, as the
// last acknowledged word on the override.
func TestConflict_overrideAfterACancelOnTheOtherSide(t *testing.T) {
	c, k := splitCluster(t, 23)
	c.MustApply("n1", registry.CancelOp(k.App, k.ID))
	c.Advance(time.Second, time.Second)
	c.MustApply("n2", registry.StatusOp(k.App, k.ID, registry.StatusOutOfService))
	heal(t, c)
	mustHave(t, c, k, false)
	c.MustApply("n3", register(k.App, k.ID)) // told 404, the client registers again
	c.Settle(time.Second)
	converge(t, c, 3)
	statusEverywhere(t, c, k, registry.StatusOutOfService, registry.StatusOutOfService)
}

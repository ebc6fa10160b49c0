package replicationtest_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// Drains across a partition (docs/traffic.md): the drain mark is a piece
// of its own, so the later of a drain and an undrain made on the two
// sides wins on every node, and a cancel takes the mark with it.

func drainedEverywhere(t *testing.T, c *replicationtest.Cluster, k registry.InstanceKey, drained bool) {
	t.Helper()
	for _, name := range c.Names() {
		_, _, ok := c.Node(name).Reg.Drain(k.App, k.ID)
		if ok != drained {
			t.Fatalf("%s: drained %v, want %v", name, ok, drained)
		}
	}
}

// Drained before the split; drained again on one side (a new version of
// the same drain), undrained later on the other: the later undrain wins.
func TestConflict_laterUndrainWinsOverAnEarlierDrain(t *testing.T) {
	c, k := splitCluster(t, 31, func(c *replicationtest.Cluster) {
		c.MustApply("n1", registry.DrainOp(k0.App, k0.ID, 1, "n1"))
	})
	drainedEverywhere(t, c, k, true)
	c.MustApply("n1", registry.DrainOp(k.App, k.ID, 2, "n1"))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", registry.DrainOp(k.App, k.ID, 0, ""))
	heal(t, c)
	drainedEverywhere(t, c, k, false)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)
}

// Undrained on one side, drained again later on the other, where the
// drain was still in force (an idempotent re-drain there): the drain wins.
func TestConflict_laterDrainWinsOverAnEarlierUndrain(t *testing.T) {
	c, k := splitCluster(t, 32, func(c *replicationtest.Cluster) {
		c.MustApply("n1", registry.DrainOp(k0.App, k0.ID, 1, "n1"))
	})
	c.MustApply("n3", registry.DrainOp(k.App, k.ID, 0, ""))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n1", registry.DrainOp(k.App, k.ID, 2, "n1"))
	heal(t, c)
	drainedEverywhere(t, c, k, true)
	statusEverywhere(t, c, k, registry.StatusOutOfService, registry.StatusUnknown)
}

// A drain on one side, a cancel on the other: the instance is gone
// everywhere, and its registration again brings it back undrained.
func TestConflict_cancelTakesTheDrainWithIt(t *testing.T) {
	c, k := splitCluster(t, 33)
	c.MustApply("n1", registry.DrainOp(k.App, k.ID, 1, "n1"))
	c.Advance(3*time.Second, time.Second)
	c.MustApply("n3", registry.CancelOp(k.App, k.ID))
	heal(t, c)
	for _, name := range c.Names() {
		if _, ok := c.Node(name).Reg.Instance(k.App, k.ID); ok {
			t.Fatalf("%s: the cancelled instance is back", name)
		}
		if len(c.Node(name).Reg.Drained()) != 0 {
			t.Fatalf("%s: a drain outlived its instance", name)
		}
	}
	c.MustApply("n2", register(k.App, k.ID))
	c.Settle(5 * time.Second)
	converge(t, c, 3)
	drainedEverywhere(t, c, k, false)
	statusEverywhere(t, c, k, registry.StatusUp, registry.StatusUnknown)
}

var k0 = key("APP", "i-1")

package replicationtest_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// aeSeed replays one schedule of TestAntiEntropy_randomSchedules:
//
//	go test ./replication/replicationtest -run randomSchedules -ae.seed=N
//
// (or MUSTER_AE_SEED=N).
var aeSeed = flag.Uint64("ae.seed", 0, "replay one seed of TestAntiEntropy_randomSchedules")

// Random schedules of writes of every kind on 3–5 nodes, with partitions,
// lost, delayed, duplicated and reordered batches, node restarts (syncUp)
// and clocks skewed by up to ±5 s; after healing and a few anti-entropy
// rounds every node holds the same registry, field by field, every
// acknowledged write is visible unless a later one (higher version)
// superseded it, and no cancelled instance came back.
func TestAntiEntropy_randomSchedules(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	var only uint64
	if *aeSeed != 0 {
		only = *aeSeed
	} else if s := os.Getenv("MUSTER_AE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MUSTER_AE_SEED: %v", err)
		}
		only = v
	}
	list := make([]uint64, 0, seeds)
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		list = append(list, seed)
	}
	if only != 0 {
		list = []uint64{only}
	}
	for _, seed := range list {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay with: go test ./replication/replicationtest -run 'TestAntiEntropy_randomSchedules' -ae.seed=%d", seed)
				}
			}()
			runRandomSchedule(t, seed)
		})
	}
}

// acked is the newest acknowledged write of one instance.
type acked struct {
	version uint64
	cancel  bool
	node    string
	op      string
}

func runRandomSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xae))
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}[:3+rng.IntN(3)]
	c := replicationtest.NewCluster(t, replicationtest.ClusterConfig{
		Seed:        seed,
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel),
		AntiEntropy: true,
	}, nodes[0])
	for _, n := range nodes {
		c.SetSkew(n, time.Duration(rng.IntN(10001)-5000)*time.Millisecond)
	}
	for _, n := range nodes[1:] {
		c.Start(n)
	}
	faults := replicationtest.Faults{Drop: 0.2, Delay: 0.05, MaxDelay: 2 * time.Second, Duplicate: 0.05, Reorder: 0.1}
	c.Net.SetFaults(faults)

	latest := map[registry.InstanceKey]acked{}
	ack := func(k registry.InstanceKey, v uint64, cancel bool, node, op string) {
		if v > latest[k].version {
			latest[k] = acked{v, cancel, node, op}
		}
	}
	statuses := []registry.Status{registry.StatusUp, registry.StatusDown, registry.StatusOutOfService, registry.StatusStarting}
	down := ""
	for step := range 60 {
		running := c.Names()
		node := running[rng.IntN(len(running))]
		k := key(fmt.Sprint("APP-", rng.IntN(3)), fmt.Sprint("i-", rng.IntN(8)))
		switch x := rng.IntN(100); {
		case x < 25:
			in := registrytest.NewInstance(k.App, k.ID, registrytest.WithStatus(statuses[rng.IntN(2)]))
			if got, err := c.Apply(node, registry.RegisterOp(in)); err == nil {
				ack(k, got.WriteVersion, false, node, "register")
			}
		case x < 38:
			if got, err := c.Apply(node, registry.CancelOp(k.App, k.ID)); err == nil {
				ack(k, got.WriteVersion, true, node, "cancel")
			}
		case x < 52:
			if got, err := c.Apply(node, registry.StatusOp(k.App, k.ID, statuses[rng.IntN(len(statuses))])); err == nil {
				ack(k, got.WriteVersion, false, node, "status")
			}
		case x < 60:
			if got, err := c.Apply(node, registry.DeleteOverrideOp(k.App, k.ID, registry.StatusUp)); err == nil {
				ack(k, got.WriteVersion, false, node, "delete-override")
			}
		case x < 70:
			if got, err := c.Apply(node, registry.MetadataOp(k.App, k.ID, map[string]string{"v": fmt.Sprint(step)})); err == nil {
				ack(k, got.WriteVersion, false, node, "metadata")
			}
		case x < 80:
			_, _ = c.Apply(node, registry.RenewOp(k.App, k.ID))
		case x < 86:
			// A partition into two random groups.
			perm := rng.Perm(len(running))
			cut := 1 + rng.IntN(len(running)-1)
			var g1, g2 []string
			for i, j := range perm {
				if i < cut {
					g1 = append(g1, running[j])
				} else {
					g2 = append(g2, running[j])
				}
			}
			c.Net.Partition(g1, g2)
		case x < 91:
			c.Net.Heal()
		case x < 94 && down == "" && len(running) > 2:
			// A node stops (after a clean hand-over: nothing acknowledged
			// only by it is lost, since it keeps no data dir) …
			quiesce(t, c, faults)
			down = running[1+rng.IntN(len(running)-1)]
			c.Stop(down)
		case x < 97 && down != "":
			// … and starts again empty, syncing up from the others.
			c.Start(down)
			down = ""
		case x < 100:
			c.Net.SetFaults(replicationtest.Faults{})
			c.AntiEntropyRound()
			c.Net.SetFaults(faults)
		}
		c.Advance(time.Duration(100+rng.IntN(900))*time.Millisecond, 100*time.Millisecond)
	}
	if down != "" {
		c.Start(down)
	}

	// Heal; clients renew through every node (leases live everywhere, so a
	// missing copy may be adopted); then a few anti-entropy intervals.
	c.Net.Heal()
	c.Net.SetFaults(replicationtest.Faults{})
	c.Settle(time.Minute)
	for _, name := range c.Names() {
		for _, app := range c.Node(name).Reg.Snapshot().Apps {
			for _, iv := range app.Instances {
				_, _ = c.Apply(name, registry.RenewOp(app.Name, iv.ID()))
			}
		}
	}
	c.Settle(time.Minute)
	for round := 0; !c.InSync(); round++ {
		if round == 4 {
			c.EnsureSame(t)
			t.Fatal("root digests differ after 4 anti-entropy rounds")
		}
		c.Advance(10*time.Second, time.Second)
		c.AntiEntropyRound()
	}
	c.EnsureSame(t)

	// Every acknowledged write is visible or superseded; no cancelled
	// instance came back.
	ref := c.Node(c.Names()[0]).Reg
	keys := make([]registry.InstanceKey, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b registry.InstanceKey) int { return cmpKey(a, b) })
	for _, k := range keys {
		w := latest[k]
		iv, ok := ref.Instance(k.App, k.ID)
		switch {
		case w.cancel && ok:
			t.Errorf("%s: cancelled on %s (version %d) but back with version %d", k, w.node, w.version, iv.WriteVersion)
		case !w.cancel && !ok:
			t.Errorf("%s: %s on %s (version %d) acknowledged, but gone", k, w.op, w.node, w.version)
		case !w.cancel && iv.WriteVersion < w.version:
			t.Errorf("%s: %s on %s (version %d) acknowledged, but an older copy (version %d) won", k, w.op, w.node, w.version, iv.WriteVersion)
		}
	}
}

// quiesce heals the network, lets replication settle and runs an
// anti-entropy round without faults: every node then holds every write.
func quiesce(t *testing.T, c *replicationtest.Cluster, faults replicationtest.Faults) {
	t.Helper()
	c.Net.Heal()
	c.Net.SetFaults(replicationtest.Faults{})
	c.Settle(time.Minute)
	c.AntiEntropyRound()
	c.Net.SetFaults(faults)
}

func cmpKey(a, b registry.InstanceKey) int {
	if a.App != b.App {
		if a.App < b.App {
			return -1
		}
		return 1
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

package replication_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// Anti-entropy's cost between two nodes of the in-memory cluster (wire
// encoding included, no sockets): a round between nodes in sync, and a
// round that repairs 1,000 divergent instances of 10,000.
func BenchmarkAntiEntropy(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		c := populated(b, n)
		a := c.Node("a")
		peer := replication.Peer{Name: "b", URL: "mem://b/eureka/", Muster: true}
		b.Run(fmt.Sprintf("in sync/%d instances", n), func(b *testing.B) {
			before := c.Net.Stats().AntiEntropyBytes
			for b.Loop() {
				if r := a.AE.Round(context.Background(), peer); !r.InSync {
					b.Fatalf("not in sync: %+v", r)
				}
			}
			b.ReportMetric(float64(c.Net.Stats().AntiEntropyBytes-before)/float64(b.N), "bytes/round")
		})
	}
	// One app of 20,000: anti-entropy narrows to buckets of it, so one
	// changed instance costs its bucket's entries, not the app's.
	b.Run("repair 1 of 20000 in one app", func(b *testing.B) {
		c := replicationtest.NewCluster(b, replicationtest.ClusterConfig{Seed: 1}, "a")
		for i := range 20_000 {
			c.MustApply("a", registry.RegisterOp(registrytest.NewInstance("BIG", fmt.Sprint("i-", i))))
		}
		c.Start("b")
		c.Settle(1 << 40)
		peer := replication.Peer{Name: "a", URL: "mem://a/eureka/", Muster: true}
		statuses := []registry.Status{registry.StatusOutOfService, registry.StatusUp}
		var bytes uint64
		i := 0
		for b.Loop() {
			b.StopTimer()
			c.Net.Cut("a", "b")
			c.MustApply("a", registry.StatusOp("BIG", "i-17", statuses[i%2]))
			i++
			c.Net.Heal()
			before := c.Net.Stats().AntiEntropyBytes
			b.StartTimer()
			r := c.Node("b").AE.Round(context.Background(), peer)
			b.StopTimer()
			if r.Repaired.Stale != 1 {
				b.Fatalf("repairs %+v", r.Repaired)
			}
			bytes += c.Net.Stats().AntiEntropyBytes - before
			b.StartTimer()
		}
		b.ReportMetric(float64(bytes)/float64(b.N), "bytes/round")
	})
	b.Run("repair 1000 of 10000", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			c := populated(b, 10_000)
			c.Net.Cut("a", "b")
			for i := range 1000 {
				c.MustApply("a", registry.StatusOp(fmt.Sprint("APP-", i%100), fmt.Sprint("i-", i), registry.StatusOutOfService))
			}
			c.Net.Heal()
			peer := replication.Peer{Name: "a", URL: "mem://a/eureka/", Muster: true}
			b.StartTimer()
			r := c.Node("b").AE.Round(context.Background(), peer)
			if r.Repaired.Stale != 1000 {
				b.Fatalf("repairs %+v", r.Repaired)
			}
		}
	})
}

// populated is nodes a and b holding n instances in 100 apps: b synced up
// from a.
func populated(b *testing.B, n int) *replicationtest.Cluster {
	c := replicationtest.NewCluster(b, replicationtest.ClusterConfig{Seed: 1}, "a")
	for i := range n {
		c.MustApply("a", registry.RegisterOp(registrytest.NewInstance(fmt.Sprint("APP-", i%100), fmt.Sprint("i-", i))))
	}
	c.Start("b")
	c.Settle(1 << 40)
	return c
}

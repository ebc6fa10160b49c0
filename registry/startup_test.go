package registry_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// TestRegistry_RefuseReadsUntilRenewed: a cold-start refusal lasts one
// renewal interval (ExpectedRenewalInterval) plus the margin; a client
// declaring a longer interval while it runs stretches it, up to the limit;
// once reads are open nothing closes them again.
func TestRegistry_RefuseReadsUntilRenewed(t *testing.T) {
	const margin, limit = 5 * time.Second, 5 * time.Minute
	tenSeconds := func(c *registry.Config) { c.ExpectedRenewalInterval = 10 * time.Second }
	refusing := func(r *registry.Registry) bool { return !r.ReadsAllowed() }

	t.Run("the configured interval", func(t *testing.T) {
		r, clk := mustNew(t, tenSeconds)
		start := clk.Now()
		if until := r.RefuseReadsUntilRenewed(margin, limit); !until.Equal(start.Add(15 * time.Second)) {
			t.Fatalf("until %s, want start + 15 s", until.Sub(start))
		}
		r.OpenForTraffic()
		clk.Advance(15*time.Second - time.Millisecond)
		if !refusing(r) {
			t.Fatal("reads open before interval + margin")
		}
		clk.Advance(time.Millisecond)
		if refusing(r) {
			t.Fatal("reads still refused at interval + margin (15 s), not the 35 s of Eureka's default interval")
		}
	})

	t.Run("a longer declared interval stretches it", func(t *testing.T) {
		r, clk := mustNew(t, tenSeconds)
		start := clk.Now()
		r.RefuseReadsUntilRenewed(margin, limit)
		r.OpenForTraffic()
		clk.Advance(3 * time.Second)
		mustRegister(t, r, registrytest.NewInstance("APP", "short", registrytest.WithRenewalInterval(5)))
		mustRegister(t, r, registrytest.NewInstance("APP", "slow", registrytest.WithRenewalInterval(30)))
		if got := r.LongestRenewalInterval(); got != 30*time.Second {
			t.Fatalf("LongestRenewalInterval %s, want 30 s", got)
		}
		if got := r.ReadsRefusedUntil().Sub(start); got != 35*time.Second {
			t.Fatalf("refusal until start + %s, want 35 s", got)
		}
		clk.Set(start.Add(34 * time.Second))
		if !refusing(r) {
			t.Fatal("reads open before the slow client's interval + margin")
		}
		clk.Set(start.Add(35 * time.Second))
		if refusing(r) {
			t.Fatal("reads refused after the slow client's interval + margin")
		}
		// Open now: a slower client registering does not close them.
		mustRegister(t, r, registrytest.NewInstance("APP", "slower", registrytest.WithRenewalInterval(60)))
		if refusing(r) {
			t.Fatal("a registration after the refusal closed reads again")
		}
	})

	t.Run("at most the limit", func(t *testing.T) {
		r, clk := mustNew(t, tenSeconds)
		start := clk.Now()
		r.RefuseReadsUntilRenewed(margin, time.Minute)
		r.OpenForTraffic()
		mustRegister(t, r, registrytest.NewInstance("APP", "hourly", registrytest.WithRenewalInterval(3600)))
		if got := r.ReadsRefusedUntil().Sub(start); got != time.Minute {
			t.Fatalf("refusal until start + %s, want the limit (1 min)", got)
		}
	})

	t.Run("the cluster's own nodes do not stretch it", func(t *testing.T) {
		// A node's self-registration (register-with-eureka, 30 s), its own
		// or a peer's replicated, is no client the refusal waits for; a
		// client of any other app still is.
		r, clk := mustNew(t, tenSeconds, func(c *registry.Config) {
			c.ClusterNode = func(in *registry.Instance) bool { return in.App == "MUSTER" }
		})
		start := clk.Now()
		r.RefuseReadsUntilRenewed(margin, limit)
		r.OpenForTraffic()
		mustRegister(t, r, registrytest.NewInstance("muster", "node-1", registrytest.WithRenewalInterval(30)))
		if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("MUSTER", "node-2", registrytest.WithRenewalInterval(30))).From(registry.OriginPeer)); err != nil {
			t.Fatal(err)
		}
		if got := r.ReadsRefusedUntil().Sub(start); got != 15*time.Second {
			t.Fatalf("refusal until start + %s, want 15 s: the nodes' own 30 s stretched it", got)
		}
		if got := r.LongestRenewalInterval(); got != 0 {
			t.Fatalf("LongestRenewalInterval %s, want 0 (no client declared one)", got)
		}
		mustRegister(t, r, registrytest.NewInstance("APP", "slow", registrytest.WithRenewalInterval(20)))
		if got := r.ReadsRefusedUntil().Sub(start); got != 25*time.Second {
			t.Fatalf("refusal until start + %s, want 25 s (a client's 20 s still counts)", got)
		}
	})

	t.Run("intervals declared before the refusal count", func(t *testing.T) {
		r, clk := mustNew(t, tenSeconds)
		mustRegister(t, r, registrytest.NewInstance("APP", "slow", registrytest.WithRenewalInterval(20)))
		start := clk.Now()
		if until := r.RefuseReadsUntilRenewed(margin, limit); until.Sub(start) != 25*time.Second {
			t.Fatalf("until start + %s, want 25 s", until.Sub(start))
		}
	})
}

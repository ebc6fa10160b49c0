package registry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// The "Why" case: one request registered 50,000 instances declaring
// renewalIntervalInSecs=1 (3,000,000 expected renewals a minute) that never
// renewed; self-preservation switched on about a minute later and dead
// instances were then served indefinitely. Registrations alone must not
// move it: the flood is evicted once its leases expire, all at once, while
// the real fleet keeps renewing and is never touched.
func TestRegistry_SelfPreservation_registrationFloodCannotSwitchItOn(t *testing.T) {
	r, clk := mustNew(t)
	fleet := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, fleet, 30*time.Second, 2*time.Minute)

	const flood = 50_000
	for i := range flood {
		mustRegister(t, r, registrytest.NewInstance("FLOOD", fmt.Sprintf("f-%d", i), registrytest.WithRenewalInterval(1)))
	}
	sp := r.SelfPreservationState()
	if sp.ExpectedRenewsPerMin != 200+60*flood || sp.UnprovenRenewsPerMin != 60*flood {
		t.Fatalf("expected %v, unproven %v; want %d, %d", sp.ExpectedRenewsPerMin, sp.UnprovenRenewsPerMin, 200+60*flood, 60*flood)
	}
	evicted := 0
	for step := 0; step < 12; step++ { // 6 minutes, the fleet renewing
		heartbeatFor(t, r, clk, fleet, 30*time.Second, 30*time.Second)
		if sp := r.SelfPreservationState(); sp.Active || !sp.LeaseExpirationEnabled {
			t.Fatalf("step %d: self-preservation active %v (renews %d, threshold %d, unproven %v)",
				step, sp.Active, sp.RenewsLastMin, sp.RenewsThreshold, sp.UnprovenRenewsPerMin)
		}
		for _, k := range r.EvictExpired() {
			if k.App != "FLOOD" {
				t.Fatalf("evicted renewing %s", k)
			}
			evicted++
		}
	}
	if evicted != flood || r.Len() != 100 {
		t.Fatalf("evicted %d of the flood, %d left; want %d, 100", evicted, r.Len(), flood)
	}
	if sp := r.SelfPreservationState(); sp.ExpectedRenewsPerMin != 200 || sp.UnprovenRenewsPerMin != 0 {
		t.Fatalf("after the flood: expected %v, unproven %v; want 200, 0", sp.ExpectedRenewsPerMin, sp.UnprovenRenewsPerMin)
	}
}

// The other side: instances that registered after opening and renewed are
// held to the threshold; when they die together, self-preservation
// switches on as before and keeps their leases, even amid a flood.
func TestRegistry_SelfPreservation_massOutageOfRenewingInstancesStillSwitchesItOn(t *testing.T) {
	r, clk := mustNew(t)
	r.OpenForTraffic()
	fleet := registerN(t, r, 100)
	heartbeatFor(t, r, clk, fleet, 30*time.Second, 3*time.Minute)
	for i := range 1000 {
		mustRegister(t, r, registrytest.NewInstance("FLOOD", fmt.Sprintf("f-%d", i)))
	}
	alive := fleet[:40]
	for minute := 0; minute < 10; minute++ {
		heartbeatFor(t, r, clk, alive, 30*time.Second, time.Minute)
		for _, k := range r.EvictExpired() {
			if k.App != "FLOOD" {
				t.Fatalf("minute %d: evicted %s during the outage", minute, k)
			}
		}
		if minute >= 1 && !r.SelfPreservationState().Active {
			sp := r.SelfPreservationState()
			t.Fatalf("minute %d: not active with renews %d, threshold %d", minute, sp.RenewsLastMin, sp.RenewsThreshold)
		}
	}
	if got := countApp(r, "APP"); got != 100 {
		t.Fatalf("%d of the fleet kept, want 100", got)
	}
}

// A lease proven by a peer's replicated heartbeat counts like a direct one.
func TestRegistry_SelfPreservation_replicatedHeartbeatProves(t *testing.T) {
	r, clk := mustNew(t)
	r.OpenForTraffic()
	keys := registerN(t, r, 10)
	if got := r.SelfPreservationState().UnprovenRenewsPerMin; got != 20 {
		t.Fatalf("unproven = %v, want 20", got)
	}
	clk.Advance(30 * time.Second)
	for _, k := range keys {
		if _, err := r.Apply(registry.RenewOp(k.App, k.ID).From(registry.OriginPeer)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.SelfPreservationState().UnprovenRenewsPerMin; got != 0 {
		t.Fatalf("unproven after replicated heartbeats = %v, want 0", got)
	}
}

func countApp(r *registry.Registry, app string) int {
	n := 0
	for _, a := range r.Snapshot().Apps {
		if a.Name == app {
			n += len(a.Instances)
		}
	}
	return n
}

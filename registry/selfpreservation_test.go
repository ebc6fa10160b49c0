package registry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestRegistry_SelfPreservationState_seedFigures(t *testing.T) {
	tests := []struct {
		name          string
		instances     int
		intervalSecs  int // 0 = the client sends none
		wantExpected  float64
		wantThreshold int64
	}{
		{"100 at 30s", 100, 30, 200, 170},
		{"50 at 15s", 50, 15, 200, 170},
		{"20 at 30s", 20, 30, 40, 34},
		{"20 sending no interval count at 30s", 20, 0, 40, 34},
		{"one client", 1, 30, 2, 1},
		{"empty", 0, 30, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := mustNew(t)
			registerN(t, r, tt.instances, registrytest.WithRenewalInterval(tt.intervalSecs))
			check := func(when string) {
				sp := r.SelfPreservationState()
				if sp.ExpectedRenewsPerMin != tt.wantExpected || sp.RenewsThreshold != tt.wantThreshold {
					t.Errorf("%s: expected, threshold = %v, %d, want %v, %d", when,
						sp.ExpectedRenewsPerMin, sp.RenewsThreshold, tt.wantExpected, tt.wantThreshold)
				}
			}
			check("after register")
			r.OpenForTraffic()
			check("after OpenForTraffic")
		})
	}
}

func TestRegistry_SelfPreservationState_expectedFollowsRegisterAndCancel(t *testing.T) {
	r, _ := mustNew(t)
	keys := registerN(t, r, 10)
	mustRegister(t, r, registrytest.NewInstance("OTHER", "fast", registrytest.WithRenewalInterval(10)))
	if got := r.SelfPreservationState().ExpectedRenewsPerMin; got != 26 {
		t.Fatalf("expected = %v, want 20 + 6", got)
	}
	// Re-registering with another interval replaces the instance's share.
	mustRegister(t, r, registrytest.NewInstance("OTHER", "fast", registrytest.WithRenewalInterval(30)))
	if got := r.SelfPreservationState().ExpectedRenewsPerMin; got != 22 {
		t.Fatalf("after re-register: expected = %v, want 22", got)
	}
	for _, k := range keys[:5] {
		if _, err := r.Apply(registry.CancelOp(k.App, k.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.SelfPreservationState().ExpectedRenewsPerMin; got != 12 {
		t.Fatalf("after 5 cancels: expected = %v, want 12", got)
	}
}

// A fresh install with one, two or three clients renewing at Eureka's
// default interval must not sit in self-preservation (Eureka's Spring server
// does until there are six: EUREKA.md §4 worked example).
func TestRegistry_SelfPreservationState_fewClientsAreNotPreserved(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		r, clk := mustNew(t)
		r.OpenForTraffic()
		keys := registerN(t, r, n)
		for minute := 1; minute <= 10; minute++ {
			heartbeatFor(t, r, clk, keys, 30*time.Second, time.Minute)
			sp := r.SelfPreservationState()
			if sp.Active || !sp.LeaseExpirationEnabled {
				t.Fatalf("N=%d, minute %d: active=%v expiry=%v renews=%d threshold=%d, want not preserved",
					n, minute, sp.Active, sp.LeaseExpirationEnabled, sp.RenewsLastMin, sp.RenewsThreshold)
			}
			if evicted := r.EvictExpired(); len(evicted) != 0 {
				t.Fatalf("N=%d: evicted renewing instances %v", n, evicted)
			}
		}
	}
}

func TestRegistry_SelfPreservationState_notActiveWhileWarmingUp(t *testing.T) {
	r, clk := mustNew(t)
	registerN(t, r, 10)
	r.OpenForTraffic()
	clk.Advance(59 * time.Second)
	sp := r.SelfPreservationState()
	if sp.Active || !sp.WarmingUp || sp.LeaseExpirationEnabled {
		t.Fatalf("in the first window: active=%v warmingUp=%v expiry=%v, want false, true, false",
			sp.Active, sp.WarmingUp, sp.LeaseExpirationEnabled)
	}
	clk.Advance(time.Second)
	sp = r.SelfPreservationState()
	if !sp.Active || sp.WarmingUp {
		t.Fatalf("after a window without renewals: active=%v warmingUp=%v, want true, false", sp.Active, sp.WarmingUp)
	}
}

func TestRegistry_EvictExpired_belowThresholdStopsEvictionUntilRecovery(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, 30*time.Second, 2*time.Minute)

	// Half the clients go silent (a partition, say): 100 renewals a minute
	// against a threshold of 170.
	alive := keys[:50]
	for minute := 0; minute < 10; minute++ {
		heartbeatFor(t, r, clk, alive, 30*time.Second, time.Minute)
		if evicted := r.EvictExpired(); len(evicted) != 0 {
			t.Fatalf("minute %d: evicted %d while renewals are below the threshold", minute, len(evicted))
		}
		if sp := r.SelfPreservationState(); !sp.Active {
			t.Fatalf("minute %d: self-preservation not active: renews %d, threshold %d", minute, sp.RenewsLastMin, sp.RenewsThreshold)
		}
	}
	if n := r.Len(); n != 100 {
		t.Fatalf("Len = %d after the outage, want 100", n)
	}
	// The 15-minute recount must not lower the bar: the silent half's
	// leases are expired, but that is the outage, not a smaller fleet.
	if r.UpdateRenewThreshold() {
		t.Fatal("UpdateRenewThreshold adopted a recount taken during a mass outage")
	}
	if sp := r.SelfPreservationState(); sp.RenewsThreshold != 170 {
		t.Fatalf("threshold after recount = %d, want 170", sp.RenewsThreshold)
	}

	// The network heals: every client renews again; once a whole window
	// of full renewals has been counted, expiry resumes, and nobody was lost.
	heartbeatFor(t, r, clk, keys, 30*time.Second, 2*time.Minute)
	if sp := r.SelfPreservationState(); sp.Active || !sp.LeaseExpirationEnabled {
		t.Fatalf("after recovery: active=%v expiry=%v renews=%d", sp.Active, sp.LeaseExpirationEnabled, sp.RenewsLastMin)
	}
	if evicted := r.EvictExpired(); len(evicted) != 0 {
		t.Fatalf("after recovery evicted %d renewing instances", len(evicted))
	}
}

func TestRegistry_UpdateRenewThreshold_followsSmallDrift(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	// 10 instances stop renewing but self-preservation would not let them
	// go if they were 20 %; at 10 % the recount (180 > 170) is adopted.
	heartbeatFor(t, r, clk, keys[:90], 30*time.Second, 2*time.Minute)
	if !r.UpdateRenewThreshold() {
		t.Fatal("recount of 90 live instances not adopted")
	}
	if sp := r.SelfPreservationState(); sp.ExpectedRenewsPerMin != 180 || sp.RenewsThreshold != 153 {
		t.Fatalf("after recount: expected %v threshold %d, want 180, 153", sp.ExpectedRenewsPerMin, sp.RenewsThreshold)
	}
}

func TestRegistry_UpdateRenewThreshold_selfPreservationOffAlwaysAdopts(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys[:40], 30*time.Second, 2*time.Minute)
	if !r.UpdateRenewThreshold() {
		t.Fatal("recount not adopted with self-preservation off")
	}
	if got := r.SelfPreservationState().ExpectedRenewsPerMin; got != 80 {
		t.Fatalf("expected = %v, want 80", got)
	}
}

func TestRegistry_SelfPreservationState_shortWindowScaledToMinute(t *testing.T) {
	r, clk := mustNew(t, func(c *registry.Config) { c.RenewalRateWindow = 5 * time.Second })
	keys := registerN(t, r, 10, registrytest.WithRenewalInterval(1))
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, time.Second, 10*time.Second)
	sp := r.SelfPreservationState()
	if sp.ExpectedRenewsPerMin != 600 || sp.RenewsLastMin != 600 || sp.Active {
		t.Fatalf("expected %v, renews/min %d, active %v; want 600, 600, false", sp.ExpectedRenewsPerMin, sp.RenewsLastMin, sp.Active)
	}
}

func TestRegistry_SelfPreservationState_largeDeploymentDoesNotTripIt(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, 30*time.Second, 2*time.Minute)
	// 50 new instances arrive mid-window: expected jumps to 300 (threshold
	// 255), but they cannot have renewed a whole window yet.
	clk.Advance(10 * time.Second)
	for i := range 50 {
		in := registrytest.NewInstance("NEW", fmt.Sprintf("new-%d", i))
		mustRegister(t, r, in)
		keys = append(keys, registry.InstanceKey{App: "NEW", ID: in.InstanceID})
	}
	// Everyone renews on the old schedule: the next round is 20 s away.
	clk.Advance(20 * time.Second)
	renewAll(t, r, keys)
	for step := 0; step < 8; step++ {
		clk.Advance(30 * time.Second)
		renewAll(t, r, keys)
		if sp := r.SelfPreservationState(); sp.Active {
			t.Fatalf("step %d: active with renews %d, threshold %d, arriving %v", step, sp.RenewsLastMin, sp.RenewsThreshold, sp.ArrivingRenewsPerMin)
		}
	}
	if sp := r.SelfPreservationState(); sp.ExpectedRenewsPerMin != 300 || sp.RenewsThreshold != 255 || sp.ArrivingRenewsPerMin != 0 {
		t.Fatalf("settled at expected %v threshold %d arriving %v, want 300, 255, 0", sp.ExpectedRenewsPerMin, sp.RenewsThreshold, sp.ArrivingRenewsPerMin)
	}
}

// Half the fleet dies: self-preservation must be on before the first dead
// lease can expire (last renewal + 90 s), or the eviction runs in between
// would take 15 % of the registry each. Eureka's tumbling 60 s bucket can
// see the drop only up to two windows later; the sliding window sees it
// once the first missed round of heartbeats has been counted.
func TestRegistry_SelfPreservationState_massDeathSeenBeforeLeasesExpire(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, 30*time.Second, 3*time.Minute)
	death := clk.Now()
	alive := keys[:50]
	activeAfter := time.Duration(-1)
	for step := 0; step < 18 && activeAfter < 0; step++ { // 5 s steps, 90 s
		clk.Advance(5 * time.Second)
		if step%6 == 5 {
			renewAll(t, r, alive)
		}
		if r.SelfPreservationState().Active {
			activeAfter = clk.Now().Sub(death)
		}
		if evicted := r.EvictExpired(); len(evicted) != 0 {
			t.Fatalf("evicted %d at death+%s", len(evicted), clk.Now().Sub(death))
		}
	}
	if activeAfter < 0 || activeAfter > 40*time.Second {
		t.Fatalf("self-preservation active %s after the deaths, want within 40 s (leases expire after 90 s)", activeAfter)
	}
	t.Logf("self-preservation active %s after half the fleet died", activeAfter)
}

// Instances that register and cancel again within the window (crash
// loops, short jobs) must not keep lowering the bar.
func TestRegistry_SelfPreservationState_churnDoesNotLowerTheBar(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 100)
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, 30*time.Second, 2*time.Minute)
	for round := 0; round < 4; round++ {
		clk.Advance(15 * time.Second)
		for i := range 15 {
			id := fmt.Sprintf("loop-%d-%d", round, i)
			mustRegister(t, r, registrytest.NewInstance("CRASHY", id))
			if _, err := r.Apply(registry.CancelOp("CRASHY", id)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(15 * time.Second)
		renewAll(t, r, keys[:40]) // 60 % of the steady instances are cut off
	}
	sp := r.SelfPreservationState()
	if !sp.Active || sp.ArrivingRenewsPerMin != 0 {
		t.Fatalf("active %v with renews %d, threshold %d, arriving %v: churn hid a 60 %% loss of renewals",
			sp.Active, sp.RenewsLastMin, sp.RenewsThreshold, sp.ArrivingRenewsPerMin)
	}
}

package registry_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestRegistry_EvictExpired_atMost15PercentPerRun(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	registerN(t, r, 100)
	r.OpenForTraffic()
	clk.Advance(91 * time.Second)
	runs := []int{}
	for r.Len() > 0 && len(runs) < 50 {
		runs = append(runs, len(r.EvictExpired()))
		clk.Advance(time.Minute)
	}
	// Each run may take size − ⌊size × 0.85⌋ of the current size:
	// 100 → 15, 85 → 13, 72 → 11, …
	want := []int{15, 13, 11, 10, 8, 7, 6, 5, 4, 4, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1}
	if len(runs) != len(want) {
		t.Fatalf("runs = %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Fatalf("runs = %v, want %v", runs, want)
		}
	}
	if got := r.Stats().Evictions; got != 100 {
		t.Fatalf("Stats().Evictions = %d, want 100", got)
	}
}

func TestRegistry_EvictExpired_randomPickIsSeeded(t *testing.T) {
	pick := func() []registry.InstanceKey {
		r, clk := mustNew(t, selfPreservationOff)
		registerN(t, r, 100)
		// Open: leases present then count as renewing ones, which the cap
		// protects (leases that never renewed are not capped).
		r.OpenForTraffic()
		clk.Advance(2 * time.Minute)
		return r.EvictExpired()
	}
	a, b := pick(), pick()
	if len(a) != 15 {
		t.Fatalf("evicted %d, want 15", len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed gave different picks: %v vs %v", a, b)
		}
	}
}

// A lease that stops renewing goes after its duration plus at most one
// eviction interval — not after twice its duration, as in Eureka
// (Lease.java, Netflix/eureka#531).
func TestRegistry_EvictExpired_afterDurationPlusOneInterval(t *testing.T) {
	r, clk := mustNew(t)
	// Enough renewing clients that self-preservation stays off when one dies.
	alive := registerN(t, r, 20)
	dead := registrytest.NewInstance("DEAD", "d-1")
	mustRegister(t, r, dead)
	r.OpenForTraffic()

	start := clk.Now()
	var evictedAt time.Duration
	for evictedAt == 0 {
		heartbeatFor(t, r, clk, alive, 30*time.Second, time.Minute)
		for _, k := range r.EvictExpired() {
			if k.App == "DEAD" {
				evictedAt = clk.Now().Sub(start)
			} else {
				t.Fatalf("evicted renewing %s", k)
			}
		}
		if clk.Now().Sub(start) > 10*time.Minute {
			t.Fatal("dead instance never evicted")
		}
	}
	if limit := 90*time.Second + time.Minute; evictedAt > limit {
		t.Fatalf("evicted %s after the last renewal, want at most %s (Eureka's doubled lease: 180 s+)", evictedAt, limit)
	}
	if evictedAt <= 90*time.Second {
		t.Fatalf("evicted %s after the last renewal, before its 90 s lease ended", evictedAt)
	}
}

func TestRegistry_EvictExpired_lateRunCompensates(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	keys := registerN(t, r, 10)
	r.OpenForTraffic()
	r.EvictExpired()
	clk.Advance(30 * time.Second)
	renewAll(t, r, keys)
	// The machine stalls: the next run comes 90 s late, 120 s after the
	// last renewals, whose heartbeats since could not be processed. Without
	// compensation every lease would be expired (90 s lease).
	clk.Advance(2 * time.Minute)
	if got := r.EvictExpired(); len(got) != 0 {
		t.Fatalf("late run evicted %d leases, want 0 (compensated)", len(got))
	}
	clk.Advance(time.Minute)
	if got := r.EvictExpired(); len(got) != 2 {
		t.Fatalf("on-time run evicted %d leases, want 2 (limit of 10)", len(got))
	}
}

func TestRegistry_EvictExpired_deltaAndVersion(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	registerN(t, r, 1)
	before := r.Snapshot()
	clk.Advance(2 * time.Minute)
	if got := r.EvictExpired(); len(got) != 1 {
		t.Fatalf("evicted %d, want 1", len(got))
	}
	after := r.Snapshot()
	if after.Version <= before.Version || after.Instances != 0 || after.Hashcode != "" {
		t.Fatalf("after eviction: version %d (was %d), instances %d, hashcode %q", after.Version, before.Version, after.Instances, after.Hashcode)
	}
	if len(after.Delta) != 1 || after.Delta[0].Instances[0].ActionType != registry.ActionDeleted {
		t.Fatalf("delta after eviction = %+v, want one DELETED", after.Delta)
	}
}

// While a peer is unreachable, an expired lease may be renewing through it
// (a ring or one-way partition): nothing is evicted, for at most
// MaxEvictionHold in a row; then, or once the peer answers again,
// evictions resume.
func TestEvictExpired_heldWhileAPeerIsUnreachable(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff, func(c *registry.Config) { c.MaxEvictionHold = 10 * time.Minute })
	unreachable := "n2"
	r.SetEvictionHold(func() string { return unreachable })
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	mustRegister(t, r, registrytest.NewInstance("APP", "b"))
	clk.Advance(5 * time.Minute) // both long expired
	if got := r.EvictExpired(); len(got) != 0 {
		t.Fatalf("evicted %v while n2 was unreachable", got)
	}
	clk.Advance(11 * time.Minute)               // the hold has lasted 11 min
	if got := r.EvictExpired(); len(got) != 2 { // never renewed: no per-run cap
		t.Fatalf("evicted %v after the hold's limit, want both", got)
	}
	mustRegister(t, r, registrytest.NewInstance("APP", "c"))
	unreachable = ""
	r.EvictExpired() // reachable again: the hold ends
	unreachable = "n3"
	clk.Advance(5 * time.Minute)
	if got := r.EvictExpired(); len(got) != 0 {
		t.Fatalf("a new hold evicted %v", got)
	}
	unreachable = ""
	if got := r.EvictExpired(); len(got) != 1 {
		t.Fatalf("evicted %v once every peer answered, want one", got)
	}
}

package registry_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

var persistentMarker = registrytest.WithMetadata(map[string]string{registry.LeaseMetadataKey: "persistent"})

func has(r *registry.Registry, app, id string) bool {
	_, ok := r.Instance(app, id)
	return ok
}

// A persistent instance outlives three of its lease durations without a
// heartbeat, whether self-preservation is on or off, while an ordinary
// one that stops renewing beside it is evicted.
func TestRegistry_EvictExpired_persistentNeverExpires(t *testing.T) {
	for _, sp := range []bool{true, false} {
		t.Run(fmt.Sprintf("selfPreservation=%v", sp), func(t *testing.T) {
			r, clk := mustNew(t, func(c *registry.Config) { c.SelfPreservation = sp })
			alive := registerN(t, r, 20)
			mustRegister(t, r, registrytest.NewInstance("DB", "db-1", persistentMarker, registrytest.WithLeaseDuration(90)))
			mustRegister(t, r, registrytest.NewInstance("DEAD", "d-1"))
			r.OpenForTraffic()
			for range 3 * 90 / 30 {
				heartbeatFor(t, r, clk, alive, 30*time.Second, 30*time.Second)
				r.EvictExpired()
			}
			heartbeatFor(t, r, clk, alive, 30*time.Second, time.Minute)
			r.EvictExpired()
			if has(r, "DEAD", "d-1") {
				t.Fatal("the ordinary lease that stopped renewing was not evicted")
			}
			if !has(r, "DB", "db-1") {
				t.Fatal("the persistent instance was evicted")
			}
			if r.SelfPreservationState().Active {
				t.Fatal("self-preservation active although every ordinary client renews")
			}
		})
	}
}

// When self-preservation ends after an outage, the expired ordinary
// leases go and the persistent one stays.
func TestRegistry_EvictExpired_persistentStaysAfterSelfPreservation(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 20)
	mustRegister(t, r, registrytest.NewInstance("DEAD", "d-1"))
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1", persistentMarker))
	r.OpenForTraffic()
	heartbeatFor(t, r, clk, keys, 30*time.Second, 2*time.Minute)
	clk.Advance(5 * time.Minute) // a partition: no client reaches the node
	r.EvictExpired()
	if !r.SelfPreservationState().Active {
		t.Fatal("self-preservation not active during the partition")
	}
	for range 5 { // healed: all but the dead one renew again
		heartbeatFor(t, r, clk, keys, 30*time.Second, time.Minute)
		r.EvictExpired()
	}
	if r.SelfPreservationState().Active {
		t.Fatal("self-preservation still active")
	}
	if has(r, "DEAD", "d-1") {
		t.Fatal("the dead ordinary lease survived the end of self-preservation")
	}
	if !has(r, "DB", "db-1") {
		t.Fatal("the persistent instance was evicted once self-preservation ended")
	}
}

// A persistent instance counts in no renewal threshold: not at
// registration, not in OpenForTraffic's seed or UpdateRenewThreshold's
// recount, and its cancel subtracts nothing.
func TestRegistry_SelfPreservationState_persistentIgnored(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 10) // 30 s interval: 2 a minute each
	for i := range 5 {
		mustRegister(t, r, registrytest.NewInstance("DB", fmt.Sprintf("db-%d", i), persistentMarker, registrytest.WithRenewalInterval(1)))
	}
	want := func(stage string, expected float64, threshold int64) {
		t.Helper()
		sp := r.SelfPreservationState()
		if sp.ExpectedRenewsPerMin != expected || sp.RenewsThreshold != threshold || sp.UnprovenRenewsPerMin > expected {
			t.Fatalf("%s: expected %v threshold %d (unproven %v), want %v and %d", stage, sp.ExpectedRenewsPerMin,
				sp.RenewsThreshold, sp.UnprovenRenewsPerMin, expected, threshold)
		}
	}
	want("registered", 20, 17)
	r.OpenForTraffic()
	want("open", 20, 17)
	heartbeatFor(t, r, clk, keys, 30*time.Second, 20*time.Minute)
	r.UpdateRenewThreshold()
	want("recount", 20, 17)
	if _, err := r.Apply(registry.CancelOp("DB", "db-0")); err != nil {
		t.Fatal(err)
	}
	want("persistent cancelled", 20, 17)
	if _, err := r.Apply(registry.CancelOp("APP", "i-0")); err != nil {
		t.Fatal(err)
	}
	want("ordinary cancelled", 18, 15)
	if got := r.PersistentCount(); got != 4 {
		t.Fatalf("PersistentCount = %d, want 4", got)
	}
	// A persistent instance's own heartbeats are accepted, but they do not
	// count against a threshold that does not expect them.
	before := r.SelfPreservationState().RenewsLastMin
	for range 50 {
		if _, err := r.Apply(registry.RenewOp("DB", "db-1")); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if got := r.SelfPreservationState().RenewsLastMin; got > before {
		t.Fatalf("renewals last minute rose from %d to %d with persistent heartbeats", before, got)
	}
}

// The latest registration decides: without the marker the lease is an
// ordinary one again (and expires), with it the lease stops expiring.
func TestRegistry_Register_persistentMarkerFollowsLatestRegistration(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1", persistentMarker))
	if got := r.SelfPreservationState().ExpectedRenewsPerMin; got != 0 {
		t.Fatalf("expected renewals %v with one persistent instance", got)
	}
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1"))
	if got, n := r.SelfPreservationState().ExpectedRenewsPerMin, r.PersistentCount(); got != 2 || n != 0 {
		t.Fatalf("after a registration without the marker: expected %v, persistent %d; want 2 and 0", got, n)
	}
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1", registrytest.WithMetadata(map[string]string{registry.LeaseMetadataKey: " Persistent "})))
	if got, n := r.SelfPreservationState().ExpectedRenewsPerMin, r.PersistentCount(); got != 0 || n != 1 {
		t.Fatalf("after a registration with the marker again: expected %v, persistent %d; want 0 and 1", got, n)
	}
	r.OpenForTraffic()
	clk.Advance(10 * time.Minute)
	r.EvictExpired()
	if !has(r, "DB", "db-1") {
		t.Fatal("evicted although its latest registration is persistent")
	}
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1"))
	r.EvictExpired() // a run on time: no compensation for the one 10 min ago
	for range 3 {
		clk.Advance(time.Minute)
		r.EvictExpired()
	}
	if has(r, "DB", "db-1") {
		t.Fatal("not evicted although its latest registration is an ordinary one that stopped renewing")
	}
}

func TestRegistry_Register_badLeaseMarker(t *testing.T) {
	r, _ := mustNew(t)
	for _, v := range []string{"persistant", "", "true", "ephemeral"} {
		_, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("DB", "db-1",
			registrytest.WithMetadata(map[string]string{registry.LeaseMetadataKey: v}))))
		if !errors.Is(err, registry.ErrInvalidInstance) {
			t.Fatalf("marker %q: err = %v, want ErrInvalidInstance", v, err)
		}
		if code, _ := registry.StatusCode(err); code != 400 {
			t.Fatalf("marker %q: status %d, want 400", v, code)
		}
	}
	if r.Len() != 0 {
		t.Fatal("a refused registration was stored")
	}
}

func TestRegistry_UpdateMetadata_leaseMarkerRefused(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("DB", "db-1"))
	_, err := r.Apply(registry.MetadataOp("DB", "db-1", map[string]string{registry.LeaseMetadataKey: "persistent"}))
	if !errors.Is(err, registry.ErrInvalidInstance) {
		t.Fatalf("err = %v, want ErrInvalidInstance", err)
	}
	if r.PersistentCount() != 0 {
		t.Fatal("a metadata write made the lease persistent")
	}
}

// Cancel removes a persistent instance, and its tombstone outlasts a
// maximal lease: a stale copy from a peer cut off for a day does not
// bring it back.
func TestRegistry_Cancel_persistent(t *testing.T) {
	r, clk := mustNew(t)
	stored := mustRegister(t, r, registrytest.NewInstance("DB", "db-1", persistentMarker))
	if _, err := r.Apply(registry.CancelOp("DB", "db-1")); err != nil {
		t.Fatal(err)
	}
	if has(r, "DB", "db-1") || r.PersistentCount() != 0 {
		t.Fatal("still there after cancel")
	}
	clk.Advance(23 * time.Hour)
	r.EvictExpired() // prunes the expired tombstones
	if _, ok := r.Tombstone("DB", "db-1"); !ok {
		t.Fatal("the tombstone of a persistent instance went within a day")
	}
	if _, err := r.Apply(registry.RegisterOp(stored.Clone()).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	if has(r, "DB", "db-1") {
		t.Fatal("a stale copy brought the cancelled persistent instance back")
	}
}

// A peer's copy is persistent there too: every node derives the lease
// from the same metadata, so the peer never evicts it either.
func TestRegistry_Register_persistentCopyFromPeer(t *testing.T) {
	a, _ := mustNew(t)
	b, clk := mustNew(t, selfPreservationOff)
	stored := mustRegister(t, a, registrytest.NewInstance("DB", "db-1", persistentMarker))
	if _, err := b.Apply(registry.RegisterOp(stored.Clone()).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	b.OpenForTraffic()
	clk.Advance(time.Hour)
	b.EvictExpired()
	if !has(b, "DB", "db-1") {
		t.Fatal("the peer evicted the persistent instance")
	}
	if got := b.SelfPreservationState().ExpectedRenewsPerMin; got != 0 {
		t.Fatalf("the peer expects %v renewals a minute of it", got)
	}
	// The peer's copy also says where it is alive: only the node it was
	// registered through vouches for it.
	if !a.IsClientLive("DB", "db-1") || b.IsClientLive("DB", "db-1") {
		t.Fatal("IsClientLive: want the registering node only")
	}
}

func TestRegistry_Register_persistentCaps(t *testing.T) {
	r, _ := mustNew(t, func(c *registry.Config) {
		c.Limits.MaxPersistentPerApp = 2
		c.Limits.MaxPersistentPerUser = 3
	})
	reg := func(app, id, owner string) error {
		op := registry.RegisterOp(registrytest.NewInstance(app, id, persistentMarker))
		op.Owner = owner
		_, err := r.Apply(op)
		return err
	}
	for _, id := range []string{"a-1", "a-2"} {
		if err := reg("A", id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	// Registering again counts neither for the app nor for the user.
	if err := reg("A", "a-1", "alice"); err != nil {
		t.Fatalf("re-registration: %v", err)
	}
	err := reg("A", "a-3", "bob")
	var le *registry.LimitError
	if !errors.As(err, &le) || le.Limit != registry.LimitPersistentPerApp || !errors.Is(err, registry.ErrPersistentFull) {
		t.Fatalf("third of app A: err = %v, want the per-app cap", err)
	}
	if code, _ := registry.StatusCode(err); code != 403 {
		t.Fatalf("status %d, want 403", code)
	}
	// An ordinary instance is not held to it.
	mustRegister(t, r, registrytest.NewInstance("A", "a-3"))
	if err := reg("B", "b-1", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := reg("B", "b-2", "alice"); !errors.As(err, &le) || le.Limit != registry.LimitPersistentPerUser {
		t.Fatalf("alice's fourth: err = %v, want the per-user cap", err)
	}
	if err := reg("B", "b-2", "bob"); err != nil {
		t.Fatalf("bob's first: %v", err)
	}
	// A peer's copy passes: the node that accepted it enforced the caps.
	if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("A", "a-9", persistentMarker)).From(registry.OriginPeer)); err != nil {
		t.Fatalf("a peer's copy: %v", err)
	}
	// A cancel frees the user's place.
	if _, err := r.Apply(registry.CancelOp("A", "a-2")); err != nil {
		t.Fatal(err)
	}
	if err := reg("C", "c-1", "alice"); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	if got := r.LimitRejections()[registry.LimitPersistentPerUser]; got != 1 {
		t.Fatalf("per-user rejections = %d, want 1", got)
	}
}

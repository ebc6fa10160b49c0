package registry_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/rs/zerolog"
)

// TestKeyIndex_collidingHashes drives the same random writes into a
// registry with the key index's real hash and into one whose hash puts
// every key into one of four slots (so nearly every lookup meets a
// collision, and collided slots outlive the keys that made them): every
// answer, and the registry in the end, must be the same. A lookup that
// trusted a slot without checking the key, or lost a key on a collision,
// answers differently.
func TestKeyIndex_collidingHashes(t *testing.T) {
	quiet := func(c *registry.Config) { c.Logger = zerolog.Nop() }
	real, clk := mustNew(t, selfPreservationOff, quiet)
	weak, _ := mustNew(t, selfPreservationOff, quiet, func(c *registry.Config) { c.Now = clk.Now })
	weak.SetKeyHash(func(app, id string) uint64 { return uint64(len(app)+len(id)) % 4 })
	apps := []string{"A", "AB", "ORDERS", "ABC"}
	rng := rand.New(rand.NewPCG(7, 8))
	for step := range 4000 {
		app := apps[rng.IntN(len(apps))]
		// Ids of the same length in different apps, and ids that are
		// prefixes of each other, share slots.
		id := fmt.Sprintf("i-%d", rng.IntN(40))
		var op registry.Op
		switch k := rng.IntN(10); {
		case k < 3:
			op = registry.RegisterOp(registrytest.NewInstance(app, id))
		case k < 7:
			op = registry.RenewOp(app, id)
		case k < 8:
			op = registry.StatusOp(app, id, registry.StatusOutOfService)
		default:
			op = registry.CancelOp(app, id)
		}
		gotReal, errReal := real.Apply(op)
		gotWeak, errWeak := weak.Apply(op)
		if !errors.Is(errWeak, errReal) && !errors.Is(errReal, errWeak) {
			t.Fatalf("step %d: %v on %s/%s: real hash %v, colliding hash %v", step, op.Kind, app, id, errReal, errWeak)
		}
		if (gotReal == nil) != (gotWeak == nil) || gotReal != nil && (gotReal.ID() != gotWeak.ID() || gotReal.Status != gotWeak.Status) {
			t.Fatalf("step %d: %v on %s/%s answered %+v with the real hash, %+v with the colliding one", step, op.Kind, app, id, gotReal, gotWeak)
		}
		clk.Advance(time.Second)
	}
	if real.Len() != weak.Len() || real.Len() == 0 {
		t.Fatalf("instances: %d with the real hash, %d with the colliding one", real.Len(), weak.Len())
	}
	for _, app := range apps {
		for i := range 40 {
			id := fmt.Sprintf("i-%d", i)
			_, okReal := real.Instance(app, id)
			_, okWeak := weak.Instance(app, id)
			if okReal != okWeak {
				t.Errorf("%s/%s: present %v with the real hash, %v with the colliding one", app, id, okReal, okWeak)
			}
		}
	}
}

// TestRenew_followsACopysStatus: a copy from a peer changes what a renewal
// decides (a refused UNKNOWN becomes UP under the peer's newer
// registration). The verdict is copied onto the lease when the copy is
// stored (renewOutcome), so this fails if the copy does not refresh it.
func TestRenew_followsACopysStatus(t *testing.T) {
	r, _ := mustNew(t, selfPreservationOff)
	mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	if _, err := r.Apply(registry.DeleteOverrideOp("APP", "i-1", registry.StatusUnknown)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	removed, err := r.Apply(registry.DeleteOverrideOp("APP", "i-1", registry.StatusUnknown))
	if err != nil || removed.Status != registry.StatusUnknown {
		t.Fatalf("removal: %v, status %s", err, removed.Status)
	}
	if _, err := r.Apply(registry.RenewOp("APP", "i-1")); !errors.Is(err, registry.ErrStatusUnknown) {
		t.Fatalf("renewal of an UNKNOWN instance: %v, want ErrStatusUnknown", err)
	}
	newer := registrytest.NewInstance("APP", "i-1")
	newer.WriteVersion = removed.CopyVersion() + 1<<16 // the client registered again through a peer
	if got, err := r.Apply(registry.RegisterOp(newer).From(registry.OriginPeer)); err != nil || got.Status != registry.StatusUp {
		t.Fatalf("peer's newer registration: %v %+v", err, got)
	}
	if got, err := r.Apply(registry.RenewOp("APP", "i-1")); err != nil || got.Status != registry.StatusUp {
		t.Fatalf("renewal after the copy: %v, want UP", err)
	}
}

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

// TestRenew_correctsAStatusItsOverrideContradicts: a copy taken whole from a
// peer may hold a status its override contradicts (UP under an
// OUT_OF_SERVICE override); the next client renewal applies the status
// rules and stores the override's status as a visible change. The verdict
// is copied onto the lease when the copy is stored (renewOutcome), so this
// fails if the copy does not refresh it.
func TestRenew_correctsAStatusItsOverrideContradicts(t *testing.T) {
	r, _ := mustNew(t, selfPreservationOff)
	in := registrytest.NewInstance("APP", "i-1")
	in.OverriddenStatus = registry.StatusOutOfService
	in.WriteVersion = 1 << 40
	if _, err := r.Apply(registry.RegisterOp(in).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Instance("APP", "i-1"); got.Status != registry.StatusUp {
		t.Fatalf("the copy was stored with status %s, want it whole (UP)", got.Status)
	}
	v0 := r.Version()
	got, err := r.Apply(registry.RenewOp("APP", "i-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != registry.StatusOutOfService || r.Version() == v0 {
		t.Fatalf("after a renewal: status %s, version %d → %d; want OUT_OF_SERVICE as a new version", got.Status, v0, r.Version())
	}
	if again, _ := r.Apply(registry.RenewOp("APP", "i-1")); again.Status != registry.StatusOutOfService {
		t.Fatalf("the next renewal answered %s", again.Status)
	}
}

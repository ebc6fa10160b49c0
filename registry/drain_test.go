package registry_test

import (
	"errors"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func mustDrain(tb testing.TB, r *registry.Registry, id string, at int64) *registry.Instance {
	tb.Helper()
	in, err := r.Apply(registry.DrainOp("app", id, at, "node-1"))
	if err != nil {
		tb.Fatalf("drain %s at %d: %v", id, at, err)
	}
	return in
}

func TestRegistry_Drain_servesOutOfServiceAndUndrainsBack(t *testing.T) {
	r, clk := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	clk.Advance(time.Second)
	v0 := r.Version()

	in := mustDrain(t, r, "a", clk.Now().UnixMilli())
	if in.Status != registry.StatusOutOfService || in.ClientStatus() != registry.StatusUp || in.OverriddenStatus != registry.StatusUnknown {
		t.Fatalf("drained: status %s client %s override %s, want OUT_OF_SERVICE UP UNKNOWN", in.Status, in.ClientStatus(), in.OverriddenStatus)
	}
	mark, _, ok := r.Drain("APP", "a")
	if !ok || mark.At != clk.Now().UnixMilli() || mark.By != "node-1" || mark.Seq != v0+1 || r.Version() != v0+1 {
		t.Fatalf("mark %+v ok %v (version %d → %d), want applied at %d", mark, ok, v0, r.Version(), v0+1)
	}
	if snap := r.Snapshot(); snap.Version < mark.Seq {
		t.Fatalf("snapshot at %d does not include the mark applied at %d", snap.Version, mark.Seq)
	}

	// Idempotent: the first drain's time stands, and so does the version
	// at which it was applied (readers who confirmed stay confirmed); the
	// piece still gets a new version (the operator's latest word).
	clk.Advance(time.Second)
	before := mustStatus(t, r, "a", registry.StatusOutOfService).Pieces.DrainVersion
	again := mustDrain(t, r, "a", clk.Now().UnixMilli())
	if m, _, _ := r.Drain("APP", "a"); m != mark || again.Pieces.DrainVersion <= before {
		t.Fatalf("re-drain: %+v (piece version %d → %d), want %+v and a newer piece", m, before, again.Pieces.DrainVersion, mark)
	}
	if got := r.Drained(); len(got) != 1 || got[0].Key != (registry.InstanceKey{App: "APP", ID: "a"}) || got[0].Mark != mark {
		t.Fatalf("Drained() = %+v", got)
	}

	// The client's renewals and a re-registration keep the drain.
	if _, err := r.Apply(registry.RenewOp("APP", "a")); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	mustStatus(t, r, "a", registry.StatusOutOfService)

	// Undrained: back to UP, no mark, nothing listed.
	in, err := r.Apply(registry.DrainOp("APP", "a", 0, ""))
	if err != nil || in.Status != registry.StatusUp {
		t.Fatalf("undrain: %v, status %s", err, in.Status)
	}
	if _, _, ok := r.Drain("APP", "a"); ok || len(r.Drained()) != 0 {
		t.Fatal("an undrained instance still has a mark")
	}
	if p := in.Pieces; p != nil && (p.DrainedAt != 0 || p.DrainedBy != "") {
		t.Fatalf("undrain left %+v", p)
	}
}

func TestRegistry_Drain_precedence(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))

	// The health mark under a drain hides nothing: OUT_OF_SERVICE stands.
	if _, err := r.Apply(registry.HealthOp("APP", "a", &registry.HealthMark{Reason: "http 503", By: "n"})); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusDown)
	mustDrain(t, r, "a", 1)
	if iv := mustStatus(t, r, "a", registry.StatusOutOfService); iv.Health == nil || iv.Health.Hides {
		t.Fatalf("health mark under a drain: %+v, want kept and hiding nothing", iv.Health)
	}
	// An operator's override wins over the drain…
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusUp)); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusUp)
	// …and once removed, the drain decides again (then the health mark).
	if _, err := r.Apply(registry.DeleteOverrideOp("APP", "a", registry.StatusUnknown)); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusOutOfService)
	if _, err := r.Apply(registry.DrainOp("APP", "a", 0, "")); err != nil {
		t.Fatal(err)
	}
	if iv, _ := r.Instance("APP", "a"); iv.Status == registry.StatusOutOfService {
		t.Fatalf("undrained but still %s", iv.Status)
	}

	// A client that says DOWN is served OUT_OF_SERVICE while drained, and
	// DOWN again once undrained.
	down := registrytest.NewInstance("APP", "b")
	down.Status = registry.StatusDown
	mustRegister(t, r, down)
	if in := mustDrain(t, r, "b", 1); in.Status != registry.StatusOutOfService || in.ClientStatus() != registry.StatusDown {
		t.Fatalf("drained DOWN client: %s (client %s)", in.Status, in.ClientStatus())
	}
	if in, _ := r.Apply(registry.DrainOp("APP", "b", 0, "")); in.Status != registry.StatusDown {
		t.Fatalf("undrained DOWN client: %s", in.Status)
	}
}

func TestRegistry_Drain_cancelLeavesNothing(t *testing.T) {
	r, clk := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	mustDrain(t, r, "a", clk.Now().UnixMilli())
	if _, err := r.Apply(registry.CancelOp("APP", "a")); err != nil {
		t.Fatal(err)
	}
	if len(r.Drained()) != 0 {
		t.Fatal("a cancelled instance is still listed as drained")
	}
	clk.Advance(time.Second)
	in := mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if in.Status != registry.StatusUp {
		t.Fatalf("registered again after a cancel: %s, want UP (the drain went with the cancel)", in.Status)
	}
	if _, _, ok := r.Drain("APP", "a"); ok {
		t.Fatal("the new incarnation inherited the drain")
	}
}

func TestRegistry_Drain_badInput(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	v := r.Version()
	if _, err := r.Apply(registry.DrainOp("APP", "zz", 1, "n")); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
	if _, err := r.Apply(registry.DrainOp("APP", "a", -1, "n")); !errors.Is(err, registry.ErrInvalidOp) {
		t.Fatalf("negative time: %v", err)
	}
	if _, err := r.Apply(registry.DrainOp("APP", "a", 1, "n").From(registry.OriginPeer)); !errors.Is(err, registry.ErrInvalidOp) {
		t.Fatalf("drain op from a peer (peers send copies): %v", err)
	}
	if _, err := r.Apply(registry.DrainOp("APP", "a", 0, "")); err != nil || r.Version() != v {
		t.Fatalf("undrain of an instance not drained: %v, version %d → %d", err, v, r.Version())
	}
	if _, ok := r.Instance("APP", "a"); !ok {
		t.Fatal("instance gone")
	}
}

// Two nodes drain and undrain in a partition; the copies meet in both
// orders: the later write of the drain piece wins on both, and the nodes
// agree on digests. A node that receives the drain as a copy applies it at
// a version of its own.
func TestRegistry_Drain_laterWriteWinsAcrossCopies(t *testing.T) {
	a, clkA := mustNew(t)
	b, clkB := mustNew(t)
	inst := mustRegister(t, a, registrytest.NewInstance("APP", "x"))
	if _, err := b.Apply(registry.RegisterOp(inst.Clone()).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	drained := mustDrain(t, a, "x", clkA.Now().UnixMilli())
	clkA.Advance(time.Second)
	clkB.Advance(2 * time.Second)
	if _, err := b.Apply(registry.RegisterOp(drained.Clone()).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if m, _, ok := b.Drain("APP", "x"); !ok || m.Seq != b.Version() {
		t.Fatalf("b after the copy: %+v %v (version %d)", m, ok, b.Version())
	}
	undrained, err := b.Apply(registry.DrainOp("APP", "x", 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	// a never heard of the undrain; its copy meets b's undrain both ways.
	aCopy, _ := a.Instance("APP", "x")
	if _, err := a.Apply(registry.RegisterOp(undrained.Clone()).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(registry.RegisterOp(aCopy.Instance.Clone()).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*registry.Registry{"a": a, "b": b} {
		if _, _, ok := r.Drain("APP", "x"); ok {
			t.Errorf("%s: the earlier drain beat the later undrain", name)
		}
		mustStatus(t, r, "x", registry.StatusUp)
	}
	if a.RootDigest() != b.RootDigest() {
		t.Error("the nodes disagree on digests")
	}
}

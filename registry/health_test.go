package registry_test

import (
	"errors"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func mustStatus(tb testing.TB, r *registry.Registry, id string, want registry.Status) registry.InstanceView {
	tb.Helper()
	iv, ok := r.Instance("APP", id)
	if !ok {
		tb.Fatalf("instance %s missing", id)
	}
	if iv.Status != want {
		tb.Fatalf("status of %s = %s, want %s", id, iv.Status, want)
	}
	return iv
}

func TestRegistry_Health_marksUpAsDownAndLiftsBack(t *testing.T) {
	r, clk := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	cur := r.Subscribe()
	defer cur.Close()
	renewedBefore := mustStatus(t, r, "a", registry.StatusUp).LastRenewalTimestamp
	clk.Advance(10 * time.Second)

	mark := &registry.HealthMark{Reason: "http 503", Since: clk.Now().UnixMilli(), By: "node-1"}
	in, err := r.Apply(registry.HealthOp("app", "a", mark))
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != registry.StatusDown || !in.Health.Hides || in.ClientStatus() != registry.StatusUp {
		t.Fatalf("marked: status %s hides %v client %s, want DOWN true UP", in.Status, in.Health.Hides, in.ClientStatus())
	}
	if in.ActionType != registry.ActionModified || in.WriteVersion == 0 {
		t.Errorf("marked copy: action %s version %d, want MODIFIED and a write version", in.ActionType, in.WriteVersion)
	}
	if iv := mustStatus(t, r, "a", registry.StatusDown); iv.LastRenewalTimestamp != renewedBefore {
		t.Error("a health write renewed the lease; a probe is not a sign of life")
	}
	evs, _ := cur.Read(nil)
	if len(evs) != 1 || evs[0].Kind != registry.OpHealth || evs[0].Origin != registry.OriginHealthCheck {
		t.Fatalf("events = %+v, want one OpHealth from health-check", evs)
	}
	if a, ok := evs[0].Kind.Action(); !ok || a != registry.ActionRegister {
		t.Errorf("OpHealth replicates as %q %v, want Register", a, ok)
	}
	snap := r.Snapshot()
	if snap.Hashcode != "DOWN_1_" {
		t.Errorf("hashcode = %q, want DOWN_1_ (readers see the effective status)", snap.Hashcode)
	}

	// The same mark again changes nothing.
	v := r.Version()
	if _, err := r.Apply(registry.HealthOp("APP", "a", mark)); err != nil || r.Version() != v {
		t.Errorf("same mark: err %v, version %d → %d, want no change", err, v, r.Version())
	}

	// A client's renewal and re-registration keep the server-owned mark.
	if _, err := r.Apply(registry.RenewOp("APP", "a")); err != nil {
		t.Fatalf("renew while marked: %v", err)
	}
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if iv := mustStatus(t, r, "a", registry.StatusDown); iv.Health == nil {
		t.Fatal("re-registration dropped the mark")
	}

	// Lifted: back to the client's status.
	in, err = r.Apply(registry.HealthOp("APP", "a", nil))
	if err != nil || in.Status != registry.StatusUp || in.Health != nil {
		t.Fatalf("lifted: %v status %s health %v, want UP and no mark", err, in.Status, in.Health)
	}
}

func TestRegistry_Health_overrideWins(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	mark := &registry.HealthMark{Reason: "tcp refused", Since: 1, By: "n"}
	if _, err := r.Apply(registry.HealthOp("APP", "a", mark)); err != nil {
		t.Fatal(err)
	}
	// An operator forces UP: the override wins over the mark.
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusUp)); err != nil {
		t.Fatal(err)
	}
	iv := mustStatus(t, r, "a", registry.StatusUp)
	if iv.Health == nil || iv.Health.Hides {
		t.Fatalf("mark = %+v, want kept and hiding nothing", iv.Health)
	}
	// OUT_OF_SERVICE too, and lifting the mark under it changes no status.
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.HealthOp("APP", "a", nil)); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusOutOfService)
	// Marked again, then the override removed with value=UP: the mark
	// applies again.
	if _, err := r.Apply(registry.HealthOp("APP", "a", mark)); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusOutOfService)
	if _, err := r.Apply(registry.DeleteOverrideOp("APP", "a", registry.StatusUp)); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, r, "a", registry.StatusDown)
}

func TestRegistry_Health_hidesOnlyUp(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "s", registrytest.WithStatus(registry.StatusStarting)))
	mark := &registry.HealthMark{Reason: "x", Since: 1, By: "n"}
	in, err := r.Apply(registry.HealthOp("APP", "s", mark))
	if err != nil || in.Status != registry.StatusStarting || in.Health.Hides {
		t.Fatalf("STARTING marked: %v %s hides %v, want STARTING unhidden", err, in.Status, in.Health.Hides)
	}
	// The client comes UP while marked: DOWN.
	mustRegister(t, r, registrytest.NewInstance("APP", "s"))
	mustStatus(t, r, "s", registry.StatusDown)
}

func TestRegistry_Health_onlyFromHealthCheck(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	op := registry.HealthOp("APP", "a", &registry.HealthMark{Reason: "x"}).From(registry.OriginClient)
	if _, err := r.Apply(op); !errors.Is(err, registry.ErrInvalidOp) {
		t.Fatalf("health op from a client: err %v, want ErrInvalidOp", err)
	}
	if _, err := r.Apply(registry.HealthOp("APP", "zz", nil)); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Fatalf("unknown instance: err %v", err)
	}
}

// A copy that lost its mark in transit (same write version) never beats
// the marked copy, whatever the digests say, and the marked one beats it.
func TestRegistry_Health_copyWithoutMarkLosesAtSameVersion(t *testing.T) {
	src, _ := mustNew(t)
	mustRegister(t, src, registrytest.NewInstance("APP", "a"))
	marked, err := src.Apply(registry.HealthOp("APP", "a", &registry.HealthMark{Reason: "x", Since: 5, By: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	bare := marked.Clone()
	bare.Health = nil

	dst, _ := mustNew(t)
	if _, err := dst.Apply(registry.RegisterOp(marked.Clone()).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Apply(registry.RegisterOp(bare.Clone()).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	if iv := mustStatus(t, dst, "a", registry.StatusDown); iv.Health == nil {
		t.Fatal("a copy without the mark replaced the marked one")
	}

	other, _ := mustNew(t)
	if _, err := other.Apply(registry.RegisterOp(bare.Clone()).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Apply(registry.RegisterOp(marked.Clone()).From(registry.OriginAntiEntropy)); err != nil {
		t.Fatal(err)
	}
	if iv, _ := other.Instance("APP", "a"); iv.Health == nil {
		t.Fatal("the marked copy did not replace the one without the mark")
	}
	if dst.RootDigest() != other.RootDigest() || dst.RootDigest() != src.RootDigest() {
		t.Error("nodes holding the marked copy disagree on digests")
	}
}

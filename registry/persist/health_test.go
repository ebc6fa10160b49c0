package persist_test

import (
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/registry/registrytest"
)

// A marked instance is written as its client left it, without a version:
// restored DOWN without its mark it would never be probed again (only UP
// or marked instances are), so it comes back UP, to take a peer's marked
// copy or be probed again. The registry's own snapshot is untouched.
func TestWrite_healthMarkIsNotKept(t *testing.T) {
	clock := registrytest.NewClock()
	src := newRegistry(t, clock)
	fill(t, src, 10)
	if _, err := src.Apply(registry.HealthOp("APP-1", "i-1", &registry.HealthMark{Reason: "http 503", Since: 1, By: "n1"})); err != nil {
		t.Fatal(err)
	}
	snap := src.Snapshot()
	dir := t.TempDir()
	if _, err := persist.Write(dir, "prod", "node-a", snap, nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if iv, _ := src.Instance("APP-1", "i-1"); iv.Status != registry.StatusDown || iv.Health == nil {
		t.Fatalf("writing changed the stored instance: %s %+v", iv.Status, iv.Health)
	}
	_, instances, err := readSnapshot(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range instances {
		if in.App == "APP-1" && in.ID() == "i-1" {
			found = true
			if in.Status != registry.StatusUp || in.Health != nil || in.WriteVersion != 0 {
				t.Fatalf("restored %s mark %+v version %d, want UP, unmarked, unversioned", in.Status, in.Health, in.WriteVersion)
			}
		} else if in.WriteVersion == 0 {
			t.Fatalf("%s/%s lost its version", in.App, in.ID())
		}
	}
	if !found {
		t.Fatal("the marked instance was not written")
	}
}

// A drained instance is written with its client's status too: restored
// OUT_OF_SERVICE without its drain mark, it could not be undrained. A lone
// node forgets the drain; a node with peers takes their drained copy.
func TestWrite_drainIsNotKept(t *testing.T) {
	clock := registrytest.NewClock()
	src := newRegistry(t, clock)
	fill(t, src, 10)
	if _, err := src.Apply(registry.DrainOp("APP-1", "i-1", 1, "n1")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if iv, _ := src.Instance("APP-1", "i-1"); iv.Status != registry.StatusOutOfService {
		t.Fatalf("writing changed the stored instance: %s", iv.Status)
	}
	_, instances, err := readSnapshot(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		if in.App == "APP-1" && in.ID() == "i-1" {
			if in.Status != registry.StatusUp || in.WriteVersion != 0 {
				t.Fatalf("restored %s version %d, want UP, unversioned", in.Status, in.WriteVersion)
			}
			return
		}
	}
	t.Fatal("the drained instance was not written")
}

package registry_test

import (
	"math/rand/v2"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// For random sequences of changes, read after every few, the incremental
// snapshot holds what a snapshot built from scratch holds: the same apps
// with the same instances (the same immutable pointers), the same hashcode
// and count, and the same delta, timestamps included. Only the apps'
// LastRenewalTimestamps may be older (taken when the app last changed). A
// tiny change stream makes some builds miss events and rebuild every app.
func TestRegistry_Snapshot_incrementalMatchesScratch(t *testing.T) {
	for seed := range uint64(40) {
		outbox := 16384
		if seed%4 == 3 {
			outbox = 4
		}
		r, clk := mustNew(t, selfPreservationOff, func(c *registry.Config) { c.OutboxSize = outbox })
		rng := rand.New(rand.NewPCG(seed, 7))
		versions := map[string]registry.AppView{} // app name → last view seen
		for step := range 400 {
			registrytest.RandomChange(r, clk, rng, 6)
			if rng.IntN(3) != 0 {
				continue
			}
			got, want := r.Snapshot(), r.ScratchSnapshot()
			if got.Version != want.Version || got.DeltaVersion != want.DeltaVersion || got.Hashcode != want.Hashcode || got.Instances != want.Instances {
				t.Fatalf("seed %d step %d: version %d/%d delta %d/%d hashcode %q/%q instances %d/%d", seed, step,
					got.Version, want.Version, got.DeltaVersion, want.DeltaVersion, got.Hashcode, want.Hashcode, got.Instances, want.Instances)
			}
			compareApps(t, seed, step, "apps", got.Apps, want.Apps, false)
			compareApps(t, seed, step, "delta", got.Delta, want.Delta, true)
			for _, app := range got.Apps {
				if a, ok := got.App(app.Name); !ok || a.Version != app.Version {
					t.Fatalf("seed %d step %d: App(%s) lookup broken", seed, step, app.Name)
				}
				// A version names one content: same version, same instances.
				if old, ok := versions[app.Name]; ok && old.Version == app.Version && !sameViews(old.Instances, app.Instances, true) {
					t.Fatalf("seed %d step %d: app %s changed under version %d", seed, step, app.Name, app.Version)
				}
				if app.Version > got.Version {
					t.Fatalf("seed %d step %d: app %s version %d above the registry's %d", seed, step, app.Name, app.Version, got.Version)
				}
				versions[app.Name] = app
			}
		}
	}
}

func compareApps(t *testing.T, seed uint64, step int, what string, got, want []registry.AppView, timestamps bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("seed %d step %d: %s: %d apps, want %d", seed, step, what, len(got), len(want))
	}
	for i := range got {
		if got[i].Name != want[i].Name || !sameViews(got[i].Instances, want[i].Instances, timestamps) {
			t.Fatalf("seed %d step %d: %s: app %d is %s %+v, want %s %+v", seed, step, what, i, got[i].Name, got[i].Instances, want[i].Name, want[i].Instances)
		}
	}
}

func sameViews(a, b []registry.InstanceView, timestamps bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Instance != b[i].Instance || (timestamps && a[i].LastRenewalTimestamp != b[i].LastRenewalTimestamp) {
			return false
		}
	}
	return true
}

// One change rebuilds the view of its app only: every other app keeps its
// view (the same instances array) and its version.
func TestRegistry_Snapshot_reusesUnchangedApps(t *testing.T) {
	r, _ := mustNew(t)
	for _, app := range []string{"A", "B", "C"} {
		for _, id := range []string{"1", "2"} {
			mustRegister(t, r, registrytest.NewInstance(app, id))
		}
	}
	s1 := r.Snapshot()
	if _, err := r.Apply(registry.StatusOp("B", "1", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	s2 := r.Snapshot()
	for i, name := range []string{"A", "B", "C"} {
		a1, a2 := s1.Apps[i], s2.Apps[i]
		if a1.Name != name || a2.Name != name {
			t.Fatalf("apps %s %s, want %s", a1.Name, a2.Name, name)
		}
		same := &a1.Instances[0] == &a2.Instances[0]
		if name == "B" {
			if same || a2.Version != s2.Version {
				t.Errorf("B: view reused %v, version %d, want rebuilt at %d", same, a2.Version, s2.Version)
			}
		} else if !same || a1.Version != a2.Version {
			t.Errorf("%s: view reused %v, version %d → %d, want the same view", name, same, a1.Version, a2.Version)
		}
	}
}

package registry_test

import (
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestRegistry_AppRenewals_countsEveryRenewalPerApp(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("ORDERS", "o1"))
	mustRegister(t, r, registrytest.NewInstance("ORDERS", "o2"))
	mustRegister(t, r, registrytest.NewInstance("billing", "b1"))
	for range 3 {
		for _, id := range []string{"o1", "o2"} {
			if _, err := r.Apply(registry.RenewOp("orders", id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A peer's heartbeat counts too, as it does for self-preservation.
	if _, err := r.Apply(registry.RenewOp("BILLING", "b1").From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	// An unknown instance counts nothing.
	if _, err := r.Apply(registry.RenewOp("ORDERS", "nobody")); err == nil {
		t.Fatal("renewal of an unknown instance succeeded")
	}
	got := r.AppRenewals(nil)
	if len(got) != 2 || got["ORDERS"] != 6 || got["BILLING"] != 1 {
		t.Fatalf("AppRenewals = %v, want ORDERS 6, BILLING 1", got)
	}
	// A re-registered instance keeps counting into the same total, and the
	// map passed in is reused.
	r.Apply(registry.CancelOp("ORDERS", "o1"))
	mustRegister(t, r, registrytest.NewInstance("ORDERS", "o1"))
	if _, err := r.Apply(registry.RenewOp("ORDERS", "o1")); err != nil {
		t.Fatal(err)
	}
	if again := r.AppRenewals(got); again["ORDERS"] != 7 || len(again) != 2 {
		t.Fatalf("after re-registering: %v", again)
	}
}

func TestRegistry_AppRenewals_renewAllocatesNothing(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("ORDERS", "o1"))
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Apply(registry.RenewOp("ORDERS", "o1")); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("Renew allocates %.1f times", allocs)
	}
}

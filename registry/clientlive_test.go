package registry_test

import (
	"slices"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// ClientLive lists what clients register or renew through this node within
// two renewal intervals; copies heard from peers or syncUp are not listed.
func TestRegistry_ClientLive(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	ids := func() []string {
		var out []string
		for _, in := range r.ClientLive() {
			out = append(out, in.ID())
		}
		slices.Sort(out)
		// IsClientLive answers the same, one instance at a time.
		for _, id := range []string{"client", "peer", "synced", "absent"} {
			if got, want := r.IsClientLive("web", id), slices.Contains(out, id); got != want {
				t.Errorf("IsClientLive(web, %s) = %v, ClientLive lists it: %v", id, got, want)
			}
		}
		return out
	}
	mustRegister(t, r, registrytest.NewInstance("WEB", "client"))
	if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("WEB", "peer")).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("WEB", "synced")).From(registry.OriginSync)); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"client"}) {
		t.Fatalf("after registers: %v", got)
	}
	// A peer's heartbeat does not make a copy this node's; a client's does.
	clk.Advance(50 * time.Second)
	if _, err := r.Apply(registry.RenewOp("WEB", "peer").From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.RenewOp("WEB", "synced")); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []string{"client", "synced"}) {
		t.Fatalf("after renewals at 50 s: %v", got)
	}
	// Two renewal intervals (2 × 30 s) without a client's word: no longer.
	clk.Advance(11 * time.Second)
	if got := ids(); !slices.Equal(got, []string{"synced"}) {
		t.Fatalf("at 61 s: %v", got)
	}
}

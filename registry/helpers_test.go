package registry_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/rs/zerolog"
)

// mustNew returns a registry on a manual clock with default settings,
// changed by opts.
func mustNew(tb testing.TB, opts ...func(*registry.Config)) (*registry.Registry, *registrytest.Clock) {
	tb.Helper()
	clk := registrytest.NewClock()
	cfg := registry.DefaultConfig()
	cfg.Now = clk.Now
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	if t, ok := tb.(*testing.T); ok {
		cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := registry.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r, clk
}

func selfPreservationOff(c *registry.Config) { c.SelfPreservation = false }

func mustRegister(tb testing.TB, r *registry.Registry, in *registry.Instance) *registry.Instance {
	tb.Helper()
	stored, err := r.Apply(registry.RegisterOp(in))
	if err != nil {
		tb.Fatalf("Register(%s/%s): %v", in.App, in.ID(), err)
	}
	return stored
}

// registerN registers n instances of app "APP" with ids i-0 … i-(n-1).
func registerN(tb testing.TB, r *registry.Registry, n int, opts ...registrytest.Option) []registry.InstanceKey {
	tb.Helper()
	keys := make([]registry.InstanceKey, n)
	for i := range n {
		id := fmt.Sprintf("i-%d", i)
		mustRegister(tb, r, registrytest.NewInstance("APP", id, opts...))
		keys[i] = registry.InstanceKey{App: "APP", ID: id}
	}
	return keys
}

// renewAll renews every key once.
func renewAll(tb testing.TB, r *registry.Registry, keys []registry.InstanceKey) {
	tb.Helper()
	for _, k := range keys {
		if _, err := r.Apply(registry.RenewOp(k.App, k.ID)); err != nil {
			tb.Fatalf("Renew(%s): %v", k, err)
		}
	}
}

// heartbeatFor advances the clock by total in steps of interval, renewing
// keys at each step (the clients that are alive).
func heartbeatFor(tb testing.TB, r *registry.Registry, clk *registrytest.Clock, keys []registry.InstanceKey, interval, total time.Duration) {
	tb.Helper()
	for elapsed := time.Duration(0); elapsed < total; elapsed += interval {
		clk.Advance(interval)
		renewAll(tb, r, keys)
	}
}

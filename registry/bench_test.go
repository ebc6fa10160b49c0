package registry_test

import (
	"fmt"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func BenchmarkRegistry_Renew(b *testing.B) {
	r, _ := mustNew(b)
	registerN(b, r, 10_000)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Renew("APP", ids[i%len(ids)], registry.Heartbeat{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRegistry_RenewParallel(b *testing.B) {
	r, _ := mustNew(b)
	registerN(b, r, 10_000)
	r.SetChangeHook(func(registry.Change) {})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, _ = r.Renew("APP", "i-42", registry.Heartbeat{})
			i++
		}
	})
}

func BenchmarkRegistry_Register(b *testing.B) {
	r, _ := mustNew(b)
	instances := make([]*registry.Instance, 100_000)
	for i := range instances {
		instances[i] = registrytest.NewInstance(fmt.Sprintf("APP-%d", i%100), fmt.Sprintf("i-%d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Register(instances[i%len(instances)], false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRegistry_Snapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, _ := mustNew(b)
			for i := range n {
				mustRegister(b, r, registrytest.NewInstance(fmt.Sprintf("APP-%d", i%200), fmt.Sprintf("i-%d", i)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// One change per iteration, so every Snapshot is a rebuild.
				if _, err := r.UpdateStatus("APP-0", "i-0", []registry.Status{registry.StatusUp, registry.StatusDown}[i%2], 0, false); err != nil {
					b.Fatal(err)
				}
				_ = r.Snapshot()
			}
		})
	}
}

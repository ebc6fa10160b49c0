package registry_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
		if _, err := r.Apply(registry.RenewOp("APP", ids[i%len(ids)])); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRegistry_RenewParallel renews 10k instances from every
// goroutine, each walking the ids from its own offset, with a change
// consumer attached, as in a node. Heartbeats share no exclusive lock, so
// -cpu 2 should take well under 0.75× the -cpu 1 time per renewal.
func BenchmarkRegistry_RenewParallel(b *testing.B) {
	r, _ := mustNewRealClock(b)
	registerN(b, r, 10_000)
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-%d", i)
	}
	// As in a node, a consumer reads the change stream and takes the
	// renewal feed when woken, at most every 20 ms (replication's feed takes
	// it every 500 ms, replication.renewalTakeInterval, or a batch at a
	// time: 20 ms is harder).
	ready := r.RenewalsReady()
	cur := r.Subscribe()
	defer cur.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []registry.Renewal
		wake := ready
		pause := time.NewTimer(time.Hour)
		defer pause.Stop()
		for {
			select {
			case <-stop:
				return
			case <-wake:
				buf = r.TakeRenewals(buf)
				wake = nil
				pause.Reset(20 * time.Millisecond)
			case <-pause.C:
				wake = ready
			case <-cur.Ready():
				cur.Read(nil)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			if _, err := r.Apply(registry.RenewOp("APP", ids[i%len(ids)])); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkRegistry_RenewParallelControl is the yardstick for
// BenchmarkRegistry_RenewParallel (its name matches the same -bench
// pattern, so both run in one sitting): compute of about a renewal's cost
// under RunParallel that touches no shared memory. What it gains from
// -cpu 1 to -cpu 2 is what this machine can give right now (other work on
// the host takes its share); renewals that share nothing written should
// gain nearly as much, and spend about the same CPU per operation.
func BenchmarkRegistry_RenewParallelControl(b *testing.B) {
	var sink atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		x := uint64(88172645463325252)
		for pb.Next() {
			for range 96 { // xorshift64: ~1 ns a step, no memory touched
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
		}
		sink.Add(x) // once per goroutine, so the loop is not dead code
	})
}

// mustNewRealClock is mustNew on time.Now: a benchmark measures the
// registry, not the test clock's mutex.
func mustNewRealClock(tb testing.TB) (*registry.Registry, error) {
	tb.Helper()
	cfg := registry.DefaultConfig()
	r, err := registry.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r, nil
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
		if _, err := r.Apply(registry.RegisterOp(instances[i%len(instances)])); err != nil {
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
				if _, err := r.Apply(registry.StatusOp("APP-0", "i-0", []registry.Status{registry.StatusUp, registry.StatusDown}[i%2])); err != nil {
					b.Fatal(err)
				}
				_ = r.Snapshot()
			}
		})
	}
}

// BenchmarkRegistry_SelfPreservationState: /admin/status, every metrics
// scrape and the console read it; 100k instances that all arrived within
// the window (the worst case: each is an arrival) must not make it walk
// them.
func BenchmarkRegistry_SelfPreservationState(b *testing.B) {
	r, _ := mustNew(b)
	renewAll(b, r, registerN(b, r, 100_000))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if sp := r.SelfPreservationState(); sp.ExpectedRenewsPerMin != 200_000 || sp.ArrivingRenewsPerMin != 200_000 {
			b.Fatalf("%+v", sp)
		}
	}
}

// BenchmarkRegistry_RenewRandom renews instances in a random order, 50 per
// app, with the renewal feed on and taken every 4096 renewals (as
// replication takes it), at 10k and at 1M instances: what a heartbeat
// costs the registry once its maps and leases no longer fit in the caches.
// `-bench RenewRandom/1M` takes ~10 s and ~2 GB to set up.
func BenchmarkRegistry_RenewRandom(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			r, _ := mustNewRealClock(b)
			apps := make([]string, n)
			ids := make([]string, n)
			for i := range n {
				apps[i], ids[i] = fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i)
				in := registrytest.NewInstance(apps[i], ids[i],
					registrytest.WithMetadata(map[string]string{"management.port": "8081", "version": "1.4.2", "zone": "eu-west-1a"}))
				if _, err := r.Apply(registry.RegisterOp(in)); err != nil {
					b.Fatal(err)
				}
			}
			r.RenewalsReady()
			// A heartbeat's key arrives in a request, in strings of its
			// own: a lookup that compared the stored key would read it.
			for i := range n {
				apps[i], ids[i] = strings.Clone(apps[i]), strings.Clone(ids[i])
			}
			var taken []registry.Renewal
			b.ReportAllocs()
			b.ResetTimer()
			for i := uint64(0); b.Loop(); i++ {
				k := (i * 0x9E3779B97F4A7C15 >> 17) % uint64(n)
				if _, err := r.Apply(registry.RenewOp(apps[k], ids[k])); err != nil {
					b.Fatal(err)
				}
				if i%4096 == 4095 {
					taken = r.TakeRenewals(taken)
				}
			}
		})
	}
}

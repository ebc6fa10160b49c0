package registry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// The arrivals' sums by slice give what a walk of every arrival gives, at
// every step of random registrations (some again, with another interval),
// renewals, cancels, clock moves and an opening for traffic.
func TestArrivalSlices_matchAWalkOfTheArrivals(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			now := t0
			cfg := DefaultConfig()
			cfg.Now = func() time.Time { return now }
			cfg.Rand = rand.New(rand.NewPCG(seed, 8))
			cfg.RenewalRateWindow = time.Duration(1+rng.IntN(60)) * time.Second
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			inst := func(i int) *Instance {
				return &Instance{
					InstanceID: fmt.Sprintf("i-%d", i), App: "APP", HostName: "h", IPAddr: "10.0.0.1",
					Status: StatusUp, OverriddenStatus: StatusUnknown, VIPAddress: "app",
					DataCenterInfo:      DataCenterInfo{Class: DataCenterClassDefault, Name: "MyOwn"},
					RenewalIntervalSecs: rng.IntN(40), // 0: the default
				}
			}
			for step := 0; step < 3000; step++ {
				i := rng.IntN(200)
				switch k := rng.IntN(100); {
				case k < 35:
					_, _ = r.Apply(RegisterOp(inst(i)))
				case k < 75:
					_, _ = r.Apply(RenewOp("APP", fmt.Sprintf("i-%d", i)))
				case k < 83:
					_, _ = r.Apply(CancelOp("APP", fmt.Sprintf("i-%d", i)))
				case k < 85:
					r.EvictExpired() // prunes the arrivals too
				case k < 99:
					now = now.Add(time.Duration(rng.IntN(int(cfg.RenewalRateWindow / 4))))
				default:
					r.OpenForTraffic()
				}
				r.mu.RLock()
				got := r.provenArrivalsSince(r.renewals.lastWindowSlice(now))
				want := 0.0
				lastStart := windowStart(r.renewals, now)
				for l, a := range r.arrivals.leases {
					if !a.at.Before(lastStart) && l.proven.Load() {
						want += a.renewsPerMin
					}
				}
				r.mu.RUnlock()
				if math.Abs(got-want) > 1e-9 {
					t.Fatalf("step %d: arriving %v by slices, %v by a walk", step, got, want)
				}
			}
		})
	}
}

// A mass registration followed by nothing but heartbeats: the eviction
// runs forget its arrivals once they are two windows old, and the map that
// held them is let go, with no registration to trigger it.
func TestArrivals_forgottenByEvictionRunsAlone(t *testing.T) {
	const n = 2000
	f := registerArrivalsFleet(t, n)
	r := f.r
	count := func() (int, int) {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return len(r.arrivals.leases), len(r.arrivals.slices)
	}
	if a, _ := count(); a != n {
		t.Fatalf("after %d registrations: %d arrivals", n, a)
	}
	// Within two windows the arrivals still count.
	f.windowOfRenewals(t)
	r.EvictExpired()
	if a, _ := count(); a != n {
		t.Fatalf("one window on: %d arrivals, want all %d", a, n)
	}
	f.windowOfRenewals(t)
	r.EvictExpired()
	if a, sl := count(); a != 0 || sl != 0 {
		t.Fatalf("two windows on, after an eviction run: %d arrivals in %d slices, want none", a, sl)
	}
	if got := r.Len(); got != n {
		t.Fatalf("%d instances, want %d (nothing expired)", got, n)
	}
}

// Forgetting a mass of arrivals gives their memory back: a Go map keeps its
// largest table when emptied, so the pruned map is a new one. The same
// after OpenForTraffic, which forgets every arrival (a syncUp copy).
func TestArrivals_prunedMapGivesItsMemoryBack(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 100k instances")
	}
	for _, how := range []string{"eviction run", "open for traffic"} {
		t.Run(how, func(t *testing.T) {
			const n = 100_000
			f := registerArrivalsFleet(t, n)
			r := f.r
			heap := func() int64 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return int64(ms.HeapAlloc)
			}
			var freed int64
			if how == "eviction run" {
				f.windowOfRenewals(t)
				f.windowOfRenewals(t)
				before := heap()
				r.EvictExpired()
				freed = before - heap()
			} else {
				before := heap()
				r.OpenForTraffic()
				freed = before - heap()
			}
			if r.Len() != n {
				t.Fatalf("%d instances left of %d", r.Len(), n)
			}
			// The table of 100k arrivals is ~5.6 MB (48 B slots at 7/8 load).
			if freed < 3<<20 {
				t.Fatalf("forgetting %d arrivals freed %d KiB, want the map's table (> 3 MiB)", n, freed>>10)
			}
			runtime.KeepAlive(r)
		})
	}
}

// arrivalsFleet is a registry on a clock the test moves, with n instances
// (50 an app) registered at t0 and nothing else.
type arrivalsFleet struct {
	r   *Registry
	cfg Config
	now *time.Time
	n   int
}

func registerArrivalsFleet(t *testing.T, n int) arrivalsFleet {
	t.Helper()
	now := t0
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		in := &Instance{InstanceID: fmt.Sprintf("i-%d", i), App: fmt.Sprintf("APP-%d", i/50), HostName: "h", IPAddr: "10.0.0.1",
			Status: StatusUp, OverriddenStatus: StatusUnknown, DataCenterInfo: DataCenterInfo{Class: DataCenterClassDefault, Name: "MyOwn"}}
		if _, err := r.Apply(RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	return arrivalsFleet{r: r, cfg: cfg, now: &now, n: n}
}

// windowOfRenewals moves the clock one renewal window (and a second) on and
// renews every instance, so none expires and every one is proven.
func (f arrivalsFleet) windowOfRenewals(t *testing.T) {
	t.Helper()
	*f.now = f.now.Add(f.cfg.RenewalRateWindow + time.Second)
	for i := range f.n {
		if _, err := f.r.Apply(RenewOp(fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// windowStart is when the window that m's Count reports began: the walk's
// own reckoning, apart from lastWindowSlice's slice numbers.
func windowStart(m *MeasuredRate, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollLocked(m.sliceOf(now))
	return time.Unix(0, m.start.Load()).Add(time.Duration(m.cur.Load()-rateSlices) * m.slice)
}

package registry

import (
	"fmt"
	"math"
	"math/rand/v2"
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
			// arrived is the test's own record of when each present
			// instance arrived (registered while absent) since the last
			// opening: what the registry must count, walked here.
			arrived := map[int]time.Time{}
			present := func(i int) bool {
				r.mu.RLock()
				defer r.mu.RUnlock()
				return r.lookupLocked("APP", fmt.Sprintf("i-%d", i)) != nil
			}
			for step := 0; step < 3000; step++ {
				i := rng.IntN(200)
				switch k := rng.IntN(100); {
				case k < 35:
					was := present(i)
					_, _ = r.Apply(RegisterOp(inst(i)))
					if !was && present(i) {
						arrived[i] = now
					}
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
					clear(arrived)
				}
				r.mu.RLock()
				got := r.provenArrivalsSince(r.renewals.lastWindowSlice(now))
				want := 0.0
				lastStart := windowStart(r.renewals, now)
				for i, at := range arrived {
					l := r.lookupLocked("APP", fmt.Sprintf("i-%d", i))
					if l == nil { // cancelled or evicted
						delete(arrived, i)
						continue
					}
					if !at.Before(lastStart) && l.proven.Load() {
						want += l.renewsPerMin
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
	count := func() (arrivals, slices int) {
		r.mu.RLock()
		defer r.mu.RUnlock()
		for _, a := range r.apps {
			for _, l := range a.leases {
				if r.arrivalOf(l) != nil {
					arrivals++
				}
			}
		}
		return arrivals, len(r.arrivals.slices)
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

// Arrivals cost no memory per lease: a fleet's registrations leave the
// log a few slices, whatever their number, and forgetting them (an
// eviction run two windows on, or OpenForTraffic) leaves no lease counted.
func TestArrivals_keptBySliceNotByLease(t *testing.T) {
	for _, how := range []string{"eviction run", "open for traffic"} {
		t.Run(how, func(t *testing.T) {
			const n = 5000
			f := registerArrivalsFleet(t, n)
			r := f.r
			r.mu.RLock()
			slices, ids := len(r.arrivals.slices), len(r.arrivals.byID)
			r.mu.RUnlock()
			if slices != 1 || ids != 1 {
				t.Fatalf("%d arrivals at one moment: %d slices, %d ids, want 1 and 1", n, slices, ids)
			}
			if how == "eviction run" {
				f.windowOfRenewals(t)
				f.windowOfRenewals(t)
				r.EvictExpired()
			} else {
				r.OpenForTraffic()
			}
			r.mu.RLock()
			defer r.mu.RUnlock()
			if len(r.arrivals.slices) != 0 || len(r.arrivals.byID) != 0 {
				t.Fatalf("after the %s: %d slices, %d ids left", how, len(r.arrivals.slices), len(r.arrivals.byID))
			}
			if got := r.provenArrivalsSince(math.MinInt64); got != 0 {
				t.Fatalf("after the %s: %v renewals/min still arriving", how, got)
			}
		})
	}
}

// A lease registered again after its arrival was forgotten is no arrival,
// even in a slice whose number an earlier slice had (OpenForTraffic
// restarts the numbers): ids are never reused.
func TestArrivals_forgottenLeaseStaysForgotten(t *testing.T) {
	f := registerArrivalsFleet(t, 10)
	r := f.r
	r.OpenForTraffic() // slice numbers start again at 0, as the fleet's did
	in := &Instance{InstanceID: "new", App: "APP-0", HostName: "h", IPAddr: "10.0.0.1",
		Status: StatusUp, OverriddenStatus: StatusUnknown, DataCenterInfo: DataCenterInfo{Class: DataCenterClassDefault, Name: "MyOwn"}}
	if _, err := r.Apply(RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	arriving := 0
	for _, a := range r.apps {
		for _, l := range a.leases {
			if r.arrivalOf(l) != nil {
				arriving++
				if l.id != "new" {
					t.Errorf("%s arrived before the opening and counts as arriving", l.id)
				}
			}
		}
	}
	if arriving != 1 {
		t.Fatalf("%d arriving, want the one registered after the opening", arriving)
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

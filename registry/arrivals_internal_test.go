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
			for step := 0; step < 3000; step++ {
				i := rng.IntN(200)
				switch k := rng.IntN(100); {
				case k < 35:
					_, _ = r.Apply(RegisterOp(inst(i)))
				case k < 75:
					_, _ = r.Apply(RenewOp("APP", fmt.Sprintf("i-%d", i)))
				case k < 85:
					_, _ = r.Apply(CancelOp("APP", fmt.Sprintf("i-%d", i)))
				case k < 99:
					now = now.Add(time.Duration(rng.IntN(int(cfg.RenewalRateWindow / 4))))
				default:
					r.OpenForTraffic()
				}
				r.mu.RLock()
				got := r.provenArrivalsSince(r.renewals.lastWindowSlice(now))
				want := 0.0
				lastStart := r.renewals.LastWindowStart(now)
				for l, a := range r.arrivals {
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

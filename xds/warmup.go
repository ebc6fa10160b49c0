package xds

import (
	"math"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/muster-registry/muster/registry"
)

// Warm-up (muster.traffic.warmup-seconds, docs/traffic.md): after an
// instance turns UP its endpoint weight starts at WarmupStartPercent of its
// full weight and rises linearly in WarmupSteps steps, reaching the full
// weight when the warm-up ends. Each step is one EDS rebuild of the app,
// so a warm-up costs WarmupSteps pushes, not one per tick.
const (
	WarmupSteps        = 5
	WarmupStartPercent = 10
	// WeightScale multiplies every endpoint weight while warm-up is on
	// anywhere, so a warming endpoint's share (weight × percent / 100) is
	// an integer: the numbers change, the ratios between endpoints do not.
	// 65535 × 100 stays far below grpc-go's uint32 limit per endpoint.
	WeightScale = 100
)

// rampPercent is the share, in percent of the full weight, of an endpoint
// elapsed into a warm-up of total, and when (from the warm-up's start) it
// next changes; 100 and 0 once the warm-up is over. Step k holds for
// elapsed in [k×total/WarmupSteps, (k+1)×total/WarmupSteps) and gives
// WarmupStartPercent + (100 − WarmupStartPercent) × k / WarmupSteps:
// 10, 28, 46, 64, 82, then 100.
func rampPercent(elapsed, total time.Duration) (percent int, next time.Duration) {
	if total <= 0 || elapsed >= total {
		return 100, 0
	}
	elapsed = max(elapsed, 0)
	step := int64(elapsed) * WarmupSteps / int64(total)
	percent = WarmupStartPercent + (100-WarmupStartPercent)*int(step)/WarmupSteps
	// Rounded up, so that at next the step has really changed (a wake-up
	// that finds the same step would schedule itself again at once).
	boundary := (step + 1) * int64(total)
	next = time.Duration((boundary + WarmupSteps - 1) / WarmupSteps)
	return percent, next
}

// warmups follows when each instance turned UP, as this node saw it, for
// the apps that warm up. It belongs to the builder (one goroutine).
//
// The ramp starts when a build finds an instance served (UP, usable) that
// the app's previous build did not serve: a registration, a replicated
// registration, DOWN/OUT_OF_SERVICE/STARTING back to UP. A re-registration
// of an instance that stays UP starts nothing. The instances served at the
// first build (the node opening, after its syncUp) are taken as warm:
// serviceUpTimestamp cannot tell, because every node sets it to its own
// clock when it first stores an instance (registry.register), so after a
// restart it would say that everything just came up.
type warmups struct {
	cfg     Config
	on      bool
	started bool                            // a first build happened
	starts  map[string]map[string]time.Time // app → instance id → ramp start; only apps with one
}

func newWarmups(cfg Config) *warmups {
	return &warmups{cfg: cfg, on: cfg.warmupOn(), starts: map[string]map[string]time.Time{}}
}

// observe notes the instances app serves now against those it served
// (prev; nil for an app new to this build) at now.
func (w *warmups) observe(app string, served map[string]bool, prev map[string]bool, now time.Time) {
	starts := w.starts[app]
	for id := range starts {
		if !served[id] {
			delete(starts, id) // gone or not UP: a return starts over
		}
	}
	if w.started && w.cfg.warmupOf(app) > 0 {
		for id := range served {
			if !prev[id] {
				if starts == nil {
					starts = map[string]time.Time{}
				}
				starts[id] = now
			}
		}
	}
	if len(starts) == 0 {
		delete(w.starts, app)
	} else {
		w.starts[app] = starts
	}
}

// percents are the shares of app's warming instances at now (nil when
// none), dropping the warm-ups that ended, and the earliest time one of
// them changes (zero when none will).
func (w *warmups) percents(app string, now time.Time) (map[string]warmth, time.Time) {
	starts := w.starts[app]
	if len(starts) == 0 {
		return nil, time.Time{}
	}
	total := w.cfg.warmupOf(app)
	var out map[string]warmth
	var next time.Time
	for id, start := range starts {
		pct, at := rampPercent(now.Sub(start), total)
		if pct == 100 {
			delete(starts, id)
			continue
		}
		if out == nil {
			out = map[string]warmth{}
		}
		out[id] = warmth{percent: pct, until: start.Add(total)}
		if t := start.Add(at); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if len(starts) == 0 {
		delete(w.starts, app)
	}
	return out, next
}

// forget drops an app that is gone.
func (w *warmups) forget(app string) { delete(w.starts, app) }

// warming counts the endpoints warming up.
func (w *warmups) warming() int {
	n := 0
	for _, s := range w.starts {
		n += len(s)
	}
	return n
}

// warmth is where one warming instance is in its ramp.
type warmth struct {
	percent int
	until   time.Time
}

// sameWarmth tells whether two builds' ramps give the same weights.
func sameWarmth(a, b map[string]warmth) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		if y, ok := b[id]; !ok || y.percent != x.percent {
			return false
		}
	}
	return true
}

// servedIDs are the ids of app's instances that xDS serves (UP, usable).
func servedIDs(app registry.AppView) map[string]bool {
	ids := make(map[string]bool, len(app.Instances))
	for _, iv := range app.Instances {
		if _, _, ok := usable(iv.Instance); ok {
			ids[iv.Instance.ID()] = true
		}
	}
	return ids
}

// fitWeights divides every weight of eps when their sum passes what
// grpc-go accepts in one locality (2^32−1), so that an app of hundreds of
// maximum-weight instances is not refused once scaled; ratios are kept as
// well as integers allow. It returns the divisor (1: unchanged).
func fitWeights(eps []endpoint) uint32 {
	var sum uint64
	for _, ep := range eps {
		sum += uint64(ep.weight)
	}
	if sum <= math.MaxUint32 {
		return 1
	}
	div := sum/math.MaxUint32 + 1
	for i := range eps {
		eps[i].weight = uint32(max(uint64(eps[i].weight)/div, 1))
	}
	return uint32(div)
}

// ringHashConfig is the cluster's load balancing while warm-up is on:
// RING_HASH with no hash policy on the route, so grpc-go (a random hash
// per call: internal/xds/resolver serviceconfig.go generateHash) and Envoy
// (a random value without a hash key) pick an endpoint with a probability
// proportional to its weight. grpc-go's ROUND_ROBIN cluster (xds_wrr_locality
// over round_robin) weighs localities but ignores endpoint weights within
// one (docs/xds.md, "Endpoint weights and grpc-go"). 4096 ring entries is
// grpc-go's cap (GRPC_RING_HASH_CAP): the finest shares it draws.
func ringHashConfig(c *clusterv3.Cluster) {
	c.LbPolicy = clusterv3.Cluster_RING_HASH
	c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
		MinimumRingSize: wrapperspb.UInt64(4096),
		HashFunction:    clusterv3.Cluster_RingHashLbConfig_XX_HASH,
	}}
}

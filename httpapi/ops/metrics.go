package ops

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/muster-registry/muster/registry"
)

// MetricsRegistry is what /metrics reads of the registry.
type MetricsRegistry interface {
	Stats() registry.Stats
	Len() int
	Version() uint64
	SelfPreservationState() registry.SelfPreservation
	Tombstones() registry.TombstoneStats
}

// MetricsConfig is what /metrics exports.
type MetricsConfig struct {
	Registry MetricsRegistry
	// Registerer is where the collectors go; nil makes a private registry
	// with the Go and process collectors. Gatherer is what /metrics
	// serves (nil with a Registerer: prometheus.DefaultGatherer).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Ready reports whether the node has opened for traffic; nil means
	// always.
	Ready func() bool
	// Peers lists the replication peers; nil means none.
	Peers func() []PeerInfo
	// Replication and AntiEntropy report their figures; nil means none.
	Replication ReplicationStats
	AntiEntropy AntiEntropyStats
	// Extra are the HTTP layer's own collectors (payloads, watches,
	// limits, authentication).
	Extra []prometheus.Collector
}

// Metrics holds the node's Prometheus collectors and the request latency
// histogram, and serves /metrics.
type Metrics struct {
	handler http.Handler
	latency *prometheus.HistogramVec

	// mu guards observers, a cache of resolved histogram children, so the
	// hot path does not build label slices on every request.
	mu        sync.RWMutex
	observers map[observerKey]prometheus.Observer
}

type observerKey struct {
	route, method string
	code          int
}

// NewMetrics registers the collectors.
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	reg, gatherer := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gatherer = r, r
		if err := r.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := r.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	ready := cfg.Ready
	if ready == nil {
		ready = func() bool { return true }
	}
	peers := cfg.Peers
	if peers == nil {
		peers = func() []PeerInfo { return nil }
	}
	m := &Metrics{observers: map[observerKey]prometheus.Observer{}}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "muster_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by route, method and status code.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route", "method", "code"})

	rg := cfg.Registry
	stats := func(pick func(st registry.Stats) uint64) func() float64 {
		return func() float64 { return float64(pick(rg.Stats())) }
	}
	cs := []prometheus.Collector{
		m.latency,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_registrations_total", Help: "Registrations accepted, replicated ones included."},
			stats(func(v registry.Stats) uint64 { return v.Registrations })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_renewals_total", Help: "Successful lease renewals (heartbeats), replicated ones included."},
			stats(func(v registry.Stats) uint64 { return v.Renewals })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_cancels_total", Help: "Explicit cancellations, replicated ones included."},
			stats(func(v registry.Stats) uint64 { return v.Cancels })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_evictions_total", Help: "Expired leases evicted by this node."},
			stats(func(v registry.Stats) uint64 { return v.Evictions })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_instances", Help: "Registered instances."},
			func() float64 { return float64(rg.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_registry_version", Help: "Registry content version (bumps on every visible change)."},
			func() float64 { return float64(rg.Version()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_expected_renews_per_minute", Help: "Renewals per minute the registered instances should send."},
			func() float64 { return rg.SelfPreservationState().ExpectedRenewsPerMin }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_renews_threshold", Help: "Renewals per minute below which self-preservation stops eviction."},
			func() float64 { return float64(rg.SelfPreservationState().RenewsThreshold) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_renews_last_minute", Help: "Renewals counted in the last complete window, per minute."},
			func() float64 { return float64(rg.SelfPreservationState().RenewsLastMin) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_self_preservation_active", Help: "1 while self-preservation holds expiry back."},
			func() float64 { return boolFloat(rg.SelfPreservationState().Active) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_lease_expiration_enabled", Help: "1 when an eviction run would evict expired leases."},
			func() float64 { return boolFloat(rg.SelfPreservationState().LeaseExpirationEnabled) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_open_for_traffic", Help: "1 once the node has synced and opened for traffic."},
			func() float64 { return boolFloat(ready()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_tombstones", Help: "Cancelled instances remembered so that an older copy from a peer cannot bring them back (at most 131,072)."},
			func() float64 { return float64(rg.Tombstones().Kept) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_tombstones_dropped_total", Help: "Tombstones dropped at the bound before they expired: past it, a stale copy of such an instance could be adopted again."},
			func() float64 { return float64(rg.Tombstones().Dropped) }),
	}
	cs = append(cs, cfg.Extra...)
	if cfg.Replication != nil {
		cs = append(cs, newReplicationCollector(cfg.Replication))
	}
	if cfg.AntiEntropy != nil {
		cs = append(cs, newAntiEntropyCollector(cfg.AntiEntropy))
	}
	cs = append(cs, newPeerCollector(peers))
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	return m, nil
}

// Handler serves the metrics text (/metrics, the actuator's /prometheus).
func (m *Metrics) Handler() http.Handler { return m.handler }

// Observe records one request's latency by route template (not by raw
// path, so instance ids do not explode the label space).
func (m *Metrics) Observe(route, method string, code int, elapsed time.Duration) {
	m.observer(route, method, code).Observe(elapsed.Seconds())
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) observer(route, method string, code int) prometheus.Observer {
	k := observerKey{route, method, code}
	m.mu.RLock()
	o, ok := m.observers[k]
	m.mu.RUnlock()
	if ok {
		return o
	}
	o = m.latency.WithLabelValues(route, method, strconv.Itoa(code))
	m.mu.Lock()
	m.observers[k] = o
	m.mu.Unlock()
	return o
}

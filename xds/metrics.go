package xds

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	streams prometheus.Gauge
	refused *prometheus.CounterVec
	pushes  *prometheus.CounterVec
	// pushesByType are pushes' counters resolved once (read-only after
	// newMetrics): every response of every stream counts one, and a
	// WithLabelValues per response hashes the label under the vector's lock.
	pushesByType map[string]prometheus.Counter
	nacks        *prometheus.CounterVec
	pushLatency  prometheus.Histogram
	builds       prometheus.Counter
	buildSeconds prometheus.Histogram
	names        prometheus.Gauge
	warming      prometheus.Gauge
}

// typeLabels are the type label values; any other type URL is "other".
var typeLabels = []string{"cds", "eds", "lds", "rds", "other"}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_xds_streams",
			Help: "xDS streams open on this node (ADS and per-type, state of the world and incremental)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_xds_streams_refused_total",
			Help: "xDS streams refused, by reason: max_streams (RESOURCE_EXHAUSTED), unauthenticated, forbidden."}, []string{"reason"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_xds_pushes_total",
			Help: "xDS responses sent, by resource type."}, []string{"type"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_xds_nacks_total",
			Help: "xDS responses a client rejected (a request carrying error_detail), by resource type."}, []string{"type"}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_xds_push_latency_seconds",
			Help:    "From reading a registry change off the change stream to sending the xDS response that carries it, per stream open before the change.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		builds: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_xds_snapshots_total",
			Help: "xDS snapshot versions built (one per batch of registry changes)."}),
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_xds_snapshot_build_seconds",
			Help:    "Time to build and set one xDS snapshot version for every zone.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		names: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_xds_names",
			Help: "xDS names served (apps and VIPs): each is a listener, route, cluster and assignment."}),
		warming: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_xds_warming_endpoints",
			Help: "Endpoints served below their full weight because they are warming up (muster.traffic.warmup-seconds)."}),
	}
	for _, r := range []string{"max_streams", "unauthenticated", "forbidden"} {
		m.refused.WithLabelValues(r)
	}
	m.pushesByType = make(map[string]prometheus.Counter, len(typeLabels))
	for _, t := range typeLabels {
		m.pushesByType[t] = m.pushes.WithLabelValues(t)
		m.nacks.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.refused, m.pushes, m.nacks, m.pushLatency, m.builds, m.buildSeconds, m.names, m.warming)
	}
	return m
}

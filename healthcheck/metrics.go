package healthcheck

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	probes      *prometheus.CounterVec
	byOutcome   [3][2]prometheus.Counter // probes' series by Mode and ok, looked up once
	refused     prometheus.Counter
	flips       *prometheus.CounterVec
	activations prometheus.Counter
	guarded     *prometheus.GaugeVec
	probed      prometheus.Gauge
	marked      prometheus.Gauge
	latency     prometheus.Histogram
	round       prometheus.Gauge
}

// newMetrics registers the health-check metrics on reg (nil: kept
// unregistered).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_health_check_probes_total",
			Help: "Health-check probes run by this node, by mode (http, tcp) and result (ok, fail)."}, []string{"mode", "result"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_health_check_refused_total",
			Help: "Instances not probed in a round because their address or URL breaks the health-check rules."}),
		flips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_health_check_flips_total",
			Help: "Health-check marks set (to=down) and lifted (to=up) by this node."}, []string{"to"}),
		activations: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_health_check_guard_activations_total",
			Help: "Times the guard turned on for an app: too many of its instances failed in one round, none was marked."}),
		guarded: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "muster_health_check_guarded",
			Help: "1 while the health-check guard holds back marks of the app on this node."}, []string{"app"}),
		probed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_health_check_probed_instances",
			Help: "Instances this node probed in its last round."}),
		marked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_health_check_marked_instances",
			Help: "Instances marked DOWN by health checks in the registry (every node's marks)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_health_check_probe_duration_seconds",
			Help: "Time one probe took.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		round: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_health_check_round_duration_seconds",
			Help: "Time this node's last health-check round took."}),
	}
	// Every series but the per-app guard starts at 0, so rates and alerts
	// see it before the first event.
	for _, mode := range []Mode{ModeHTTP, ModeTCP} {
		m.byOutcome[mode][0] = m.probes.WithLabelValues(mode.String(), "fail")
		m.byOutcome[mode][1] = m.probes.WithLabelValues(mode.String(), "ok")
	}
	m.flips.WithLabelValues("down")
	m.flips.WithLabelValues("up")
	if reg != nil {
		reg.MustRegister(m.probes, m.refused, m.flips, m.activations, m.guarded, m.probed, m.marked, m.latency, m.round)
	}
	return m
}

// probe counts one probe's outcome.
func (m *metrics) probe(mode Mode, ok bool) {
	if c := m.byOutcome[mode][boolIndex(ok)]; c != nil {
		c.Inc()
	}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

package dns

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	queries     *prometheus.CounterVec
	refused     *prometheus.CounterVec
	truncated   prometheus.Counter
	rateLimited prometheus.Counter
	latency     prometheus.Histogram
}

// newMetrics registers the DNS metrics on reg (nil: kept unregistered,
// for servers in tests that do not look at them).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_dns_queries_total",
			Help: "DNS queries answered, by query type and response code."}, []string{"qtype", "rcode"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_dns_refused_total",
			Help: "DNS queries refused: source outside muster.dns.allowed-cidrs, or name outside the domain."}, []string{"reason"}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_dns_truncated_total",
			Help: "DNS answers truncated (TC set) to the UDP size limit."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_dns_rate_limited_total",
			Help: "UDP DNS queries dropped by the per-source response rate limit."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_dns_query_duration_seconds",
			Help: "Time to answer one DNS query.", Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .01, .05}}),
	}
	if reg != nil {
		reg.MustRegister(m.queries, m.refused, m.truncated, m.rateLimited, m.latency)
	}
	return m
}

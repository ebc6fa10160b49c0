package dns

import (
	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	queries     *prometheus.CounterVec
	refused     *prometheus.CounterVec
	truncated   prometheus.Counter
	rateLimited prometheus.Counter
	latency     prometheus.Histogram

	// The hot path's children of queries (NOERROR A, AAAA, SRV), looked
	// up once rather than per query.
	okA, okAAAA, okSRV prometheus.Counter
}

// answered is the queries counter of a NOERROR answer to qtype (A, AAAA
// or SRV).
func (m *metrics) answered(qtype uint16) prometheus.Counter {
	switch qtype {
	case mdns.TypeA:
		return m.okA
	case mdns.TypeAAAA:
		return m.okAAAA
	}
	return m.okSRV
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
	ok := mdns.RcodeToString[mdns.RcodeSuccess]
	m.okA = m.queries.WithLabelValues(typeLabel(mdns.TypeA), ok)
	m.okAAAA = m.queries.WithLabelValues(typeLabel(mdns.TypeAAAA), ok)
	m.okSRV = m.queries.WithLabelValues(typeLabel(mdns.TypeSRV), ok)
	if reg != nil {
		reg.MustRegister(m.queries, m.refused, m.truncated, m.rateLimited, m.latency)
	}
	return m
}

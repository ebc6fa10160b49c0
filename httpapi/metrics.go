package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics holds the API's Prometheus collectors.
type metrics struct {
	gatherer prometheus.Gatherer
	handler  http.Handler
	latency  *prometheus.HistogramVec

	// mu guards observers, a cache of resolved histogram children, so the
	// hot path does not build label slices on every request.
	mu        sync.RWMutex
	observers map[observerKey]prometheus.Observer
}

type observerKey struct {
	route, method string
	code          int
}

func newMetrics(reg prometheus.Registerer, gatherer prometheus.Gatherer, s *Server) (*metrics, error) {
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
	m := &metrics{gatherer: gatherer, observers: map[observerKey]prometheus.Observer{}}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "muster_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by route, method and status code.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route", "method", "code"})

	stats := func(pick func(st statsView) float64) func() float64 {
		return func() float64 { return pick(s.statsView()) }
	}
	cs := []prometheus.Collector{
		m.latency,
		s.guard.Failures(),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_registrations_total", Help: "Registrations accepted, replicated ones included."},
			stats(func(v statsView) float64 { return float64(v.registrations) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_renewals_total", Help: "Successful lease renewals (heartbeats), replicated ones included."},
			stats(func(v statsView) float64 { return float64(v.renewals) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_cancels_total", Help: "Explicit cancellations, replicated ones included."},
			stats(func(v statsView) float64 { return float64(v.cancels) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_evictions_total", Help: "Expired leases evicted by this node."},
			stats(func(v statsView) float64 { return float64(v.evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_instances", Help: "Registered instances."},
			func() float64 { return float64(s.reg.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_registry_version", Help: "Registry content version (bumps on every visible change)."},
			func() float64 { return float64(s.reg.Version()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_expected_renews_per_minute", Help: "Renewals per minute the registered instances should send."},
			func() float64 { return s.reg.SelfPreservationState().ExpectedRenewsPerMin }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_renews_threshold", Help: "Renewals per minute below which self-preservation stops eviction."},
			func() float64 { return float64(s.reg.SelfPreservationState().RenewsThreshold) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_renews_last_minute", Help: "Renewals counted in the last complete window, per minute."},
			func() float64 { return float64(s.reg.SelfPreservationState().RenewsLastMin) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_self_preservation_active", Help: "1 while self-preservation holds expiry back."},
			func() float64 { return boolFloat(s.reg.SelfPreservationState().Active) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_lease_expiration_enabled", Help: "1 when an eviction run would evict expired leases."},
			func() float64 { return boolFloat(s.reg.SelfPreservationState().LeaseExpirationEnabled) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_open_for_traffic", Help: "1 once the node has synced and opened for traffic."},
			func() float64 { return boolFloat(s.cfg.Ready()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_tombstones", Help: "Cancelled instances remembered so that an older copy from a peer cannot bring them back (at most 131,072)."},
			func() float64 { return float64(s.reg.Tombstones().Kept) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_tombstones_dropped_total", Help: "Tombstones dropped at the bound before they expired: past it, a stale copy of such an instance could be adopted again."},
			func() float64 { return float64(s.reg.Tombstones().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_payload_encodings_total", Help: "Payload pieces encoded: an app's or a delta group's JSON or XML, plain or compressed (at most one per changed app and form), and partial apps of VIP lookups."},
			func() float64 { return float64(s.pieces.encodings.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_payload_assemblies_total", Help: "Registry payloads assembled from pieces (at most one per kind, format and registry version)."},
			func() float64 { return float64(s.payloads.buildCount()) }),
	}
	cs = append(cs, s.watch.collectors()...)
	if s.cfg.Replication != nil {
		cs = append(cs, newReplicationCollector(s.cfg.Replication))
	}
	if s.cfg.AntiEntropy != nil {
		cs = append(cs, newAntiEntropyCollector(s.cfg.AntiEntropy))
	}
	cs = append(cs, newPeerCollector(s.cfg.Peers))
	cs = append(cs, newLimitsCollector(s))
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	return m, nil
}

type statsView struct{ registrations, renewals, cancels, evictions uint64 }

func (s *Server) statsView() statsView {
	st := s.reg.Stats()
	return statsView{st.Registrations, st.Renewals, st.Cancels, st.Evictions}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *metrics) observer(route, method string, code int) prometheus.Observer {
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

// observe records every request's latency by route template (not by raw
// path, so instance ids do not explode the label space) and logs it at
// debug level.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		code := c.Response().Status
		if err != nil {
			code = statusFor(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		if c.Get(heldKey) != nil {
			// A held blocking fetch or a watch stream takes as long as it
			// waits: kept apart from the latency of plain reads.
			route += " (held)"
		}
		elapsed := time.Since(start)
		s.metrics.observer(route, c.Request().Method, code).Observe(elapsed.Seconds())
		if e := s.log.Debug(); e.Enabled() {
			e.Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Int("status", code).
				Dur("took", elapsed).Bool("replication", isReplication(c)).Msg("request")
		}
		return err
	}
}

func (s *Server) serveMetrics(c echo.Context) error {
	s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// limitsCollector exports muster_limit_rejections_total{limit}: every
// write or connection a limit refused (or, for max-connections, held back),
// by the limit's config key without "muster.".
type limitsCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func newLimitsCollector(s *Server) *limitsCollector {
	return &limitsCollector{s: s, desc: prometheus.NewDesc("muster_limit_rejections_total",
		"Requests refused by a limit, by limit (the muster.* key); max-connections counts connections that had to wait.",
		[]string{"limit"}, nil)}
}

func (lc *limitsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lc.desc }

func (lc *limitsCollector) Collect(ch chan<- prometheus.Metric) {
	emit := func(limit string, v uint64) {
		ch <- prometheus.MustNewConstMetric(lc.desc, prometheus.CounterValue, float64(v), limit)
	}
	for l, v := range lc.s.reg.LimitRejections() {
		emit(string(l), v)
	}
	c := lc.s.limits.Counts()
	emit("max-body-bytes", c.BodyBytes)
	emit("body-read-timeout-ms", c.BodyReadTimeout)
	emit("max-connections", c.Connections)
}

package httpapi

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/httpapi/eureka"
	"github.com/muster-registry/muster/httpapi/ops"
)

// newMetrics is ops' /metrics with the HTTP layer's own collectors:
// payload encodings, watches, limits and authentication.
func newMetrics(cfg Config, s *Server) (*ops.Metrics, error) {
	extra := []prometheus.Collector{
		s.guard.Failures(),
		newLimitsCollector(s),
	}
	extra = append(extra, s.api.Collectors()...)
	extra = append(extra, drainCollectors(cfg)...)
	return ops.NewMetrics(ops.MetricsConfig{Registry: cfg.Registry, Registerer: cfg.Metrics, Gatherer: cfg.Gatherer,
		Ready: s.cfg.Ready, Peers: s.cfg.Peers, Replication: cfg.Replication, AntiEntropy: cfg.AntiEntropy, Extra: extra})
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
			code = eureka.StatusFor(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		if eureka.Held(c) {
			// A held blocking fetch or a watch stream takes as long as it
			// waits: kept apart from the latency of plain reads.
			route += " (held)"
		}
		elapsed := time.Since(start)
		s.metrics.Observe(route, c.Request().Method, code, elapsed)
		if e := s.log.Debug(); e.Enabled() {
			e.Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Int("status", code).
				Dur("took", elapsed).Bool("replication", eureka.IsReplication(c)).Msg("request")
		}
		return err
	}
}

func (s *Server) serveMetrics(c echo.Context) error {
	s.metrics.Handler().ServeHTTP(c.Response(), c.Request())
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

// drainCollectors are the drain's figures (docs/traffic.md): what the
// reader table holds, what it could not, and the instances drained.
func drainCollectors(cfg Config) []prometheus.Collector {
	readers := cfg.Drain.Readers()
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_drain_readers", Help: "Readers (client identity and address) this node tracks for drains (muster.drain.max-readers at most)."},
			func() float64 { return float64(readers.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_drain_untracked_reads_total", Help: "Reads of new readers not tracked because the reader table was full: readers a drain cannot wait for."},
			func() float64 { return float64(readers.Untracked()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_drained_instances", Help: "Instances drained (served OUT_OF_SERVICE until undrained or cancelled)."},
			func() float64 { return float64(len(cfg.Registry.Drained())) }),
	}
}

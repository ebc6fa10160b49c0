package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/replication"
)

// antiEntropyCollector exports anti-entropy's repairs and per-peer
// divergence at scrape time.
type antiEntropyCollector struct {
	stats              AntiEntropyStats
	repairs, divergent *prometheus.Desc
}

func newAntiEntropyCollector(stats AntiEntropyStats) *antiEntropyCollector {
	return &antiEntropyCollector{
		stats: stats,
		repairs: prometheus.NewDesc("muster_anti_entropy_repairs_total",
			"Instances anti-entropy repaired on this node, by kind: missing (adopted from a peer), stale (replaced by a peer's newer copy), cancelled (removed by a peer's newer tombstone).",
			[]string{"kind"}, nil),
		divergent: prometheus.NewDesc("muster_peer_divergent_instances",
			"Instances that differed between this node and the peer in the last anti-entropy round (0: in sync).",
			[]string{"peer"}, nil),
	}
}

func (ac *antiEntropyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ac.repairs
	ch <- ac.divergent
}

func (ac *antiEntropyCollector) Collect(ch chan<- prometheus.Metric) {
	t := ac.stats.Totals()
	for kind, v := range map[string]uint64{
		replication.RepairMissing: t.Missing, replication.RepairStale: t.Stale, replication.RepairCancelled: t.Cancelled,
	} {
		ch <- prometheus.MustNewConstMetric(ac.repairs, prometheus.CounterValue, float64(v), kind)
	}
	for _, p := range ac.stats.Stats() {
		if p.Unsupported {
			continue
		}
		ch <- prometheus.MustNewConstMetric(ac.divergent, prometheus.GaugeValue, float64(p.Divergent), p.Peer)
	}
}

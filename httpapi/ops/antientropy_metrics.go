package ops

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/replication"
)

// antiEntropyCollector exports anti-entropy's repairs and per-peer state at
// scrape time. Peers that do not serve anti-entropy (Java Eureka servers)
// have no per-peer series: they are never in sync, and never out of it.
type antiEntropyCollector struct {
	stats                              AntiEntropyStats
	repairs, divergent, rounds, inSync *prometheus.Desc
	lastSuccess                        *prometheus.Desc
}

func newAntiEntropyCollector(stats AntiEntropyStats) *antiEntropyCollector {
	return &antiEntropyCollector{
		stats: stats,
		repairs: prometheus.NewDesc("muster_anti_entropy_repairs_total",
			"Instances anti-entropy repaired on this node, by kind: missing (adopted from a peer), stale (replaced by a peer's newer copy), cancelled (removed by a peer's newer tombstone).",
			[]string{"kind"}, nil),
		divergent: prometheus.NewDesc("muster_peer_divergent_instances",
			"Instances that differed between this node and the peer in the last anti-entropy round that ran through (0: in sync); kept while rounds fail, see muster_peer_in_sync.",
			[]string{"peer"}, nil),
		rounds: prometheus.NewDesc("muster_anti_entropy_rounds_total",
			"Anti-entropy rounds with the peer, by result: ok (ran through) or failed (the peer unreachable, refusing or answering an error).",
			[]string{"peer", "result"}, nil),
		inSync: prometheus.NewDesc("muster_peer_in_sync",
			"1 if the last anti-entropy round with the peer ran through and found nothing different, 0 otherwise (differences, a failed round, no round yet).",
			[]string{"peer"}, nil),
		lastSuccess: prometheus.NewDesc("muster_anti_entropy_last_success_timestamp_seconds",
			"When the last anti-entropy round with the peer that ran through ended (Unix seconds); absent before the first.",
			[]string{"peer"}, nil),
	}
}

func (ac *antiEntropyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ac.repairs
	ch <- ac.divergent
	ch <- ac.rounds
	ch <- ac.inSync
	ch <- ac.lastSuccess
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
		ch <- prometheus.MustNewConstMetric(ac.rounds, prometheus.CounterValue, float64(p.RoundsOK), p.Peer, "ok")
		ch <- prometheus.MustNewConstMetric(ac.rounds, prometheus.CounterValue, float64(p.RoundsFailed), p.Peer, "failed")
		in := 0.0
		if p.InSync {
			in = 1
		}
		ch <- prometheus.MustNewConstMetric(ac.inSync, prometheus.GaugeValue, in, p.Peer)
		if !p.Last.IsZero() {
			ch <- prometheus.MustNewConstMetric(ac.lastSuccess, prometheus.GaugeValue, float64(p.Last.UnixMilli())/1000, p.Peer)
		}
	}
}

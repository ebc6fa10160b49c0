package ops

import (
	"github.com/prometheus/client_golang/prometheus"
)

// replicationCollector exports the replicator's counters and per-peer
// figures at scrape time.
type replicationCollector struct {
	stats ReplicationStats

	items, batches, retries, replaced, reregistered, adopted, itemFailures *prometheus.Desc
	drops, peers, queueDepth, lag, maxLag, lastBatch                       *prometheus.Desc
	resyncs, catchUps                                                      *prometheus.Desc
}

func newReplicationCollector(stats ReplicationStats) *replicationCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("muster_replication_"+name, help, labels, nil)
	}
	return &replicationCollector{
		stats:        stats,
		items:        d("items_total", "Replication tasks delivered to peers (one per peer)."),
		batches:      d("batches_total", "Batch requests sent to peers; items_total / batches_total is the batch fill."),
		retries:      d("retries_total", "Batches sent again after a 503 or a network error."),
		replaced:     d("replaced_total", "Queued tasks replaced by a newer task for the same instance and action."),
		reregistered: d("reregistrations_total", "Registers queued because a peer answered a heartbeat with 404."),
		adopted:      d("adopted_total", "Newer instances taken from a peer's 409 answer."),
		itemFailures: d("item_failures_total", "Items a peer answered with an unexpected status."),
		drops:        d("drops_total", "Tasks dropped, by reason: overflow (queue full), expired, permanent (peer refused the batch), inbox_full, too_large (no batch can carry it), refused (peer refused the item for good).", "reason"),
		peers:        d("peers", "Peers this node replicates to."),
		queueDepth:   d("queue_depth", "Tasks waiting for a peer.", "peer"),
		lag:          d("lag_seconds", "Age of the oldest task of the last batch sent to a peer.", "peer"),
		maxLag:       d("max_lag_seconds", "Largest lag seen for a peer.", "peer"),
		lastBatch:    d("last_batch_seconds", "Duration of the last batch request to a peer.", "peer"),
		resyncs:      d("resyncs_total", "Times replication fell behind the registry's change stream and re-sent every instance."),
		catchUps:     d("catch_ups_total", "Heartbeats a sender for a newly added peer queued for every live instance."),
	}
}

func (rc *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rc.items, rc.batches, rc.retries, rc.replaced, rc.reregistered, rc.adopted,
		rc.itemFailures, rc.drops, rc.peers, rc.queueDepth, rc.lag, rc.maxLag, rc.lastBatch, rc.resyncs, rc.catchUps} {
		ch <- d
	}
}

func (rc *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	t := rc.stats.Totals()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(rc.items, t.ItemsSent)
	counter(rc.batches, t.BatchesSent)
	counter(rc.retries, t.Retries)
	counter(rc.replaced, t.Replaced)
	counter(rc.reregistered, t.Reregistered)
	counter(rc.adopted, t.Adopted)
	counter(rc.itemFailures, t.ItemFailures)
	counter(rc.resyncs, t.Resyncs)
	counter(rc.catchUps, t.CatchUps)
	counter(rc.drops, t.Drops.Overflow, "overflow")
	counter(rc.drops, t.Drops.Expired, "expired")
	counter(rc.drops, t.Drops.Permanent, "permanent")
	counter(rc.drops, t.Drops.InboxFull, "inbox_full")
	counter(rc.drops, t.Drops.TooLarge, "too_large")
	counter(rc.drops, t.Drops.Refused, "refused")
	peers := rc.stats.Peers()
	ch <- prometheus.MustNewConstMetric(rc.peers, prometheus.GaugeValue, float64(len(peers)))
	for _, p := range peers {
		ch <- prometheus.MustNewConstMetric(rc.queueDepth, prometheus.GaugeValue, float64(p.QueueDepth), p.Name)
		ch <- prometheus.MustNewConstMetric(rc.lag, prometheus.GaugeValue, p.LastLag.Seconds(), p.Name)
		ch <- prometheus.MustNewConstMetric(rc.maxLag, prometheus.GaugeValue, p.MaxLag.Seconds(), p.Name)
		ch <- prometheus.MustNewConstMetric(rc.lastBatch, prometheus.GaugeValue, float64(p.LastBatchMillis)/1000, p.Name)
	}
}

package replication

import "time"

// Drops counts tasks that never reached a peer, by reason.
type Drops struct {
	// Overflow: the peer's queue was full (MaxQueueSize); the oldest
	// heartbeat, or the oldest task when none was pending, made room.
	Overflow uint64
	// Expired: the task was older than its expiry when its turn came.
	Expired uint64
	// Permanent: the peer rejected the whole batch with a status other than
	// 2xx or 503.
	Permanent uint64
	// InboxFull: the feed found the peer's inbox full (InboxSize).
	InboxFull uint64
	// TooLarge: the task alone is larger than MaxBatchBytes (or than what
	// the peer accepted after a 413), so no batch can carry it.
	TooLarge uint64
	// Refused: the peer answered the item with a status that a retry would
	// get again (400, 403, 413, ...: e.g. one of its limits).
	Refused uint64
}

// Total returns the sum over all reasons.
func (d Drops) Total() uint64 {
	return d.Overflow + d.Expired + d.Permanent + d.InboxFull + d.TooLarge + d.Refused
}

func (d *Drops) add(o Drops) {
	d.Overflow += o.Overflow
	d.Expired += o.Expired
	d.Permanent += o.Permanent
	d.InboxFull += o.InboxFull
	d.TooLarge += o.TooLarge
	d.Refused += o.Refused
}

// Counters are running totals of one peer sender, or of all of them.
type Counters struct {
	// ItemsSent and BatchesSent count tasks and batches the peer answered
	// with 2xx (whatever the items' own statuses).
	ItemsSent   uint64
	BatchesSent uint64
	// Retries counts batches re-queued after a 503 or a network error.
	Retries uint64
	// Replaced counts tasks superseded by a newer task for the same
	// instance and action before they were sent (Eureka's overriddenTasks).
	Replaced uint64
	// Reregistered counts heartbeats the peer answered with 404, for which a
	// Register of the local instance was queued.
	Reregistered uint64
	// Adopted counts heartbeats the peer answered with 409 and its newer
	// instance, which was applied over the older local copy.
	Adopted uint64
	// ItemFailures counts other non-2xx items in answered batches (a cancel's
	// 404 is not one: the instance is gone there, as wanted).
	ItemFailures uint64
	// Drops counts tasks given up, by reason.
	Drops Drops
	// Resyncs counts the times replication fell behind the registry's
	// change stream and every sender caught up with a heartbeat for every
	// live instance (Replicator only; 0 per peer).
	Resyncs uint64
	// CatchUps counts heartbeats a new sender queued for every live
	// instance when it started, so that a peer that joined late hears of
	// what it missed (a 404 answer makes it a Register).
	CatchUps uint64
}

func (c *Counters) add(o Counters) {
	c.ItemsSent += o.ItemsSent
	c.BatchesSent += o.BatchesSent
	c.Retries += o.Retries
	c.Replaced += o.Replaced
	c.Reregistered += o.Reregistered
	c.Adopted += o.Adopted
	c.ItemFailures += o.ItemFailures
	c.Drops.add(o.Drops)
	c.Resyncs += o.Resyncs
	c.CatchUps += o.CatchUps
}

// PeerStats is what one peer sender reports, for /admin/status and metrics.
type PeerStats struct {
	Name, URL, Zone string
	// QueueDepth is the number of tasks waiting for this peer (queue and
	// inbox), not counting the batch in flight.
	QueueDepth int
	// InFlight is the number of tasks in the batch now in flight; 0 when
	// the sender is idle or backing off.
	InFlight int
	// Failures is the number of consecutive failed batches; 0 once a batch
	// succeeds. While it is above 0 the peer is unhealthy.
	Failures int
	// LastBatchMillis is how long the last batch request took, in ms.
	LastBatchMillis int64
	// LastBatchSize is the number of tasks in the last batch sent.
	LastBatchSize int
	// LastError is the last failed batch's error ("" if none yet), and
	// LastErrorAt when it happened. They are kept after later successes.
	LastError   string
	LastErrorAt time.Time
	// LastLag is the replication lag of the last batch: the age of its
	// oldest task when it was sent. MaxLag is the largest seen.
	LastLag time.Duration
	MaxLag  time.Duration
	Counters
}

package replication

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Config holds every knob of the replicator. Start from DefaultConfig; the
// defaults are Eureka's (PeerEurekaNode, DefaultEurekaServerConfig), except
// that there is no batching delay (ARCHITECTURE.md decision 6).
type Config struct {
	// MaxBatchSize is the most tasks one batch carries. Larger batches mean
	// fewer round trips under load but longer requests; Eureka's receiver
	// has no limit of its own. Default 250 (PeerEurekaNode.BATCH_SIZE).
	MaxBatchSize int
	// MaxMusterBatchSize is MaxBatchSize for a peer known to be a Muster
	// node (Peer.Muster, or one that answered anti-entropy): a larger batch
	// means fewer round trips, and fewer wake-ups of an otherwise idle
	// peer, for the same heartbeats. It is also the size of a take of
	// renewals (the larger of the two batch sizes): the feed takes them
	// every 500 ms, or as soon as about this many wait, so a take leaves in
	// one batch to a Muster peer and never fills a peer's queue
	// (MaxQueueSize) by itself whatever the heartbeat rate. Default 2000:
	// a node renewing 6,000 clients a second sends a batch of ~1,700 three
	// times a second, where takes every 100 ms made batches of ~560 and
	// cost each receiver ~1 µs more per heartbeat (bench replcpu).
	MaxMusterBatchSize int
	// MaxBatchBytes caps a batch's encoded size, below the receivers'
	// muster.max-batch-body-bytes (cmd sets ¾ of it, 12 MiB by default), so
	// that a few large instances cannot make a batch the peer refuses whole
	// (413). A task larger on its own is dropped and counted (TooLarge).
	// After a 413 anyway (a peer with a smaller limit), the sender halves
	// its budget for that peer and sends the batch again in parts.
	// 0 means no cap.
	MaxBatchBytes int
	// MaxQueueSize bounds each peer's pending tasks. On overflow the oldest
	// heartbeat is dropped, or the oldest task when no heartbeat is pending.
	// A pending task costs ~170 bytes (the instance it points to is shared),
	// so the default bound is ~1.7 MB per peer.
	// eureka.server.max-elements-in-peer-replication-pool, default 10000.
	MaxQueueSize int
	// TaskMaxAge is how long a cancel or status task stays worth sending;
	// older ones are dropped when a batch is taken.
	// eureka.server.max-time-for-replication, default 30 s.
	TaskMaxAge time.Duration
	// ExpectedRenewalInterval is how long a register or heartbeat task of an
	// instance without leaseInfo.renewalIntervalInSecs stays worth sending
	// (with one, that interval). Default 30 s, the client default; Eureka
	// falls back to the 90 s lease duration (EUREKA.md bug 19).
	ExpectedRenewalInterval time.Duration

	// CongestionRetryDelay is the first wait after a peer answers a batch
	// with 503; it doubles with each further consecutive failure, up to
	// MaxCongestionRetryDelay: delay = min(base × 2^(failures−1), max).
	// Default 1 s, capped at 30 s (Eureka's TrafficShaper).
	CongestionRetryDelay    time.Duration
	MaxCongestionRetryDelay time.Duration
	// NetworkFailureRetryDelay is the first wait after a network error or
	// timeout, doubling likewise up to MaxNetworkFailureRetryDelay.
	// Default 100 ms, capped at 5 s: Eureka's TrafficShaper caps it at 30 s,
	// which leaves a peer that restarted within that time without
	// heartbeats long enough for its leases to expire. A retry of a dead
	// peer every 5 s costs one failed connection.
	NetworkFailureRetryDelay    time.Duration
	MaxNetworkFailureRetryDelay time.Duration
	// SendTimeout bounds one batch request, so a hung peer cannot stall its
	// sender; a timeout is a network error. 0 leaves it to the Transport.
	// Default 5 s (Netflix's peer-node-read-timeout-ms).
	SendTimeout time.Duration

	// InboxSize is each peer's hand-off buffer between the feed and the
	// peer's goroutine. The feed never blocks: when a peer's inbox is full
	// the task is dropped for that peer and counted (inbox-full);
	// heartbeats may fill three quarters of it. The feed hands over a whole
	// round at once (a take of renewals: about MaxMusterBatchSize at most,
	// one per lease renewed since the last take), which the goroutine
	// moves to its queue in microseconds, so it fills only if that
	// goroutine stalls. Default 16384: more could not wait in the queue
	// anyway (MaxQueueSize). It grows only as far as used.
	InboxSize int
	// LogInterval is the least time between two Warn lines of one kind
	// (drops, failed items, failed batches) for one peer; lines in between
	// are folded into the next one's counts. Default 10 s.
	LogInterval time.Duration

	// Now is the clock. nil means time.Now. Tests pass a clock they move.
	Now func() time.Time
	// After is the clock's timer, which paces the takes of renewals.
	// nil means time.After. Tests pass the After of the clock they move.
	After func(time.Duration) <-chan time.Time
	// Transport sends batches. Required.
	Transport Transport
	// Store is the local registry: replication reads its change stream and
	// renewal feed, looks up the local copy of an instance when a peer
	// answers a heartbeat with 404 (it lost the instance: a Register of the
	// local copy is queued, unless it is gone here too), and applies the
	// newer copy a peer returns with a 409 (as a register from OriginPeer
	// that only replaces an older stored copy, so it is not sent back).
	// Required.
	Store Store
	// AdoptNewer applies a peer's newer copy answered with a 409; when
	// false such answers are only counted as item failures.
	// eureka.server.sync-when-timestamp-differs, default true.
	AdoptNewer bool
	// Logger receives peer sender starts and stops (Info), drops and
	// failures (Warn, rate-limited) and one line per batch (Debug). The zero
	// value logs nothing.
	Logger zerolog.Logger
}

// DefaultConfig returns Eureka's defaults, without Eureka's 500 ms batching
// delay.
func DefaultConfig() Config {
	return Config{
		MaxBatchSize:                250,                    // PeerEurekaNode.BATCH_SIZE
		MaxMusterBatchSize:          2000,                   // Muster peers only; the size of a take of renewals
		MaxBatchBytes:               12 << 20,               // ¾ of the receiver's default 16 MiB
		MaxQueueSize:                10000,                  // max-elements-in-peer-replication-pool
		TaskMaxAge:                  30 * time.Second,       // max-time-for-replication
		ExpectedRenewalInterval:     30 * time.Second,       // client renewal default (not Eureka's 90 s)
		CongestionRetryDelay:        time.Second,            // PeerEurekaNode.SERVER_UNAVAILABLE_SLEEP_TIME_MS
		MaxCongestionRetryDelay:     30 * time.Second,       // TrafficShaper.MAX_DELAY
		NetworkFailureRetryDelay:    100 * time.Millisecond, // PeerEurekaNode.RETRY_SLEEP_TIME_MS
		MaxNetworkFailureRetryDelay: 5 * time.Second,        // Eureka: 30 s; a restarted peer should hear from us within seconds
		SendTimeout:                 5 * time.Second,        // Netflix peer-node-read-timeout-ms
		InboxSize:                   16384,                  // hand-off buffer per peer
		LogInterval:                 10 * time.Second,       // one Warn line of a kind per peer per interval
		AdoptNewer:                  true,                   // sync-when-timestamp-differs
	}
}

// batchSize is the most tasks in one batch to a peer: MaxMusterBatchSize
// (when larger) for a Muster peer, MaxBatchSize for any other.
func (c *Config) batchSize(muster bool) int {
	if muster {
		return max(c.MaxBatchSize, c.MaxMusterBatchSize)
	}
	return c.MaxBatchSize
}

// MaxQueueSizeLimit is the largest MaxQueueSize: ~1.7 GB of pending tasks
// per peer.
const MaxQueueSizeLimit = 10_000_000

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field. The wiring (Transport, Store) is
// New's to check.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("replication: "+field+" "+format, args...)
	}
	if c.MaxBatchSize < 1 {
		return bad("MaxBatchSize", "must be at least 1, got %d", c.MaxBatchSize)
	}
	if c.MaxMusterBatchSize < 0 {
		return bad("MaxMusterBatchSize", "must not be negative, got %d", c.MaxMusterBatchSize)
	}
	if c.MaxQueueSize < c.MaxBatchSize || c.MaxQueueSize > MaxQueueSizeLimit {
		return bad("MaxQueueSize", "must be from MaxBatchSize (%d) to %d, got %d", c.MaxBatchSize, MaxQueueSizeLimit, c.MaxQueueSize)
	}
	if c.MaxBatchBytes < 0 {
		return bad("MaxBatchBytes", "must not be negative, got %d", c.MaxBatchBytes)
	}
	if c.InboxSize < 1 {
		return bad("InboxSize", "must be at least 1, got %d", c.InboxSize)
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"TaskMaxAge", c.TaskMaxAge},
		{"ExpectedRenewalInterval", c.ExpectedRenewalInterval},
		{"CongestionRetryDelay", c.CongestionRetryDelay},
		{"NetworkFailureRetryDelay", c.NetworkFailureRetryDelay},
		{"LogInterval", c.LogInterval},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return bad(p.name, "must be positive, got %s", p.d)
		}
	}
	if c.MaxCongestionRetryDelay < c.CongestionRetryDelay {
		return bad("MaxCongestionRetryDelay", "(%s) must be at least CongestionRetryDelay (%s)",
			c.MaxCongestionRetryDelay, c.CongestionRetryDelay)
	}
	if c.MaxNetworkFailureRetryDelay < c.NetworkFailureRetryDelay {
		return bad("MaxNetworkFailureRetryDelay", "(%s) must be at least NetworkFailureRetryDelay (%s)",
			c.MaxNetworkFailureRetryDelay, c.NetworkFailureRetryDelay)
	}
	if c.SendTimeout < 0 {
		return bad("SendTimeout", "must not be negative, got %s", c.SendTimeout)
	}
	return nil
}

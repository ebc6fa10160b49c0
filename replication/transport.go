package replication

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Peer is another registry node that hears every local change.
type Peer struct {
	// Name identifies the peer across peer-list updates: a sender keeps its
	// queue as long as a peer of this name stays in the list.
	Name string
	// URL is the peer's Eureka base URL, e.g. http://10.0.0.5:8761/eureka/.
	URL string
	// Zone is the peer's availability zone ("default" when unknown).
	Zone string
	// Muster is true for a peer known to be a Muster node (a memberlist
	// member): batches to it carry write versions (Batch.Versioned). A
	// static peer may be a Java Eureka server, which is left to Eureka's
	// lastDirtyTimestamp rules and 404/409 repair.
	Muster bool
}

// Batch is what one POST /peerreplication/batch carries: Eureka's
// replicationList, in queue order.
type Batch struct {
	Tasks []Task
	// Versioned makes every item carry its write version (the peer is a
	// Muster node).
	Versioned bool
}

// BatchResult is the peer's answer: Eureka's responseList, one item per
// task, in the batch's order: its status code and, on a heartbeat's 409,
// the peer's newer copy.
type BatchResult struct {
	Items []wire.ItemResult
}

// Transport is the seam between replication and the network: it sends
// batches to peers and fetches their registries. The HTTP implementation speaks Eureka's
// wire (POST {URL}peerreplication/batch/, JSON, replication header);
// replicationtest has an in-memory one.
type Transport interface {
	// Send delivers b to p and returns the peer's per-item answer. It is
	// called from each peer's sender, one call at a time per peer, and
	// concurrently for different peers, so it must be safe for concurrent
	// use. It may block for the round trip but must return soon after ctx
	// ends. A non-2xx HTTP reply is returned as a *StatusError; any other
	// error counts as a network error, and the batch is retried.
	Send(ctx context.Context, p Peer, b Batch) (BatchResult, error)
	// FetchRegistry copies p's whole registry, all statuses, for syncUp. It
	// returns an error wrapping ErrPeerStarting when the peer is itself
	// still copying (it has no registry to give). Safe for concurrent use;
	// it must return soon after ctx ends.
	FetchRegistry(ctx context.Context, p Peer) ([]*registry.Instance, error)
	// Digest asks p for its anti-entropy digests (registry/wire/antientropy.go);
	// Copies fetches p's stored copies of keys (at most wire.MaxCopyKeys), with
	// versions and lease renewals. A peer that does not serve anti-entropy
	// (a Java Eureka server) gives an error wrapping ErrNoAntiEntropy.
	// Both are safe for concurrent use and return soon after ctx ends.
	Digest(ctx context.Context, p Peer, req wire.DigestRequest) (wire.DigestReply, error)
	Copies(ctx context.Context, p Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error)
}

// StatusError is a non-2xx HTTP reply to a whole batch.
type StatusError struct {
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("replication: peer answered HTTP %d", e.Code)
}

// outcome is what a batch's answer means for the sender.
type outcome int

const (
	outcomeSuccess    outcome = iota // the peer answered 2xx; look at the items
	outcomeCongestion                // 503: back off (CongestionRetryDelay), re-queue at the front
	outcomeTransient                 // network error or timeout: retry (NetworkFailureRetryDelay), re-queue
	outcomePermanent                 // any other status: drop the batch
	outcomeAborted                   // the sender is stopping: re-queue, no backoff, not a failure
)

func (o outcome) String() string {
	switch o {
	case outcomeSuccess:
		return "success"
	case outcomeCongestion:
		return "congestion"
	case outcomeTransient:
		return "transient"
	case outcomePermanent:
		return "permanent"
	case outcomeAborted:
		return "aborted"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// classify maps a Send error to an outcome, as Eureka's
// ReplicationTaskProcessor#process does, except that a read timeout is a
// transient error here, not congestion: only the peer's own 503 says it is
// overloaded.
func classify(err error) outcome {
	if err == nil {
		return outcomeSuccess
	}
	var se *StatusError
	if errors.As(err, &se) {
		if se.Code == 503 {
			return outcomeCongestion
		}
		return outcomePermanent
	}
	if errors.Is(err, context.Canceled) {
		return outcomeAborted
	}
	return outcomeTransient
}

// PeerStarting tells whether a failed call looks like a peer that is
// still starting: the connection refused (nothing listens yet) or 503 (it
// listens and has not opened). Before a peer has answered once, these are
// expected at every cluster start and logged once at info level.
func PeerStarting(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusServiceUnavailable
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// backoff is the delay before the next try after failures consecutive
// failed batches: base, doubled for each further failure, capped at max.
// It is 0 when nothing failed.
func backoff(base time.Duration, failures int, max time.Duration) time.Duration {
	if failures <= 0 || base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

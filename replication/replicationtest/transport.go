// Package replicationtest has an in-memory replication.Transport for tests
// of code built on package replication: it records every batch, answers
// through a hook, and can cut peers off.
package replicationtest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
)

// ErrUnreachable is what Send returns for a peer that is cut off. It is not
// a *replication.StatusError, so senders treat it as a network error and
// retry.
var ErrUnreachable = errors.New("replicationtest: peer unreachable")

// Sent is one recorded Send call and what it returned.
type Sent struct {
	Peer   replication.Peer
	Batch  replication.Batch
	Result replication.BatchResult
	Err    error
}

// Transport is an in-memory replication.Transport. Send records the batch,
// then answers ErrUnreachable for a cut-off peer, otherwise whatever Respond
// says (200 for every item when Respond is nil). Peers are known by
// Peer.Name. Safe for concurrent use.
type Transport struct {
	// Respond answers a batch sent to a reachable peer. It is called
	// without locks held, concurrently for different peers. Set it before
	// the first Send.
	Respond func(replication.Peer, replication.Batch) (replication.BatchResult, error)
	// Fetch answers FetchRegistry for a reachable peer; nil answers with an
	// error. Set it before the first call.
	Fetch func(context.Context, replication.Peer) ([]*registry.Instance, error)
	// RespondDigest and RespondCopies answer the anti-entropy calls for a reachable peer;
	// nil answers replication.ErrNoAntiEntropy (a peer that does not serve
	// it). Set them before the first call.
	RespondDigest func(context.Context, replication.Peer, wire.DigestRequest) (wire.DigestReply, error)
	RespondCopies func(context.Context, replication.Peer, []registry.InstanceKey) ([]registry.VersionedCopy, error)

	sent chan Sent

	// mu guards batches, cut and only.
	mu      sync.Mutex
	batches []Sent
	cut     map[string]bool // peers cut off by Disconnect
	only    map[string]bool // when non-nil (Partition), the only reachable peers
}

// NewTransport returns a Transport that reaches every peer.
func NewTransport() *Transport {
	return &Transport{sent: make(chan Sent, 4096), cut: make(map[string]bool)}
}

// Send implements replication.Transport.
func (t *Transport) Send(ctx context.Context, p replication.Peer, b replication.Batch) (replication.BatchResult, error) {
	b = replication.Batch{Tasks: slices.Clone(b.Tasks)}
	var (
		res replication.BatchResult
		err error
	)
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case !t.reachable(p.Name):
		err = ErrUnreachable
	case t.Respond != nil:
		res, err = t.Respond(p, b)
	default:
		res = OK(b)
	}
	s := Sent{Peer: p, Batch: b, Result: res, Err: err}
	t.mu.Lock()
	t.batches = append(t.batches, s)
	t.mu.Unlock()
	select {
	case t.sent <- s:
	default: // nobody reads Sent(); Batches() still has it
	}
	return res, err
}

// FetchRegistry implements replication.Transport: ErrUnreachable for a
// cut-off peer, otherwise whatever Fetch says.
func (t *Transport) FetchRegistry(ctx context.Context, p replication.Peer) ([]*registry.Instance, error) {
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !t.reachable(p.Name):
		return nil, ErrUnreachable
	case t.Fetch == nil:
		return nil, errors.New("replicationtest: no registry to fetch")
	}
	return t.Fetch(ctx, p)
}

// Digest implements replication.Transport.
func (t *Transport) Digest(ctx context.Context, p replication.Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	switch {
	case ctx.Err() != nil:
		return wire.DigestReply{}, ctx.Err()
	case !t.reachable(p.Name):
		return wire.DigestReply{}, ErrUnreachable
	case t.RespondDigest == nil:
		return wire.DigestReply{}, replication.ErrNoAntiEntropy
	}
	return t.RespondDigest(ctx, p, req)
}

// Copies implements replication.Transport.
func (t *Transport) Copies(ctx context.Context, p replication.Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !t.reachable(p.Name):
		return nil, ErrUnreachable
	case t.RespondCopies == nil:
		return nil, replication.ErrNoAntiEntropy
	}
	return t.RespondCopies(ctx, p, keys)
}

// Sent returns a channel that receives every Send call as it returns, so
// goroutine-level tests wait for batches instead of sleeping. It holds the
// last 4096 unread ones; Batches has all of them.
func (t *Transport) Sent() <-chan Sent { return t.sent }

// Batches returns every Send call so far, in order.
func (t *Transport) Batches() []Sent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.batches)
}

// Disconnect cuts the named peer off: its batches fail with ErrUnreachable.
func (t *Transport) Disconnect(name string) {
	t.mu.Lock()
	t.cut[name] = true
	t.mu.Unlock()
}

// Connect undoes Disconnect for the named peer.
func (t *Transport) Connect(name string) {
	t.mu.Lock()
	delete(t.cut, name)
	t.mu.Unlock()
}

// Partition leaves only the named peers reachable (none, if no names are
// given): every other peer, including ones first seen later, is cut off
// until Heal. Disconnect still applies within the partition.
func (t *Transport) Partition(reachable ...string) {
	t.mu.Lock()
	t.only = make(map[string]bool, len(reachable))
	for _, n := range reachable {
		t.only[n] = true
	}
	t.mu.Unlock()
}

// Heal ends a Partition and reconnects every Disconnected peer.
func (t *Transport) Heal() {
	t.mu.Lock()
	t.only = nil
	clear(t.cut)
	t.mu.Unlock()
}

func (t *Transport) reachable(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut[name] {
		return false
	}
	return t.only == nil || t.only[name]
}

// OK answers 200 for every task of b.
func OK(b replication.Batch) replication.BatchResult {
	items := make([]wire.ItemResult, len(b.Tasks))
	for i := range items {
		items[i].StatusCode = 200
	}
	return replication.BatchResult{Items: items}
}

var _ replication.Transport = (*Transport)(nil)

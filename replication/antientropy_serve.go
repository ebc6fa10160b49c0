package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The anti-entropy wire (the digest and copies exchanges, their bounds
// and bodies) is registry/wire's (antientropy.go); here is what a node
// answers from its registry and how HTTPTransport asks a peer.

// BucketThreshold is the app size above which anti-entropy compares
// bucket digests before entries.
const BucketThreshold = 512

// bucketsFor is how many buckets an app of n instances is split into:
// about 2√n, a power of two between 16 and wire.MaxBuckets. Repairing d
// instances costs about 20 bytes per bucket digest plus 80 per entry of
// the d differing buckets (n/buckets each); 2√n balances the two for one.
func bucketsFor(n int) int {
	b := 16
	for b < wire.MaxBuckets && b*b < 4*n {
		b *= 2
	}
	return b
}

// DigestSource is what a node serves anti-entropy from: its registry.
// *registry.Registry implements it.
type DigestSource interface {
	RootDigest() uint64
	AppDigests(map[string]uint64) map[string]uint64
	AppEntries(app string, buf []registry.DigestEntry) []registry.DigestEntry
	AppBucketEntries(app string, in []bool, buf []registry.DigestEntry) []registry.DigestEntry
	AppBuckets(app string, n int, dst []uint64) []uint64
	AppSizes(min int, dst map[string]int) map[string]int
	Copy(app, id string) (registry.VersionedCopy, bool)
}

var _ DigestSource = (*registry.Registry)(nil)

// ErrBadRequest wraps every reason an anti-entropy request is refused as a
// whole (unreadable, too many apps or keys); the HTTP layer answers 400.
var ErrBadRequest = errors.New("replication: bad anti-entropy request")

// AnswerDigest answers a wire.DigestRequest (the body of POST
// peerreplication/digest) from src.
func AnswerDigest(src DigestSource, body []byte) ([]byte, error) {
	var req wire.DigestRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	reply, err := answerDigest(src, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

func answerDigest(src DigestSource, req wire.DigestRequest) (wire.DigestReply, error) {
	if n := len(req.Apps) + len(req.Buckets); n > wire.MaxDigestApps || len(req.Only) > wire.MaxDigestApps {
		return wire.DigestReply{}, fmt.Errorf("%w: %d apps asked for, at most %d", ErrBadRequest, max(n, len(req.Only)), wire.MaxDigestApps)
	}
	masks := make(map[string][]bool, len(req.Only))
	for app, set := range req.Only {
		if masks[app] = set.Mask(); masks[app] == nil {
			return wire.DigestReply{}, fmt.Errorf("%w: buckets of %s: want 1 to %d buckets, each below their number", ErrBadRequest, registry.QuotePrefix(app), wire.MaxBuckets)
		}
	}
	for app, n := range req.Buckets {
		if n < 1 || n > wire.MaxBuckets {
			return wire.DigestReply{}, fmt.Errorf("%w: %d buckets of %s, want 1 to %d", ErrBadRequest, n, registry.QuotePrefix(app), wire.MaxBuckets)
		}
	}
	reply := wire.DigestReply{Root: src.RootDigest()}
	if len(req.Buckets) > 0 {
		reply.BucketDigests = make(map[string][]uint64, len(req.Buckets))
		for app, n := range req.Buckets {
			reply.BucketDigests[app] = src.AppBuckets(app, n, nil)
		}
	}
	if len(req.Apps) > 0 {
		reply.Entries = make(map[string][]wire.DigestEntry, len(req.Apps))
		var buf []registry.DigestEntry
		for _, app := range req.Apps {
			if _, dup := reply.Entries[app]; dup {
				continue
			}
			if m := masks[app]; m != nil {
				buf = src.AppBucketEntries(app, m, buf[:0])
			} else {
				buf = src.AppEntries(app, buf[:0])
			}
			es := make([]wire.DigestEntry, len(buf))
			for i, e := range buf {
				es[i] = wire.DigestEntry{ID: e.ID, Version: e.Version, Digest: e.Digest, Live: e.Live, Tombstone: e.Tombstone}
				if e.Tombstone {
					es[i].TTL = max(e.TTL.Milliseconds(), 1)
				}
			}
			reply.Entries[app] = es
		}
	}
	if len(req.Apps) == 0 && len(req.Buckets) == 0 && reply.Root != req.Root {
		reply.AppDigests = src.AppDigests(nil)
		if sizes := src.AppSizes(BucketThreshold, nil); len(sizes) > 0 {
			reply.Sizes = sizes
		}
	}
	return reply, nil
}

// AnswerCopies answers POST peerreplication/copies from src: the stored
// copies of the keys asked for that exist here (missing ones are left
// out).
func AnswerCopies(src DigestSource, body []byte) ([]byte, error) {
	keys, err := wire.DecodeCopiesRequest(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if len(keys) > wire.MaxCopyKeys {
		return nil, fmt.Errorf("%w: %d keys asked for, at most %d", ErrBadRequest, len(keys), wire.MaxCopyKeys)
	}
	copies := make([]registry.VersionedCopy, 0, len(keys))
	for _, k := range keys {
		if c, ok := src.Copy(k.App, k.ID); ok {
			copies = append(copies, c)
		}
	}
	return wire.EncodeCopies(copies)
}

// DecodeCopies reads an AnswerCopies body (HTTPTransport and the
// in-memory network of replicationtest): wire.DecodeCopies.
func DecodeCopies(body []byte) ([]registry.VersionedCopy, error) { return wire.DecodeCopies(body) }

// EncodeCopiesRequest writes the body of POST peerreplication/copies:
// wire.EncodeCopiesRequest.
func EncodeCopiesRequest(keys []registry.InstanceKey) ([]byte, error) {
	return wire.EncodeCopiesRequest(keys)
}

// ErrAnswerTooLarge means a peer's anti-entropy answer was over the
// transport's bound; copies are then asked for fewer at a time.
var ErrAnswerTooLarge = errors.New("replication: anti-entropy answer too large")

// ErrNoAntiEntropy means the peer does not serve anti-entropy (it answered
// 404: a Java Eureka server, or an older Muster).
var ErrNoAntiEntropy = errors.New("replication: peer does not serve anti-entropy")

// Digest implements Transport: POST {peer}peerreplication/digest.
func (t *HTTPTransport) Digest(ctx context.Context, p Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return wire.DigestReply{}, err
	}
	resp, err := t.postPeer(ctx, p, "peerreplication/digest", body)
	if err != nil {
		return wire.DigestReply{}, err
	}
	var reply wire.DigestReply
	if err := json.Unmarshal(resp, &reply); err != nil {
		return wire.DigestReply{}, fmt.Errorf("digest from %s: %w", p.Name, err)
	}
	return reply, nil
}

// Copies implements Transport: POST {peer}peerreplication/copies.
func (t *HTTPTransport) Copies(ctx context.Context, p Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	body, err := EncodeCopiesRequest(keys)
	if err != nil {
		return nil, err
	}
	resp, err := t.postPeer(ctx, p, "peerreplication/copies", body)
	if err != nil {
		return nil, err
	}
	return DecodeCopies(resp)
}

// AntiEntropyBytes is the sum of the anti-entropy request and answer
// bodies this transport sent and received (uncompressed), for benchmarks
// and tests: two nodes in sync exchange a few dozen bytes per round.
func (t *HTTPTransport) AntiEntropyBytes() uint64 { return t.aeBytes.Load() }

// postPeer posts a signed JSON body to a peer and returns the 200 answer;
// 404 is ErrNoAntiEntropy, any other status a *StatusError.
func (t *HTTPTransport) postPeer(ctx context.Context, p Peer, path string, body []byte) ([]byte, error) {
	req, err := t.newPeerPost(ctx, p, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, t.maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s answer from %s: %w", path, p.Name, err)
	}
	t.aeBytes.Add(uint64(len(body) + len(respBody)))
	if int64(len(respBody)) > t.maxResponseBytes {
		// Cut, it would only fail to decode: say why.
		return nil, fmt.Errorf("%s answer from %s is larger than %d bytes: %w", path, p.Name, t.maxResponseBytes, ErrAnswerTooLarge)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", p.Name, ErrNoAntiEntropy)
	case resp.StatusCode != http.StatusOK:
		return nil, &StatusError{Code: resp.StatusCode}
	}
	return respBody, nil
}

// DrainReaders posts a drain's question to p (POST
// {peer}peerreplication/drain-readers, signed like anti-entropy) and
// returns its answer's body; a peer that does not serve it answers 404
// (an error wrapping ErrNoAntiEntropy: a Java Eureka server, an older
// Muster).
func (t *HTTPTransport) DrainReaders(ctx context.Context, p Peer, query []byte) ([]byte, error) {
	return t.postPeer(ctx, p, "peerreplication/drain-readers", query)
}

package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The anti-entropy wire, between Muster peers only (a Java Eureka server
// answers 404, and is left to Eureka's own repair). Two signed POSTs under
// the peer namespace, JSON both ways:
//
//	POST {peer}peerreplication/digest
//	  {"root":R}                 → {"root":R'}                 (in sync: R = R')
//	                             → {"root":R', "apps":{"APP":D,…}}
//	  {"root":R,"apps":["APP",…]} → {"root":R', "entries":{"APP":[
//	                                   {"id":"i-1","v":V,"d":D,"live":true},
//	                                   {"id":"i-2","v":V,"tomb":true,"ttl":ms}, …]}}
//	POST {peer}peerreplication/copies
//	  {"keys":[{"app":"APP","id":"i-1"},…]}
//	                             → {"copies":[{"instance":{…Eureka instance body…},
//	                                   "v":V,"renewed":ms,"live":true}, …]}
//
// Digests and versions are JSON numbers (unsigned 64-bit). Two nodes in
// sync exchange one small object each way per round; a round that finds
// differences asks for the app digests (O(apps)), then the entries of the
// differing apps only, then the copies it lacks.
//
// A large app (more than BucketThreshold instances on either side) is
// narrowed once more, to buckets of instance ids (registry.BucketOf), so
// repairing one instance of 100k does not send 100k entries:
//
//	{"root":R} → {"root":R', "apps":{…}, "sizes":{"BIG":20000}}
//	                                           (counts of large apps only)
//	{"root":R,"buckets":{"BIG":512}}  → {"root":R', "buckets":{"BIG":[D0,D1,…]}}
//	{"root":R,"apps":["BIG"],"only":{"BIG":{"n":512,"b":[7,300]}}}
//	                             → entries of BIG in buckets 7 and 300 only
//
// Every field is optional: a node that does not know sizes, buckets or
// only answers without them, and the asking node then falls back to the
// app's whole entries (and keeps only the buckets it asked for), so a
// missing field costs bytes, never a wrong repair.

// Bounds of one anti-entropy request: a larger one is refused with 400 by
// the receiving node, so the asking side splits its requests to fit.
const (
	MaxDigestApps = 256
	MaxCopyKeys   = 500
	// MaxBuckets bounds the buckets an app may be split into.
	MaxBuckets = 4096
)

// BucketThreshold is the app size above which anti-entropy compares
// bucket digests before entries.
const BucketThreshold = 512

// bucketsFor is how many buckets an app of n instances is split into:
// about 2√n, a power of two between 16 and MaxBuckets. Repairing d
// instances costs about 20 bytes per bucket digest plus 80 per entry of
// the d differing buckets (n/buckets each); 2√n balances the two for one.
func bucketsFor(n int) int {
	b := 16
	for b < MaxBuckets && b*b < 4*n {
		b *= 2
	}
	return b
}

// DigestRequest asks a peer for its digests.
type DigestRequest struct {
	// Root is the asking node's root digest: a peer with the same root
	// answers only its root.
	Root uint64 `json:"root"`
	// Apps, when set, asks for the entries of these apps (upper-cased
	// names) instead of the app digests.
	Apps []string `json:"apps,omitempty"`
	// Only restricts the entries of an app in Apps to some of its buckets.
	Only map[string]BucketSet `json:"only,omitempty"`
	// Buckets, when set, asks for the bucket digests of these apps, each
	// split into the given number of buckets (1…MaxBuckets).
	Buckets map[string]int `json:"buckets,omitempty"`
}

// BucketSet names some of an app's N buckets.
type BucketSet struct {
	N       int   `json:"n"`
	Buckets []int `json:"b"`
}

// mask returns the set as one flag per bucket; nil if it is malformed.
func (s BucketSet) mask() []bool {
	if s.N < 1 || s.N > MaxBuckets || len(s.Buckets) > s.N {
		return nil
	}
	m := make([]bool, s.N)
	for _, b := range s.Buckets {
		if b < 0 || b >= s.N {
			return nil
		}
		m[b] = true
	}
	return m
}

// DigestReply is a peer's answer to a DigestRequest.
type DigestReply struct {
	Root uint64 `json:"root"`
	// AppDigests holds every app's digest when the roots differ and no
	// apps were asked for.
	AppDigests map[string]uint64 `json:"apps,omitempty"`
	// Entries holds, for each app asked for, its instances and tombstones.
	Entries map[string][]Entry `json:"entries,omitempty"`
	// Sizes holds, with AppDigests, the instance count of every app
	// larger than BucketThreshold.
	Sizes map[string]int `json:"sizes,omitempty"`
	// BucketDigests holds, for each app of DigestRequest.Buckets, its
	// bucket digests.
	BucketDigests map[string][]uint64 `json:"buckets,omitempty"`
}

// Entry is one instance or tombstone of an app, as anti-entropy compares
// them (registry.DigestEntry on the wire).
type Entry struct {
	ID        string `json:"id"`
	Version   uint64 `json:"v"`
	Digest    uint64 `json:"d,omitempty"`
	Live      bool   `json:"live,omitempty"`
	Tombstone bool   `json:"tomb,omitempty"`
	// TTL is how long the peer keeps a tombstone still, in ms (absent: a
	// node that does not say; the taker keeps it a lease and the grace).
	TTL int64 `json:"ttl,omitempty"`
}

type copiesRequest struct {
	Keys []wireKey `json:"keys"`
}

type wireKey struct {
	App string `json:"app"`
	ID  string `json:"id"`
}

type copiesReply struct {
	Copies []wireCopy `json:"copies"`
}

type wireCopy struct {
	Instance json.RawMessage `json:"instance"`
	Version  uint64          `json:"v"`
	Renewed  int64           `json:"renewed"` // ms since epoch
	Live     bool            `json:"live,omitempty"`
	// Health is the instance's health-check mark: part of the copy its
	// version names (registry.Instance.Health).
	Health *wireHealth `json:"health,omitempty"`
	// Pieces are the instance's other pieces and their versions
	// (registry.Instance.Pieces): the receiver merges piece by piece.
	Pieces *wire.Pieces `json:"pieces,omitempty"`
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

// AnswerDigest answers a DigestRequest (the body of POST
// peerreplication/digest) from src.
func AnswerDigest(src DigestSource, body []byte) ([]byte, error) {
	var req DigestRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	reply, err := answerDigest(src, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

func answerDigest(src DigestSource, req DigestRequest) (DigestReply, error) {
	if n := len(req.Apps) + len(req.Buckets); n > MaxDigestApps || len(req.Only) > MaxDigestApps {
		return DigestReply{}, fmt.Errorf("%w: %d apps asked for, at most %d", ErrBadRequest, max(n, len(req.Only)), MaxDigestApps)
	}
	masks := make(map[string][]bool, len(req.Only))
	for app, set := range req.Only {
		if masks[app] = set.mask(); masks[app] == nil {
			return DigestReply{}, fmt.Errorf("%w: buckets of %s: want 1 to %d buckets, each below their number", ErrBadRequest, registry.QuotePrefix(app), MaxBuckets)
		}
	}
	for app, n := range req.Buckets {
		if n < 1 || n > MaxBuckets {
			return DigestReply{}, fmt.Errorf("%w: %d buckets of %s, want 1 to %d", ErrBadRequest, n, registry.QuotePrefix(app), MaxBuckets)
		}
	}
	reply := DigestReply{Root: src.RootDigest()}
	if len(req.Buckets) > 0 {
		reply.BucketDigests = make(map[string][]uint64, len(req.Buckets))
		for app, n := range req.Buckets {
			reply.BucketDigests[app] = src.AppBuckets(app, n, nil)
		}
	}
	if len(req.Apps) > 0 {
		reply.Entries = make(map[string][]Entry, len(req.Apps))
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
			es := make([]Entry, len(buf))
			for i, e := range buf {
				es[i] = Entry{ID: e.ID, Version: e.Version, Digest: e.Digest, Live: e.Live, Tombstone: e.Tombstone}
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
	var req copiesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if len(req.Keys) > MaxCopyKeys {
		return nil, fmt.Errorf("%w: %d keys asked for, at most %d", ErrBadRequest, len(req.Keys), MaxCopyKeys)
	}
	reply := copiesReply{Copies: make([]wireCopy, 0, len(req.Keys))}
	for _, k := range req.Keys {
		c, ok := src.Copy(k.App, k.ID)
		if !ok {
			continue
		}
		reply.Copies = append(reply.Copies, wireCopy{
			Instance: wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: c.Instance, LastRenewalTimestamp: c.LastRenewal.UnixMilli()}),
			Version:  c.Instance.WriteVersion,
			Renewed:  c.LastRenewal.UnixMilli(),
			Live:     c.Live,
			Health:   healthToWire(c.Instance.Health),
			Pieces:   wire.PiecesOf(c.Instance.Pieces),
		})
	}
	return json.Marshal(reply)
}

// DecodeCopies reads an AnswerCopies body (HTTPTransport and the
// in-memory network of replicationtest).
func DecodeCopies(body []byte) ([]registry.VersionedCopy, error) {
	var reply copiesReply
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	out := make([]registry.VersionedCopy, 0, len(reply.Copies))
	for _, c := range reply.Copies {
		in, err := wire.DecodeInstanceBodyJSON(c.Instance)
		if err != nil {
			return nil, fmt.Errorf("decode copy: %w", err)
		}
		in.WriteVersion = c.Version
		in.Health = c.Health.mark()
		in.Pieces = c.Pieces.Registry()
		out = append(out, registry.VersionedCopy{Instance: in, LastRenewal: time.UnixMilli(c.Renewed), Live: c.Live})
	}
	return out, nil
}

// EncodeCopiesRequest writes the body of POST peerreplication/copies.
func EncodeCopiesRequest(keys []registry.InstanceKey) ([]byte, error) {
	req := copiesRequest{Keys: make([]wireKey, len(keys))}
	for i, k := range keys {
		req.Keys[i] = wireKey{App: k.App, ID: k.ID}
	}
	return json.Marshal(req)
}

// ErrAnswerTooLarge means a peer's anti-entropy answer was over the
// transport's bound; copies are then asked for fewer at a time.
var ErrAnswerTooLarge = errors.New("replication: anti-entropy answer too large")

// ErrNoAntiEntropy means the peer does not serve anti-entropy (it answered
// 404: a Java Eureka server, or an older Muster).
var ErrNoAntiEntropy = errors.New("replication: peer does not serve anti-entropy")

// Digest implements Transport: POST {peer}peerreplication/digest.
func (t *HTTPTransport) Digest(ctx context.Context, p Peer, req DigestRequest) (DigestReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return DigestReply{}, err
	}
	resp, err := t.postPeer(ctx, p, "peerreplication/digest", body)
	if err != nil {
		return DigestReply{}, err
	}
	var reply DigestReply
	if err := json.Unmarshal(resp, &reply); err != nil {
		return DigestReply{}, fmt.Errorf("digest from %s: %w", p.Name, err)
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

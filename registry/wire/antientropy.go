package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/muster-registry/muster/registry"
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

// Mask returns the set as one flag per bucket; nil if it is malformed.
func (s BucketSet) Mask() []bool {
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
	Entries map[string][]DigestEntry `json:"entries,omitempty"`
	// Sizes holds, with AppDigests, the instance count of every app
	// larger than BucketThreshold.
	Sizes map[string]int `json:"sizes,omitempty"`
	// BucketDigests holds, for each app of DigestRequest.Buckets, its
	// bucket digests.
	BucketDigests map[string][]uint64 `json:"buckets,omitempty"`
}

// DigestEntry is one instance or tombstone of an app, as anti-entropy
// compares them (registry.DigestEntry on the wire).
type DigestEntry struct {
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
	Health *Health `json:"health,omitempty"`
	// Pieces are the instance's other pieces and their versions
	// (registry.Instance.Pieces): the receiver merges piece by piece.
	Pieces *Pieces `json:"pieces,omitempty"`
}

// EncodeCopiesRequest writes the body of POST peerreplication/copies.
func EncodeCopiesRequest(keys []registry.InstanceKey) ([]byte, error) {
	req := copiesRequest{Keys: make([]wireKey, len(keys))}
	for i, k := range keys {
		req.Keys[i] = wireKey{App: k.App, ID: k.ID}
	}
	return json.Marshal(req)
}

// DecodeCopiesRequest reads the body of POST peerreplication/copies.
func DecodeCopiesRequest(body []byte) ([]registry.InstanceKey, error) {
	var req copiesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	keys := make([]registry.InstanceKey, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = registry.InstanceKey{App: k.App, ID: k.ID}
	}
	return keys, nil
}

// EncodeCopies writes the answer to POST peerreplication/copies: each
// copy's instance body, write version, last renewal, liveness, health mark
// and pieces.
func EncodeCopies(copies []registry.VersionedCopy) ([]byte, error) {
	reply := copiesReply{Copies: make([]wireCopy, 0, len(copies))}
	for _, c := range copies {
		reply.Copies = append(reply.Copies, wireCopy{
			Instance: AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: c.Instance, LastRenewalTimestamp: c.LastRenewal.UnixMilli()}),
			Version:  c.Instance.WriteVersion,
			Renewed:  c.LastRenewal.UnixMilli(),
			Live:     c.Live,
			Health:   HealthOf(c.Instance.Health),
			Pieces:   PiecesOf(c.Instance.Pieces),
		})
	}
	return json.Marshal(reply)
}

// DecodeCopies reads an EncodeCopies body.
func DecodeCopies(body []byte) ([]registry.VersionedCopy, error) {
	var reply copiesReply
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	out := make([]registry.VersionedCopy, 0, len(reply.Copies))
	for _, c := range reply.Copies {
		in, err := DecodeInstanceBodyJSON(c.Instance)
		if err != nil {
			return nil, fmt.Errorf("decode copy: %w", err)
		}
		in.WriteVersion = c.Version
		in.Health = c.Health.Mark()
		in.Pieces = c.Pieces.Registry()
		out = append(out, registry.VersionedCopy{Instance: in, LastRenewal: time.UnixMilli(c.Renewed), Live: c.Live})
	}
	return out, nil
}

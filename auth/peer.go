package auth

import (
	"container/heap"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of a signed peer request. Canonical spelling, so lookups do not
// canonicalise.
const (
	HeaderPeerNode      = "X-Muster-Peer"           // the sending node's name
	HeaderPeerTimestamp = "X-Muster-Peer-Timestamp" // Unix milliseconds
	HeaderPeerNonce     = "X-Muster-Peer-Nonce"     // 16 random bytes, hex
	HeaderPeerSignature = "X-Muster-Peer-Signature" // "v1=" + hex(HMAC-SHA256)
)

const signaturePrefix = "v1="

// MinPeerSecretLen is the shortest cluster.peer-secret accepted.
const MinPeerSecretLen = 16

// DefaultMaxSkew is how far a signature's timestamp may be from the
// receiver's clock (cluster.peer-max-clock-skew-ms).
const DefaultMaxSkew = 30 * time.Second

// DefaultReplayMemory bounds the signatures a verifier remembers.
const DefaultReplayMemory = 100_000

// ErrPeerSecretTooShort is a cluster.peer-secret under MinPeerSecretLen.
var ErrPeerSecretTooShort = fmt.Errorf("auth: peer secret must be at least %d bytes", MinPeerSecretLen)

// PeerSigner signs requests a node sends to its peers. It is safe for
// concurrent use.
type PeerSigner struct {
	secret []byte
	node   string
	now    func() time.Time
}

// NewPeerSigner returns a signer for the node called node; now nil means
// time.Now.
func NewPeerSigner(secret, node string, now func() time.Time) (*PeerSigner, error) {
	if len(secret) < MinPeerSecretLen {
		return nil, ErrPeerSecretTooShort
	}
	if now == nil {
		now = time.Now
	}
	return &PeerSigner{secret: []byte(secret), node: node, now: now}, nil
}

// Sign adds the signature headers to req, whose body is body (nil for
// none). Call it last, after the URL is final.
func (s *PeerSigner) Sign(req *http.Request, body []byte) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	n := hex.EncodeToString(nonce[:])
	mac := peerMAC(s.secret, req.Method, canonicalPath(req.URL.EscapedPath(), req.URL.RawQuery), ts, n, s.node, body)
	h := req.Header
	h.Set(HeaderPeerNode, s.node)
	h.Set(HeaderPeerTimestamp, ts)
	h.Set(HeaderPeerNonce, n)
	h.Set(HeaderPeerSignature, signaturePrefix+hex.EncodeToString(mac[:]))
}

// HasPeerSignature tells whether a request claims to be signed.
func HasPeerSignature(h http.Header) bool {
	return len(h[HeaderPeerSignature]) > 0
}

// canonicalPath is the signed form of a path: escaped, without a trailing
// slash (the server drops it before routing, and Java peers add it), with
// the raw query.
func canonicalPath(escapedPath, rawQuery string) string {
	p := strings.TrimRight(escapedPath, "/")
	if p == "" {
		p = "/"
	}
	if rawQuery != "" {
		p += "?" + rawQuery
	}
	return p
}

func peerMAC(secret []byte, method, path, ts, nonce, node string, body []byte) [sha256.Size]byte {
	digest := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"muster-peer-v1", method, path, ts, nonce, node} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	var hexDigest [2 * sha256.Size]byte
	hex.Encode(hexDigest[:], digest[:])
	m.Write(hexDigest[:])
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// PeerVerifier checks signed peer requests and refuses bad, stale and
// replayed ones. It is safe for concurrent use.
type PeerVerifier struct {
	secret  []byte
	maxSkew time.Duration

	// mu guards seen, byAge and floor.
	mu    sync.Mutex
	seen  map[[sha256.Size]byte]struct{}
	byAge sigHeap
	// floor: signatures at or before this Unix ms are refused, because
	// ones signed then may have been forgotten (memory bound hit).
	floor int64
	limit int
}

// NewPeerVerifier returns a verifier; maxSkew ≤ 0 means DefaultMaxSkew,
// memory ≤ 0 DefaultReplayMemory.
func NewPeerVerifier(secret string, maxSkew time.Duration, memory int) (*PeerVerifier, error) {
	if len(secret) < MinPeerSecretLen {
		return nil, ErrPeerSecretTooShort
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if memory <= 0 {
		memory = DefaultReplayMemory
	}
	return &PeerVerifier{secret: []byte(secret), maxSkew: maxSkew, seen: map[[sha256.Size]byte]struct{}{}, limit: memory}, nil
}

// MaxSkew is the accepted distance between a signature's time and ours.
func (v *PeerVerifier) MaxSkew() time.Duration { return v.maxSkew }

// Verify checks the signature headers of a request against its method,
// escaped path, raw query and body, at time now. It returns the signing
// node's name (as it claims it; only a holder of the secret can sign it) or
// the failure.
func (v *PeerVerifier) Verify(h http.Header, method, escapedPath, rawQuery string, body []byte, now time.Time) (string, Failure) {
	node, ts, nonce, sig := first(h, HeaderPeerNode), first(h, HeaderPeerTimestamp), first(h, HeaderPeerNonce), first(h, HeaderPeerSignature)
	if ts == "" || nonce == "" || len(nonce) > 64 || len(node) > 256 || !strings.HasPrefix(sig, signaturePrefix) {
		return "", FailurePeerMalformed
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, signaturePrefix))
	if err != nil || len(got) != sha256.Size {
		return "", FailurePeerMalformed
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", FailurePeerMalformed
	}
	want := peerMAC(v.secret, method, canonicalPath(escapedPath, rawQuery), ts, nonce, node, body)
	if !hmac.Equal(got, want[:]) {
		return "", FailurePeerBad
	}
	nowMs := now.UnixMilli()
	if d := nowMs - ms; d > v.maxSkew.Milliseconds() || -d > v.maxSkew.Milliseconds() {
		return "", FailurePeerStale
	}
	if !v.remember(want, ms, nowMs) {
		return "", FailurePeerReplayed
	}
	return node, FailureNone
}

// remember records an accepted signature; false means it was seen before
// (or falls under the floor).
func (v *PeerVerifier) remember(sig [sha256.Size]byte, ms, nowMs int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Forget what is stale anyway: those would be refused on time alone.
	for len(v.byAge) > 0 && v.byAge[0].ms < nowMs-v.maxSkew.Milliseconds() {
		old := heap.Pop(&v.byAge).(sigAt)
		delete(v.seen, old.sig)
	}
	if ms <= v.floor {
		return false
	}
	if _, dup := v.seen[sig]; dup {
		return false
	}
	v.seen[sig] = struct{}{}
	heap.Push(&v.byAge, sigAt{sig: sig, ms: ms})
	for len(v.byAge) > v.limit {
		old := heap.Pop(&v.byAge).(sigAt)
		delete(v.seen, old.sig)
		v.floor = max(v.floor, old.ms)
	}
	return true
}

func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

type sigAt struct {
	sig [sha256.Size]byte
	ms  int64
}

// sigHeap is a min-heap of signatures by timestamp.
type sigHeap []sigAt

func (h sigHeap) Len() int           { return len(h) }
func (h sigHeap) Less(i, j int) bool { return h[i].ms < h[j].ms }
func (h sigHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sigHeap) Push(x any)        { *h = append(*h, x.(sigAt)) }
func (h *sigHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

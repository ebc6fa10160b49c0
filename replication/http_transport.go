package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// HeaderReplication marks requests between peers (PeerEurekaNode's
// HEADER_REPLICATION, x-netflix-discovery-replication); Eureka compares its
// value with "true" exactly. Header names are case-insensitive; it is
// spelled in Go's canonical form so that a direct http.Header lookup (the
// receiving side does one on every heartbeat) needs no canonicalisation.
const HeaderReplication = "X-Netflix-Discovery-Replication"

// HTTPTransport sends batches over Eureka's wire: POST
// {peer URL}peerreplication/batch with the replication header and a JSON
// ReplicationList.
type HTTPTransport struct {
	client *http.Client
	// maxResponseBytes bounds what a peer may answer to a batch.
	maxResponseBytes int64
	// fetchClient fetches whole registries for syncUp: the same connections,
	// but no request timeout of its own, as the batch timeout is far too
	// short for a large registry; the caller's context bounds it
	// (SyncConfig.FetchTimeout, as an idle timeout).
	fetchClient *http.Client
	// maxRegistryBytes caps a registry read for syncUp
	// (HTTPTransportConfig.MaxSyncBodyBytes).
	maxRegistryBytes int64
	sign             RequestSigner // nil: requests go unsigned
	// aeBytes counts anti-entropy request and answer bodies
	// (AntiEntropyBytes).
	aeBytes atomic.Uint64

	// lastMu guards last, the body of the batch encoded last. A sender
	// that keeps up gives every Muster peer the same round in one batch
	// (replication's feed hands each round to all of them at once), so the
	// second peer's batch is the first one's bytes: encoded once, not once
	// per peer.
	lastMu sync.Mutex
	last   encodedBatch
	// encodes counts batches encoded (tests).
	encodes atomic.Uint64
}

// encodedBatch is a batch's body with what it was encoded from: the tasks'
// actions, keys and instances (a task's bytes depend on nothing else) and
// whether it carried versions. It holds one reference to buf.
type encodedBatch struct {
	tasks     []Task
	versioned bool
	buf       *sharedBuf
	body      []byte
}

// sameBody reports whether b encodes to e's body.
func (e *encodedBatch) sameBody(b Batch) bool {
	if e.buf == nil || e.versioned != b.Versioned || len(e.tasks) != len(b.Tasks) {
		return false
	}
	for i := range b.Tasks {
		x, y := &e.tasks[i], &b.Tasks[i]
		if x.Instance != y.Instance || x.Action != y.Action || x.Key != y.Key {
			return false
		}
	}
	return true
}

// HTTPTransportConfig configures an HTTPTransport. Start from
// DefaultHTTPTransportConfig.
type HTTPTransportConfig struct {
	// ConnectTimeout bounds opening a connection to a peer (the TLS
	// handshake included when DialTLS dials).
	// eureka.server.peer-node-connect-timeout-ms, default 1 s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds a whole batch request, answer included.
	// eureka.server.peer-node-read-timeout-ms, default 5 s (Netflix's).
	// A syncUp fetch has no timeout of its own (a large registry takes
	// longer): SyncConfig.FetchTimeout bounds it through its context.
	RequestTimeout time.Duration
	// MaxSyncBodyBytes caps the registry FetchRegistry reads from a peer
	// (after gzip is undone); a larger one fails the attempt with
	// ErrSyncTooLarge and syncUp tries the next peer.
	// muster.max-sync-body-bytes, default DefaultMaxSyncBodyBytes.
	MaxSyncBodyBytes int64
	// DialTLS dials https peers, for batches and syncUp fetches alike:
	// the node's TLS identity, the trust bundle peers are verified against
	// and certificate rotation live behind it. nil: the standard library's
	// TLS with the system roots.
	DialTLS DialTLSFunc
	// Signer signs every batch and every syncUp fetch
	// (cluster.peer-secret). nil: requests go unsigned.
	Signer RequestSigner
}

// DefaultHTTPTransportConfig returns Netflix's peer timeouts and a 2 GiB
// sync limit.
func DefaultHTTPTransportConfig() HTTPTransportConfig {
	return HTTPTransportConfig{
		ConnectTimeout:   time.Second,     // peer-node-connect-timeout-ms
		RequestTimeout:   5 * time.Second, // peer-node-read-timeout-ms
		MaxSyncBodyBytes: DefaultMaxSyncBodyBytes,
	}
}

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field.
func (c HTTPTransportConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("replication: "+field+" "+format, args...)
	}
	if c.ConnectTimeout <= 0 {
		return bad("ConnectTimeout", "must be positive, got %s", c.ConnectTimeout)
	}
	if c.RequestTimeout <= 0 {
		return bad("RequestTimeout", "must be positive, got %s", c.RequestTimeout)
	}
	if c.MaxSyncBodyBytes <= 0 {
		return bad("MaxSyncBodyBytes", "must be positive, got %d", c.MaxSyncBodyBytes)
	}
	return nil
}

// NewHTTPTransport returns a transport with a keep-alive pool per peer.
func NewHTTPTransport(cfg HTTPTransportConfig) (*HTTPTransport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:         PeerDialer(cfg.ConnectTimeout).DialContext,
		DialTLSContext:      cfg.DialTLS,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &HTTPTransport{
		client:           &http.Client{Transport: tr, Timeout: cfg.RequestTimeout, CheckRedirect: noRedirects},
		fetchClient:      &http.Client{Transport: tr, CheckRedirect: noRedirects},
		maxRegistryBytes: cfg.MaxSyncBodyBytes,
		maxResponseBytes: 64 << 20,
		sign:             cfg.Signer,
	}, nil
}

// PeerDialer is the dialer of connections to peers; a DialTLS given to
// NewHTTPTransport may wrap it, so that TLS and plain connections share
// the connect timeout.
func PeerDialer(connectTimeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second, Control: dropUnsentOnClose}
}

// newPeerPost builds a signed JSON POST to a peer's path: a replication
// batch or an anti-entropy request, which every receiver checks the same
// way.
func (t *HTTPTransport) newPeerPost(ctx context.Context, p Peer, path string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, joinURL(p.URL, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderReplication, "true")
	req.Header.Set("User-Agent", "Muster-Replication")
	if t.sign != nil {
		t.sign(req, body)
	}
	return req, nil
}

// Send implements Transport. The batch is encoded into a buffer that
// serves batch after batch (a node under heartbeat load sends tens of
// batches a second to each peer, and a fresh 50 KB body per batch was most
// of what replication gave the collector to do); the buffer goes back to
// the pool only once net/http is done with every reader of it, which may
// be after Send returns (RoundTrip closes a request body in its own time).
func (t *HTTPTransport) Send(ctx context.Context, p Peer, b Batch) (BatchResult, error) {
	buf, body, err := t.encodeBatch(b)
	if err != nil {
		return BatchResult{}, fmt.Errorf("encode batch for %s: %w", p.Name, err)
	}
	defer buf.release()
	req, err := t.newPeerPost(ctx, p, "peerreplication/batch", body)
	if err != nil {
		return BatchResult{}, fmt.Errorf("batch request to %s: %w", p.Name, err)
	}
	req.Body = buf.reader(body)
	req.GetBody = func() (io.ReadCloser, error) { return buf.reader(body), nil }
	resp, err := t.client.Do(req)
	if err != nil {
		return BatchResult{}, err
	}
	defer resp.Body.Close()
	rb := responseBuffers.Get().(*bytes.Buffer)
	rb.Reset()
	defer func() {
		if rb.Cap() <= maxPooledBuffer {
			responseBuffers.Put(rb)
		}
	}()
	if _, err := rb.ReadFrom(io.LimitReader(resp.Body, t.maxResponseBytes)); err != nil {
		return BatchResult{}, fmt.Errorf("read batch response from %s: %w", p.Name, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return BatchResult{}, &StatusError{Code: resp.StatusCode}
	}
	// The answer is decoded into values of its own (status codes, decoded
	// instances): nothing keeps rb's bytes.
	res, err := DecodeBatchResponse(rb.Bytes())
	if err != nil {
		// The peer answered but not in a way we understand; retrying the
		// same batch would get the same answer.
		return BatchResult{}, &StatusError{Code: http.StatusBadGateway}
	}
	return res, nil
}

// encodeBatch returns b's body in a buffer holding one reference for the
// caller: the last batch's, when b encodes to the same bytes, or a new one,
// which the transport keeps for the next peer. Encoding under the lock lets
// a peer whose batch is being encoded wait for those bytes rather than
// encode them too.
func (t *HTTPTransport) encodeBatch(b Batch) (*sharedBuf, []byte, error) {
	t.lastMu.Lock()
	defer t.lastMu.Unlock()
	if t.last.sameBody(b) {
		t.last.buf.refs.Add(1)
		return t.last.buf, t.last.body, nil
	}
	buf := newSharedBuf()
	body, err := appendBatch(buf.b[:0], b)
	if err != nil {
		buf.release()
		return nil, nil, err
	}
	buf.b = body
	t.encodes.Add(1)
	if t.last.buf != nil {
		t.last.buf.release()
	}
	clear(t.last.tasks) // keeps no instance alive
	buf.refs.Add(1)     // the transport's own
	t.last = encodedBatch{tasks: append(t.last.tasks[:0], b.Tasks...), versioned: b.Versioned, buf: buf, body: body}
	return buf, body, nil
}

// maxPooledBuffer is the largest batch or answer buffer kept for reuse: a
// batch of registers can be megabytes, and one such batch should not keep
// its buffer for good.
const maxPooledBuffer = 1 << 20

var (
	batchBuffers    = sync.Pool{New: func() any { return new([]byte) }}
	responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// sharedBuf is a pooled batch buffer with a count of its users: Send and
// every request body reading it. The last to let go puts it back.
type sharedBuf struct {
	p    *[]byte
	b    []byte
	refs atomic.Int32
}

func newSharedBuf() *sharedBuf {
	p := batchBuffers.Get().(*[]byte)
	s := &sharedBuf{p: p, b: *p}
	s.refs.Store(1)
	return s
}

func (s *sharedBuf) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	if cap(s.b) <= maxPooledBuffer {
		*s.p = s.b[:0]
		batchBuffers.Put(s.p)
	}
}

// reader is a request body over body (s's bytes) that holds s until closed.
func (s *sharedBuf) reader(body []byte) io.ReadCloser {
	s.refs.Add(1)
	return &sharedBody{Reader: bytes.NewReader(body), buf: s}
}

type sharedBody struct {
	*bytes.Reader
	buf    *sharedBuf
	closed atomic.Bool
}

func (b *sharedBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.buf.release()
	}
	return nil
}

// joinURL appends path to a Eureka base URL, with exactly one slash.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// FetchRegistry implements Transport: GET {peer}apps as gzip JSON, marked
// as replication (and signed, with a peer secret) so a peer that is itself
// still syncing answers 503 (it has no registry to give) instead of a
// client's 403. The registry is decoded as it arrives, one application at
// a time (wire.ReadApplicationsJSON): at 1M instances the plain document is
// ~1.2 GB, which reading whole cost twice that in memory and most of the
// copy's time.
func (t *HTTPTransport) FetchRegistry(ctx context.Context, p Peer) ([]*registry.Instance, error) {
	return t.FetchRegistryProgress(ctx, p, nil)
}

// FetchRegistryProgress is FetchRegistry calling progress (when not nil)
// whenever bytes arrive or an application is decoded; Syncer uses it to
// time out a stalled copy rather than a long one.
func (t *HTTPTransport) FetchRegistryProgress(ctx context.Context, p Peer, progress func()) ([]*registry.Instance, error) {
	if progress == nil {
		progress = func() {}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, joinURL(p.URL, "apps"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	// Asked for explicitly, so the transport leaves it to us: klauspost's
	// inflate is faster than compress/gzip's.
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set(HeaderReplication, "true")
	if t.sign != nil {
		t.sign(req, nil)
	}
	resp, err := t.fetchClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusServiceUnavailable {
			return nil, fmt.Errorf("GET %s: %w", req.URL.Redacted(), ErrPeerStarting)
		}
		return nil, fmt.Errorf("GET %s answered %d", req.URL.Redacted(), resp.StatusCode)
	}
	var body io.Reader = resp.Body
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("registry of %s: %w", p.Name, err)
		}
		defer zr.Close()
		body = zr
	}
	maxBytes := t.maxRegistryBytes
	limited := &limitedReader{r: body, left: maxBytes, progress: progress}
	var out []*registry.Instance
	err = wire.ReadApplicationsJSON(limited, func(app registry.AppView) error {
		progress()
		for _, iv := range app.Instances {
			out = append(out, iv.Instance)
		}
		return nil
	})
	if errors.Is(err, errReadLimit) {
		return nil, fmt.Errorf("registry of %s: %w (%d bytes, muster.max-sync-body-bytes)", p.Name, ErrSyncTooLarge, maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("registry of %s: %w", p.Name, err)
	}
	return out, nil
}

var errReadLimit = errors.New("replication: read limit reached")

// limitedReader reads at most left bytes of r and fails with errReadLimit
// past them, where io.LimitReader would end quietly.
type limitedReader struct {
	r        io.Reader
	left     int64
	progress func() // called when bytes arrive
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		l.progress()
	}
	if l.left -= int64(n); l.left < 0 {
		return n, errReadLimit
	}
	return n, err
}

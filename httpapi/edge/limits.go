package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// How the HTTP server bounds what slow, idle or many connections can hold.
//
//   - Headers must arrive within ReadHeaderTimeout (10 s), and an idle
//     keep-alive connection is closed after IdleTimeout (2 min).
//   - A request body must arrive whole within BodyReadTimeout after its
//     headers; a slower body fails (408) and its connection is closed.
//     Nothing is reserved from a declared Content-Length: a body buffer
//     grows with the bytes that came, so a connection that declares 16 MB
//     and sends one byte holds one byte (plus the read buffers every
//     connection has, ~8 KB).
//   - Responses have no total deadline, which would cut off a 100k-instance
//     registry (~100 MB as plain JSON) going to a slow but honest reader.
//     Instead each writeChunk bytes must be taken by the reader within
//     WriteChunkTimeout: the deadline moves with progress. A reader that
//     takes nothing for that long is dropped; one that reads 128 KiB per
//     30 s (~4 KiB/s) is never cut off. Where the kernel tells how much the
//     reader has acknowledged (TCP_INFO on Linux), a large response goes
//     out in writes of up to writeMax and a watchdog moves the deadline as
//     each writeChunk is acknowledged (progress.go); elsewhere it goes out
//     in writes of writeChunk, each with its own deadline. The rule is the
//     same; the big writes matter because on loopback every write costs
//     ~10 µs beyond its bytes: a 10k delta (800 KB) in 128 KiB writes cost
//     the server 1.3–1.5× the CPU of one write, in 1 MiB writes 1.0×.
//   - At most MaxConnections connections are open; further ones wait in the
//     listen backlog until one closes, and the waits are counted. Open
//     connections are not affected.

// writeChunk is the bytes a reader must take within one write deadline.
const writeChunk = 128 << 10

// writeMax is the largest single write when a watchdog follows the
// reader's progress.
const writeMax = 4 << 20

// LimitsConfig is the connection limits of the server. Zero turns a
// limit off.
type LimitsConfig struct {
	// BodyReadTimeout: a request body must arrive whole this long after
	// its headers (408 beyond); muster.body-read-timeout-ms.
	BodyReadTimeout time.Duration
	// WriteChunkTimeout: each 128 KiB of a response must be taken by the
	// reader within it; muster.write-chunk-timeout-ms.
	WriteChunkTimeout time.Duration
	// MaxConnections: open connections at most, further ones wait;
	// muster.max-connections.
	MaxConnections int
}

// Limits applies LimitsConfig to connections and requests, and counts the
// limits clients met.
type Limits struct {
	cfg    LimitsConfig
	counts limitCounts
}

// NewLimits returns the limits of cfg.
func NewLimits(cfg LimitsConfig) *Limits { return &Limits{cfg: cfg} }

// LimitCounts is how often clients met each HTTP-level limit, for
// muster_limit_rejections_total.
type LimitCounts struct {
	BodyBytes       uint64 // body beyond max-body-bytes or max-batch-body-bytes (413)
	BodyReadTimeout uint64 // body slower than body-read-timeout-ms (408)
	Connections     uint64 // accepts that had to wait for max-connections
}

// Counts reads the counters.
func (l *Limits) Counts() LimitCounts {
	return LimitCounts{BodyBytes: l.counts.bodyBytes.Load(), BodyReadTimeout: l.counts.bodyReadTimeout.Load(),
		Connections: l.counts.connections.Load()}
}

// CountBodyTooLarge counts a 413, wherever the body limit was met (the
// server's error handler sees them all).
func (l *Limits) CountBodyTooLarge() { l.counts.bodyBytes.Add(1) }

type limitCounts struct {
	bodyBytes       atomic.Uint64 // body beyond max-body-bytes or max-batch-body-bytes (413)
	bodyReadTimeout atomic.Uint64 // body slower than body-read-timeout-ms (408)
	connections     atomic.Uint64 // accepts that had to wait for max-connections
}

// Prepare prepares one request: a read deadline for its body and a
// writer whose deadline follows the progress of the response (nil when
// WriteChunkTimeout is off). Hand the writer back with Release once the
// request is served.
func (l *Limits) Prepare(w http.ResponseWriter, r *http.Request) *ProgressWriter {
	if l.cfg.BodyReadTimeout > 0 && (r.ContentLength > 0 || r.ContentLength == -1) && r.Body != nil && r.Body != http.NoBody {
		// Only when a body is coming: on a request without one, net/http
		// reads the connection in the background to notice a client that
		// goes away, and a deadline there would cancel a long download.
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(l.cfg.BodyReadTimeout)); err == nil {
			r.Body = &timedBody{ReadCloser: r.Body, counts: &l.counts}
		}
	}
	if l.cfg.WriteChunkTimeout <= 0 {
		return nil
	}
	pw := ProgressWriters.Get().(*ProgressWriter)
	pw.ResponseWriter, pw.timeout = w, l.cfg.WriteChunkTimeout
	if r.ProtoMajor == 1 {
		// HTTP/2 shares a connection between streams: its deadlines are
		// per stream, so only HTTP/1 writes are watched on the connection.
		pw.conn, _ = r.Context().Value(connContextKey{}).(net.Conn)
	}
	return pw
}

// ProgressWriters are reused: one per request would be an allocation on
// every heartbeat.
var ProgressWriters = sync.Pool{New: func() any { return new(ProgressWriter) }}

// Release hands the writer back once its request is served.
func (pw *ProgressWriter) Release() {
	*pw = ProgressWriter{}
	ProgressWriters.Put(pw)
}

// timedBody marks a read that failed on the body read deadline, so the
// handler answers 408 and the timeout is counted.
type timedBody struct {
	io.ReadCloser
	counts *limitCounts
	timed  bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		if !b.timed {
			b.timed = true
			b.counts.bodyReadTimeout.Add(1)
		}
		return n, ErrBodyReadTimeout
	}
	return n, err
}

// ErrBodyReadTimeout is what reading a body past BodyReadTimeout returns
// (408).
var ErrBodyReadTimeout = echo.NewHTTPError(http.StatusRequestTimeout,
	"request body not received in time (muster.body-read-timeout-ms)")

// ProgressWriter writes so that the reader must take each writeChunk
// within timeout: in writes of writeChunk, each with a fresh deadline, or,
// when the connection reports acknowledged bytes, in writes of up to
// writeMax whose deadline a watchdog moves on as the reader takes them.
type ProgressWriter struct {
	http.ResponseWriter
	rc      http.ResponseController // set on the first write; a heartbeat has none
	hasRC   bool
	timeout time.Duration
	// noDeadline is set when the writer below takes no deadlines (a test
	// recorder): the rest is written in one piece.
	noDeadline bool
	// conn is the request's connection (HTTPServer's ConnContext), nil
	// when served otherwise; acks reads its acknowledged bytes, found on
	// the first large write (noAcks when it cannot be).
	conn   net.Conn
	acks   ackCounter
	noAcks bool
}

func (w *ProgressWriter) controller() *http.ResponseController {
	if !w.hasRC {
		w.rc, w.hasRC = *http.NewResponseController(w.ResponseWriter), true
	}
	return &w.rc
}

func (w *ProgressWriter) Write(p []byte) (int, error) {
	w.controller()
	written := 0
	for len(p) > 0 {
		n := min(len(p), writeChunk)
		var watch *ackWatch
		if w.noDeadline {
			n = len(p)
		} else if err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			w.noDeadline, n = true, len(p)
		} else if len(p) > writeChunk && w.watchable() {
			if watch = watchAcks(w.conn, w.acks, w.timeout); watch != nil {
				n = min(len(p), writeMax)
			}
		}
		m, err := w.ResponseWriter.Write(p[:n])
		if watch != nil {
			watch.stop()
		}
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// watchable reports whether the reader's progress can be followed on this
// connection, finding out on the first large write.
func (w *ProgressWriter) watchable() bool {
	if w.acks == nil && !w.noAcks {
		w.acks = ackCounterOf(w.conn)
		w.noAcks = w.acks == nil
	}
	return w.acks != nil
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *ProgressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes through (echo's response checks for http.Flusher).
func (w *ProgressWriter) Flush() {
	w.controller()
	if !w.noDeadline && w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) != nil {
		w.noDeadline = true
	}
	_ = w.rc.Flush()
}

// LimitListener returns ln accepting at most MaxConnections open
// connections at once; 0 means no limit.
func (l *Limits) LimitListener(ln net.Listener) net.Listener {
	if l.cfg.MaxConnections <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, l.cfg.MaxConnections), counts: &l.counts}
}

type connContextKey struct{}

// ConnContext puts the connection in each request's context, so that a
// large response can follow what the reader acknowledged
// (http.Server.ConnContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connContextKey{}, c)
}

// ErrBodyTooLarge is the 413 of a body beyond limit.
func ErrBodyTooLarge(limit int64) error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
}

// LimitBody caps the request body; reading beyond it fails, and the
// handler answers 413.
func LimitBody(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return ErrBodyTooLarge(limit)
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
			return next(c)
		}
	}
}

// limitListener holds a slot per open connection; Accept waits for one.
type limitListener struct {
	net.Listener
	slots  chan struct{}
	counts *limitCounts
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.counts.connections.Add(1)
		l.slots <- struct{}{}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

package healthcheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxBodyRead is how much of an answer a probe reads before closing: the
// status decides, the rest is only drained a little so small answers
// finish cleanly.
const maxBodyRead = 4 << 10

// prober runs probes. HTTP is spoken by hand, the one request a probe
// needs: net/http's client costs a transport, two goroutines and a
// connection pool per request, three times the CPU of the whole probe
// here, and its pool is keyed by the URL's host, not by the address
// actually dialled. So: one connection per probe, to the checked address,
// "GET <path> HTTP/1.1" with the URL's Host, "Connection: close", no
// credentials, no cookies, no client certificate, no proxy; the status
// line decides (a 3xx is not followed: it fails), at most 4 KiB of the
// answer is read to find it, and the rest is dropped with the connection.
type prober struct {
	timeout time.Duration
	dialer  net.Dialer
	tls     *tls.Config
	dials   atomic.Uint64 // every connection attempt, for tests
}

func newProber(timeout time.Duration) *prober {
	return &prober{
		timeout: timeout,
		// No TCP keep-alive on a connection that lives one probe: it
		// would cost four setsockopt calls per probe for nothing.
		dialer: net.Dialer{KeepAlive: -1},
		// Liveness, not trust: like Kubernetes' HTTPS probes, the
		// instance's certificate is not verified. Nothing secret is sent,
		// and no client certificate is offered.
		tls: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
	}
}

// dial connects to ap, the checked address itself: Dialer.DialTCP takes
// the netip.AddrPort as it is, with no string to format and parse again
// and no resolver on the way (a probe's address is never a name).
func (p *prober) dial(ctx context.Context, ap netip.AddrPort) (*net.TCPConn, error) {
	p.dials.Add(1)
	return p.dialer.DialTCP(ctx, "tcp", netip.AddrPort{}, ap)
}

// probeCtx is a probe's context: its parent's cancellation (a worker's
// context under the round's, so that a shutdown interrupts a dial) and a
// deadline of its own, the probe's start plus the timeout. The deadline
// is enforced by the poller, not by a timer: net's connect sets the
// socket's write deadline from Deadline, and the exchange runs under the
// connection's deadline (probe). A context.WithTimeout per probe cost a
// timer started and stopped in the runtime's timer heap, a context and a
// map of its children (the dial's AfterFunc) for what those deadlines
// already bound; Done and Err are the parent's, so the context still only
// reports cancellation. A worker reuses one for its probes, one at a
// time: neither net's dial nor crypto/tls's handshake keeps it beyond the
// call.
type probeCtx struct {
	context.Context
	deadline time.Time
}

// Deadline is the probe's own.
func (c *probeCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// probe runs one probe of t within the prober's timeout from now: ok on a
// 2xx (HTTP) or an accepted connection (TCP); result is what the console
// shows.
func (p *prober) probe(ctx context.Context, t target) (ok bool, result string) {
	return p.probeBy(&probeCtx{Context: ctx, deadline: time.Now().Add(p.timeout)}, t)
}

// probeBy runs one probe of t bounded by ctx's deadline.
func (p *prober) probeBy(ctx *probeCtx, t target) (ok bool, result string) {
	tcp, err := p.dial(ctx, t.addr)
	if err != nil {
		return false, t.mode.String() + " " + errorClass(err)
	}
	// Close with a reset, as HAProxy's checks do: no FIN exchange and no
	// TIME_WAIT left behind for every probe (10k instances every 10 s
	// would keep ~60k sockets in TIME_WAIT on the node).
	_ = tcp.SetLinger(0)
	defer tcp.Close()
	if t.mode == ModeTCP {
		return true, "tcp connected"
	}
	// The exchange (and an HTTPS handshake) ends at the same deadline.
	_ = tcp.SetDeadline(ctx.deadline)
	var conn io.ReadWriter = tcp
	if t.https {
		tc := tls.Client(tcp, p.tlsFor(t.host))
		if err := tc.HandshakeContext(ctx); err != nil {
			return false, "https " + errorClass(err)
		}
		conn = tc
	}
	status, err := httpGet(conn, t)
	if err != nil {
		return false, "http " + errorClass(err)
	}
	return status >= 200 && status < 300, httpResult(status)
}

// httpResults are the results of the status codes 100–599, built once:
// a probe that passes allocates no result string.
var httpResults = func() []string {
	r := make([]string, 600)
	for i := 100; i < len(r); i++ {
		r[i] = "http " + strconv.Itoa(i)
	}
	return r
}()

func httpResult(status int) string {
	if status >= 100 && status < len(httpResults) {
		return httpResults[status]
	}
	return "http " + strconv.Itoa(status)
}

// tlsFor is the TLS client config for a URL host: its name as SNI (an
// address sends none).
func (p *prober) tlsFor(host string) *tls.Config {
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return p.tls
	}
	c := p.tls.Clone()
	c.ServerName = host
	return c
}

// errBadStatus is an answer that does not start with an HTTP status line.
var errBadStatus = errors.New("healthcheck: not an HTTP answer")

// readBufs holds the probes' read buffers: one escapes to the heap per
// probe otherwise (conn.Read is an interface call), 4 KiB to clear and
// collect each time.
var readBufs = sync.Pool{New: func() any { return new([maxBodyRead]byte) }}

// httpGet sends t's request on conn and returns the answer's status code.
func httpGet(conn io.ReadWriter, t target) (int, error) {
	bp := readBufs.Get().(*[maxBodyRead]byte)
	defer readBufs.Put(bp)
	buf := bp[:]
	req := append(buf[:0], "GET "...)
	req = append(req, t.requestURI...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, t.hostHeader...)
	req = append(req, "\r\nUser-Agent: muster-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n"...)
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	// Read until the status line is whole (within maxBodyRead); the rest
	// of the answer is dropped with the connection.
	n := 0
	for n < len(buf) {
		m, err := conn.Read(buf[n:])
		n += m
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			if status := parseStatusLine(buf[:i]); status >= 0 {
				return status, nil
			}
			return 0, errBadStatus
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return 0, errBadStatus
}

// parseStatusLine reads "HTTP/1.x NNN …" and returns NNN, or -1.
func parseStatusLine(line []byte) int {
	line = bytes.TrimRight(line, "\r")
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return -1
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return -1
		}
		code = code*10 + int(c-'0')
	}
	if len(line) > 12 && line[12] != ' ' {
		return -1
	}
	return code
}

// errorClass names what went wrong without the answer's details.
func errorClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	var tlsErr tls.RecordHeaderError
	if errors.As(err, &tlsErr) {
		return "tls error"
	}
	return "error"
}

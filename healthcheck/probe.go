package healthcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// maxBodyRead is how much of an answer a probe reads before closing: the
// status decides, the body is only drained a little so small answers
// finish cleanly.
const maxBodyRead = 4 << 10

type dialTarget struct{}

// prober runs probes. Its HTTP client is its own: no proxy from the
// environment, no cookie jar, no credentials, no client certificate, no
// redirects, no keep-alive (one connection per probe, closed after it: a
// node probing 10k instances keeps no 10k idle connections), and every
// connection goes to the checked address in the request's context,
// whatever the URL's host says.
type prober struct {
	timeout time.Duration
	dialer  net.Dialer
	client  *http.Client
	dials   atomic.Uint64 // every connection attempt, for tests and metrics
}

func newProber(timeout time.Duration) *prober {
	p := &prober{timeout: timeout}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			ap, ok := ctx.Value(dialTarget{}).(netip.AddrPort)
			if !ok || !ap.IsValid() {
				return nil, errors.New("healthcheck: no checked address")
			}
			return p.dial(ctx, ap)
		},
		// Liveness, not trust: like Kubernetes' HTTPS probes, the
		// instance's certificate is not verified. Nothing secret is sent.
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 16 << 10,
		ResponseHeaderTimeout:  timeout,
		TLSHandshakeTimeout:    timeout,
	}
	p.client = &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       timeout,
	}
	return p
}

func (p *prober) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	p.dials.Add(1)
	return p.dialer.DialContext(ctx, "tcp", ap.String())
}

// probe runs one probe of t: ok on a 2xx (HTTP) or an accepted connection
// (TCP) within the timeout; result is what the console shows.
func (p *prober) probe(ctx context.Context, t target) (ok bool, result string) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if t.mode == ModeTCP {
		conn, err := p.dial(ctx, t.addr)
		if err != nil {
			return false, "tcp " + errorClass(err)
		}
		_ = conn.Close()
		return true, "tcp connected"
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, dialTarget{}, t.addr), http.MethodGet, t.url, nil)
	if err != nil {
		return false, "http bad request"
	}
	req.Header.Set("User-Agent", "muster-health-check")
	req.Header.Set("Accept", "*/*")
	resp, err := p.client.Do(req)
	if err != nil {
		return false, "http " + errorClass(err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxBodyRead)
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300, "http " + strconv.Itoa(resp.StatusCode)
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

// Package loadgen drives an HTTP/1.1 server with a fixed number of workers,
// each on its own keep-alive connection, and records every request's
// latency in a histogram. It is the load generator of tools/bench.
//
// Two clients are available. ClientRaw writes pre-encoded requests on a
// plain TCP connection and parses only the status line, Content-Length and
// chunked framing: it costs a fraction of net/http's CPU, which matters when
// the generator shares two cores with the server it measures. ClientStd
// uses net/http (one Transport with MaxIdleConnsPerHost ≥ concurrency and
// compression off, so gzip bodies are counted as they travel).
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one request. Path includes the query string. Header holds
// extra header lines, each ending in "\r\n" ("Accept: application/json\r\n");
// Host and Content-Length are added.
type Request struct {
	Method string
	Path   string
	Header string
	Body   []byte
}

// Client selects the HTTP client implementation.
type Client int

const (
	// ClientRaw is a minimal HTTP/1.1 client on raw TCP connections.
	ClientRaw Client = iota
	// ClientStd is net/http.
	ClientStd
)

// ParseClient maps "raw" and "std" to a Client.
func ParseClient(s string) (Client, error) {
	switch s {
	case "raw", "":
		return ClientRaw, nil
	case "std", "net/http":
		return ClientStd, nil
	}
	return 0, fmt.Errorf("loadgen: unknown client %q (raw or std)", s)
}

func (c Client) String() string {
	if c == ClientStd {
		return "std"
	}
	return "raw"
}

// Config describes one run.
type Config struct {
	// Addr is the server's host:port (loopback only in tools/bench).
	Addr string
	// Concurrency is the number of workers, each with its own connection.
	Concurrency int
	// Duration stops the run after this long; 0 means no time limit.
	Duration time.Duration
	// Total stops the run after this many requests in all; 0 means no
	// count limit. One of Duration and Total must be set.
	Total uint64
	// Interval paces each worker: request k of a worker starts no earlier
	// than k×Interval after the start (an open schedule: a late request
	// does not push the later ones back). 0 is a closed loop at full speed.
	Interval time.Duration
	// Next returns the request numbered seq (0, 1, 2… across all workers)
	// for worker w. It is called concurrently and should not allocate.
	Next func(w int, seq uint64) Request
	// Client picks the HTTP client.
	Client Client
	// Timeout bounds one request (default 30 s).
	Timeout time.Duration
	// TLS, when set, speaks https to Addr with this config; each worker
	// does one handshake when it connects, before the clock starts, and
	// then keeps its connection, so a run measures TLS per request.
	TLS *tls.Config
}

// Result is what a run measured.
type Result struct {
	Requests  uint64         // requests answered (any status)
	Errors    uint64         // requests that failed on the network
	Status    map[int]uint64 // answered requests by status code
	BodyBytes uint64         // response body bytes as received (compressed if the server compressed)
	Elapsed   time.Duration  // from the start of the first request to the end of the last
	Latency   *Histogram     // time to the last byte of each answered request
	FirstErr  error          // the first network error, if any
}

// RPS is answered requests per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// OK is the number of 2xx answers.
func (r Result) OK() uint64 {
	var n uint64
	for code, c := range r.Status {
		if code >= 200 && code < 300 {
			n += c
		}
	}
	return n
}

// NotOK is the number of answers that were not 2xx, plus network errors.
func (r Result) NotOK() uint64 { return r.Requests - r.OK() + r.Errors }

// doer sends one request and drains the answer.
type doer interface {
	do(ctx context.Context, req Request) (status int, bodyBytes int64, err error)
	close()
}

// Run drives the server until Duration passes, Total requests are done, or
// ctx ends. Every worker connects before the clock starts.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Concurrency <= 0 {
		return Result{}, errors.New("loadgen: Concurrency must be positive")
	}
	if cfg.Duration <= 0 && cfg.Total == 0 {
		return Result{}, errors.New("loadgen: set Duration or Total")
	}
	if cfg.Next == nil {
		return Result{}, errors.New("loadgen: Next is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	var std *http.Client
	if cfg.Client == ClientStd {
		std = &http.Client{Transport: &http.Transport{
			MaxIdleConns:        cfg.Concurrency,
			MaxIdleConnsPerHost: cfg.Concurrency,
			MaxConnsPerHost:     cfg.Concurrency,
			DisableCompression:  true,
			IdleConnTimeout:     time.Minute,
			TLSClientConfig:     cfg.TLS,
		}, Timeout: cfg.Timeout}
		defer std.CloseIdleConnections()
	}

	type workerResult struct {
		hist      *Histogram
		status    map[int]uint64
		requests  uint64
		errors    uint64
		bodyBytes uint64
		firstErr  error
		end       time.Time
	}
	results := make([]workerResult, cfg.Concurrency)
	doers := make([]doer, cfg.Concurrency)
	for w := range doers {
		if std != nil {
			scheme := "http://"
			if cfg.TLS != nil {
				scheme = "https://"
			}
			doers[w] = &stdDoer{client: std, base: scheme + cfg.Addr}
			continue
		}
		rc := &rawConn{addr: cfg.Addr, timeout: cfg.Timeout, tls: cfg.TLS}
		if err := rc.dial(); err != nil {
			for _, d := range doers[:w] {
				d.close()
			}
			return Result{}, err
		}
		doers[w] = rc
	}
	defer func() {
		for _, d := range doers {
			d.close()
		}
	}()

	var seq atomic.Uint64
	start := time.Now()
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[w]
			res.hist = NewHistogram()
			res.status = map[int]uint64{}
			d := doers[w]
			for k := 0; ; k++ {
				if ctx.Err() != nil {
					break
				}
				now := time.Now()
				if !deadline.IsZero() && !now.Before(deadline) {
					break
				}
				if cfg.Interval > 0 {
					at := start.Add(time.Duration(k) * cfg.Interval)
					if !deadline.IsZero() && !at.Before(deadline) {
						break
					}
					if wait := at.Sub(now); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-t.C:
						case <-ctx.Done():
							t.Stop()
						}
						if ctx.Err() != nil {
							break
						}
					}
				}
				n := seq.Add(1) - 1
				if cfg.Total > 0 && n >= cfg.Total {
					break
				}
				req := cfg.Next(w, n)
				t0 := time.Now()
				code, body, err := d.do(ctx, req)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					res.errors++
					if res.firstErr == nil {
						res.firstErr = err
					}
					continue
				}
				res.hist.Record(time.Since(t0))
				res.requests++
				res.bodyBytes += uint64(body)
				res.status[code]++
			}
			res.end = time.Now()
		}()
	}
	wg.Wait()

	out := Result{Status: map[int]uint64{}, Latency: NewHistogram()}
	end := start
	for _, r := range results {
		out.Requests += r.requests
		out.Errors += r.errors
		out.BodyBytes += r.bodyBytes
		out.Latency.Merge(r.hist)
		for code, c := range r.status {
			out.Status[code] += c
		}
		if out.FirstErr == nil && r.firstErr != nil {
			out.FirstErr = r.firstErr
		}
		if r.end.After(end) {
			end = r.end
		}
	}
	out.Elapsed = end.Sub(start)
	return out, nil
}

// rawConn is one keep-alive HTTP/1.1 connection. It is used by one
// goroutine at a time.
type rawConn struct {
	addr    string
	timeout time.Duration
	tls     *tls.Config // nil: plain TCP
	c       net.Conn
	br      *bufio.Reader
	wbuf    []byte
}

func (rc *rawConn) dial() error {
	c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("loadgen: dial %s: %w", rc.addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if rc.tls != nil {
		cfg := rc.tls
		if cfg.ServerName == "" {
			// As net/http does: verify the host that was dialled.
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(rc.addr)
		}
		tc := tls.Client(c, cfg)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return fmt.Errorf("loadgen: TLS handshake with %s: %w", rc.addr, err)
		}
		_ = tc.SetDeadline(time.Time{})
		c = tc
	}
	rc.c = c
	if rc.br == nil {
		rc.br = bufio.NewReaderSize(c, 64<<10)
	} else {
		rc.br.Reset(c)
	}
	return nil
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// appendRequest encodes req as HTTP/1.1.
func appendRequest(b []byte, host string, req Request) []byte {
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	b = append(b, req.Header...)
	if len(req.Body) > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(req.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, req.Body...)
}

func (rc *rawConn) do(ctx context.Context, req Request) (int, int64, error) {
	if rc.c == nil {
		if err := rc.dial(); err != nil {
			return 0, 0, err
		}
	}
	rc.wbuf = appendRequest(rc.wbuf[:0], rc.addr, req)
	_ = rc.c.SetDeadline(time.Now().Add(rc.timeout))
	if _, err := rc.c.Write(rc.wbuf); err != nil {
		rc.close()
		return 0, 0, err
	}
	code, n, keep, err := readResponse(rc.br, req.Method == http.MethodHead, nil)
	if err != nil {
		rc.close()
		return 0, 0, err
	}
	if !keep {
		rc.close()
	}
	return code, n, nil
}

// readResponse reads one response from br: it returns the status code, the
// body length as received, and whether the connection stays open. The body
// is copied to sink when sink is not nil, and discarded otherwise.
func readResponse(br *bufio.Reader, head bool, sink io.Writer) (code int, n int64, keepAlive bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("loadgen: bad status line %q", line)
	}
	code, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, 0, false, fmt.Errorf("loadgen: bad status line %q", line)
	}
	keepAlive = line[7] == '1' // HTTP/1.1 keeps the connection by default
	contentLength := int64(-1)
	chunked := false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, err
		}
		h := bytes.TrimRight(line, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if contentLength, err = strconv.ParseInt(string(value), 10, 64); err != nil {
				return 0, 0, false, fmt.Errorf("loadgen: bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keepAlive = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keepAlive = true
			}
		}
	}
	if head || code == http.StatusNoContent || code == http.StatusNotModified || code/100 == 1 {
		return code, 0, keepAlive, nil
	}
	switch {
	case chunked:
		for {
			line, err = br.ReadSlice('\n')
			if err != nil {
				return 0, 0, false, err
			}
			sizeField, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
			size, err := strconv.ParseInt(string(bytes.TrimSpace(sizeField)), 16, 64)
			if err != nil {
				return 0, 0, false, fmt.Errorf("loadgen: bad chunk size %q", line)
			}
			if size == 0 {
				// Trailers, then the blank line.
				for {
					line, err = br.ReadSlice('\n')
					if err != nil {
						return 0, 0, false, err
					}
					if len(bytes.TrimRight(line, "\r\n")) == 0 {
						return code, n, keepAlive, nil
					}
				}
			}
			if err := copyN(br, sink, size); err != nil {
				return 0, 0, false, err
			}
			n += size
			if _, err := br.Discard(2); err != nil { // CRLF after the chunk
				return 0, 0, false, err
			}
		}
	case contentLength >= 0:
		if err := copyN(br, sink, contentLength); err != nil {
			return 0, 0, false, err
		}
		return code, contentLength, keepAlive, nil
	default:
		// Body until the connection closes.
		var w io.Writer = io.Discard
		if sink != nil {
			w = sink
		}
		n, err = io.Copy(w, br)
		return code, n, false, err
	}
}

func copyN(br *bufio.Reader, sink io.Writer, n int64) error {
	if sink == nil {
		_, err := br.Discard(int(n))
		return err
	}
	_, err := io.CopyN(sink, br, n)
	return err
}

// stdDoer sends through net/http.
type stdDoer struct {
	client *http.Client
	base   string
}

func (sd *stdDoer) do(ctx context.Context, req Request) (int, int64, error) {
	var body io.Reader
	if len(req.Body) > 0 {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, sd.base+req.Path, body)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(req.Header, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			hr.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	resp, err := sd.client.Do(hr)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, 0, err
	}
	return resp.StatusCode, n, nil
}

func (sd *stdDoer) close() {}

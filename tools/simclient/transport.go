package simclient

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// op is the kind of request, which decides which answers are acceptable
// and how often a request is retried on another server.
type op int

const (
	opRegister op = iota
	opRenew
	opCancel
	opFetchFull
	opFetchDelta
)

func (o op) String() string {
	switch o {
	case opRegister:
		return "register"
	case opRenew:
		return "renew"
	case opCancel:
		return "cancel"
	case opFetchFull:
		return "fetch"
	case opFetchDelta:
		return "fetch delta"
	}
	return "op?"
}

// maxAttempts is how many servers a request tries before it gives up:
// the Java client's RetryableEurekaHttpClient makes 3 attempts
// (DEFAULT_NUMBER_OF_RETRIES); a heartbeat is retried once, on the next
// server, and otherwise waits for its next round.
func (o op) maxAttempts(servers int) int {
	n := 3
	if o == opRenew {
		n = 2
	}
	return min(n, servers)
}

// acceptable reports whether a reply with status code ends the request.
// Anything else (and a network error) moves the fleet to the next server.
// This is the Java client's legacy evaluator
// (ServerStatusEvaluators.legacyEvaluator, EUREKA.md §1.3): 2xx and 302
// are acceptable everywhere, 404 for register and heartbeat (the caller
// acts on it), any status for cancel, 403 and 404 for a delta (the caller
// then does a full fetch, which fails over on 403).
func acceptable(o op, code int) bool {
	if code >= 200 && code < 300 || code == http.StatusFound {
		return true
	}
	switch o {
	case opRegister, opRenew:
		return code == http.StatusNotFound
	case opCancel:
		return true
	case opFetchDelta:
		return code == http.StatusForbidden || code == http.StatusNotFound
	}
	return false
}

// ErrAllServersFailed is wrapped by the error of a request that no server
// answered acceptably.
var ErrAllServersFailed = errors.New("simclient: no server answered")

// newHTTPClient builds the fleet's shared client: keep-alive, a connect
// timeout, and enough idle connections per server for every worker. The
// request timeout comes from each request's context.
func newHTTPClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			MaxIdleConns:          0, // no global cap
			MaxIdleConnsPerHost:   cfg.Workers + 4,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.ConnectTimeout,
			TLSClientConfig:       cfg.TLS,
			ResponseHeaderTimeout: cfg.RequestTimeout,
			// Fetches ask for gzip themselves and inflate it below.
			DisableCompression: true,
		},
		// Eureka's replies never redirect; a 302 is acceptable as is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// reply is an acceptable answer.
type reply struct {
	code   int
	body   []byte // read for fetches only
	header http.Header
	server Server
}

// call sends a request to the current server, failing over to the next
// one on a network error or an unacceptable status, up to the op's
// attempts. path is relative to the server URL ("apps/ORDERS"). It returns
// the context's error, uncounted, once ctx ends.
func (f *Fleet) call(ctx context.Context, o op, method, path string, body []byte) (reply, error) {
	var lastErr error
	for range o.maxAttempts(len(f.servers.list)) {
		i, srv := f.servers.current()
		rep, err := f.send(ctx, o, method, srv.URL+path, body)
		if ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
		if err == nil && acceptable(o, rep.code) {
			rep.server = srv
			return rep, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s%s: status %d", method, srv.Redacted(), path, rep.code)
		}
		lastErr = err
		if f.servers.failed(i) {
			f.stats.failovers.Add(1)
			_, next := f.servers.current()
			f.log.Info().Str("from", srv.Redacted()).Str("to", next.Redacted()).Str("op", o.String()).Err(err).Msg("failing over to the next server")
		}
	}
	return reply{}, fmt.Errorf("%w: %w", ErrAllServersFailed, lastErr)
}

// send makes one HTTP request with the Java client's headers. Fetch
// replies are read whole (inflated if gzipped); other bodies are drained,
// so the connection is reused.
func (f *Fleet) send(ctx context.Context, o op, method, url string, body []byte) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return reply{}, err
	}
	h := req.Header
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "muster-simclient")
	switch o {
	case opRegister:
		h.Set("Content-Type", "application/json")
		h.Set("Accept-Encoding", "gzip")
	case opFetchFull, opFetchDelta:
		h.Set("Accept-Encoding", "gzip")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	rep := reply{code: resp.StatusCode, header: resp.Header}
	if (o == opFetchFull || o == opFetchDelta) && resp.StatusCode == http.StatusOK {
		rep.body, err = readBody(resp)
		if err != nil {
			return reply{}, fmt.Errorf("read %s: %w", url, err)
		}
		return rep, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return rep, nil
}

func readBody(resp *http.Response) ([]byte, error) {
	var r io.Reader = resp.Body
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	return io.ReadAll(r)
}

package client

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

	"github.com/muster-registry/muster/registry/wire"
)

// op is the kind of a request: it decides which answers end it and how
// many servers it tries.
type op int

const (
	opRegister op = iota
	opRenew
	opCancel
	opStatus
	opFetchFull
	opFetchDelta
	opFetchApp
)

func (o op) String() string {
	return [...]string{"register", "heartbeat", "cancel", "status", "fetch", "fetch delta", "fetch app"}[o]
}

// maxAttempts is how many servers a request tries: the Java client's
// RetryableEurekaHttpClient makes 3 attempts; a heartbeat tries one more
// server and otherwise waits for its next round.
func (o op) maxAttempts(servers int) int {
	n := 3
	if o == opRenew {
		n = 2
	}
	return min(n, servers)
}

// acceptable reports whether a reply with this status code ends the
// request; anything else, like a network error, moves the client to the
// next server. It follows the Java client's legacy evaluator
// (ServerStatusEvaluators, EUREKA.md §1.3): 2xx everywhere; 404 for
// register, heartbeat, status changes and cancel (the caller acts on it;
// Java accepts any status for a cancel, but a 5xx one is better retried on
// a peer, which holds the instance too); 403 and 404 for a delta (the caller then does a full
// fetch, which fails over on 403). Beyond Java: 404 for one app (it has no
// instances) and 400 for one app (a server that refuses the watch
// parameters; the watch falls back to polling), and 401 everywhere, since
// every server of a cluster holds the same credentials.
func acceptable(o op, code int) bool {
	if code >= 200 && code < 300 || code == http.StatusUnauthorized {
		return true
	}
	switch o {
	case opRegister, opRenew, opStatus, opCancel:
		return code == http.StatusNotFound
	case opFetchDelta:
		return code == http.StatusForbidden || code == http.StatusNotFound
	case opFetchApp:
		return code == http.StatusNotFound || code == http.StatusBadRequest
	}
	return false
}

// ErrNoServer is wrapped by the error of a request that no server answered
// acceptably (every attempt hit a network error or a failing status).
var ErrNoServer = errors.New("client: no server answered")

// StatusError is an answer the caller did not expect: the request reached
// a server, which refused it.
type StatusError struct {
	Op     string // "register", "heartbeat", "cancel", "status", "fetch", …
	Server string // the server's base URL, without credentials
	Code   int    // HTTP status code
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("client: %s at %s: HTTP %d", e.Op, e.Server, e.Code)
}

// request is one logical request, sent to one server after another until
// one answers acceptably.
type request struct {
	op     op
	method string
	// path is relative to the server's base URL ("apps/ORDERS"); pathFor,
	// when set, builds it for the server about to be asked instead.
	path    string
	pathFor func(srv int) string
	body    []byte
	// hold is how long the server may hold the request on purpose (a
	// watch), added to RequestTimeout.
	hold time.Duration
}

// reply is an acceptable answer.
type reply struct {
	code   int
	body   []byte // read for 200 answers to fetches
	header http.Header
	server int // index into servers.list
}

func newHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second,
			// Requests ask for gzip themselves and inflate it in readBody.
			DisableCompression: true,
		},
		// Eureka's replies never redirect.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// call sends req to the current server, failing over to the next one on a
// network error or an unacceptable status, up to the op's attempts. It
// returns the context's error, uncounted, once ctx ends.
func (c *Client) call(ctx context.Context, req request) (reply, error) {
	var lastErr error
	for range req.op.maxAttempts(len(c.servers.list)) {
		i, returned := c.servers.current(c.clock.Now())
		if returned {
			c.stats.zoneReturns.Add(1)
			c.log.Info().Str("server", c.servers.list[0].base).Msg("returning to the first server of the zone")
		}
		srv := c.servers.list[i]
		path := req.path
		if req.pathFor != nil {
			path = req.pathFor(i)
		}
		rep, err := c.send(ctx, req, srv, path)
		if ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
		if err == nil && acceptable(req.op, rep.code) {
			rep.server = i
			return rep, nil
		}
		if err == nil {
			err = &StatusError{Op: req.op.String(), Server: srv.base, Code: rep.code}
		}
		lastErr = err
		if c.servers.failed(i, c.clock.Now()) {
			c.stats.failovers.Add(1)
			next, _ := c.servers.current(c.clock.Now())
			c.log.Info().Str("from", srv.base).Str("to", c.servers.list[next].base).Str("op", req.op.String()).
				Err(err).Msg("failing over to the next server")
		}
	}
	return reply{}, fmt.Errorf("%w: %w", ErrNoServer, lastErr)
}

// send makes one HTTP request. Fetch answers are read whole (inflated when
// gzipped); other bodies are drained so that the connection is reused.
func (c *Client) send(ctx context.Context, req request, srv server, path string) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout+req.hold)
	defer cancel()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, srv.base+path, body)
	if err != nil {
		return reply{}, fmt.Errorf("client: %s at %s: %w", req.op, srv.base, err)
	}
	h := hr.Header
	h.Set("Accept", "application/json")
	h.Set("Accept-Encoding", "gzip")
	h.Set("User-Agent", "muster-go-client")
	if req.body != nil {
		h.Set("Content-Type", "application/json")
	}
	if srv.auth {
		hr.SetBasicAuth(srv.user, srv.password)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		// *url.Error quotes the URL, which carries no credentials here.
		return reply{}, err
	}
	defer resp.Body.Close()
	rep := reply{code: resp.StatusCode, header: resp.Header}
	fetch := req.op == opFetchFull || req.op == opFetchDelta || req.op == opFetchApp
	if fetch && resp.StatusCode == http.StatusOK {
		if rep.body, err = readBody(resp); err != nil {
			return reply{}, fmt.Errorf("client: %s at %s: read body: %w", req.op, srv.base, err)
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

// decodeApplications decodes a fetch answer: JSON, unless the server
// answered XML anyway.
func decodeApplications(rep reply) (*wire.Applications, error) {
	if strings.Contains(rep.header.Get("Content-Type"), "xml") {
		return wire.DecodeApplicationsXML(rep.body)
	}
	return wire.DecodeApplicationsJSON(rep.body)
}

package interoptest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Exchange is one request a client sent through a WireTap and the answer
// it got: what a failing scenario names, so it says which answer broke
// which client.
type Exchange struct {
	Method, Path, Query string
	Accept, ContentType string // the request's
	EurekaAccept        string // the request's X-Eureka-Accept (compact asks the compact form)
	AcceptEncoding      string // the request's Accept-Encoding (gzip asks a gzip answer)
	Status              int
	RespType, RespEnc   string      // the answer's Content-Type and Content-Encoding
	Header              http.Header // every header of the request, as the client sent it
}

func (e Exchange) String() string {
	q := ""
	if e.Query != "" {
		q = "?" + e.Query
	}
	if e.AcceptEncoding != "" {
		q += " [Accept-Encoding " + e.AcceptEncoding + "]"
	}
	if e.EurekaAccept != "" {
		q += " [X-Eureka-Accept " + e.EurekaAccept + "]"
	}
	return fmt.Sprintf("%s %s%s [accept %q, body %q] -> %d %q %s", e.Method, e.Path, q, e.Accept, e.ContentType, e.Status, e.RespType, e.RespEnc)
}

// WireTap is a reverse proxy on a loopback port in front of one server:
// clients get its URL, and it records every exchange. It can also be cut,
// answering nothing (the connection is closed), which is what a client
// cut off from its server by a partition sees.
type WireTap struct {
	Target string // the server, scheme://host:port
	ln     net.Listener
	srv    *http.Server
	cut    atomic.Bool

	mu   sync.Mutex
	seen []Exchange
}

// NewWireTap starts a tap in front of target (scheme://host:port); it
// stops with the test.
func NewWireTap(t testing.TB, target string) *WireTap {
	t.Helper()
	return newWireTap(t, target, nil, nil)
}

// NewTLSWireTap is a WireTap for an https target: it serves https itself
// with the PEM pair certFile/keyFile (the target's own, issued for
// 127.0.0.1, so a client trusting the target trusts the tap) and talks
// to the target trusting the CA in caPEM.
func NewTLSWireTap(t testing.TB, target, certFile, keyFile, caPEM string) *WireTap {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, err := os.ReadFile(caPEM)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("CA %s: %v", caPEM, err)
	}
	return newWireTap(t, target, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		&tls.Config{Certificates: []tls.Certificate{pair}})
}

func newWireTap(t testing.TB, target string, upstream http.RoundTripper, serve *tls.Config) *WireTap {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &WireTap{Target: target, ln: ln}
	proxy := httputil.NewSingleHostReverseProxy(u)
	if upstream != nil {
		proxy.Transport = upstream
	}
	proxy.ModifyResponse = func(r *http.Response) error {
		w.record(r.Request, r.StatusCode, r.Header)
		return nil
	}
	proxy.ErrorHandler = func(rw http.ResponseWriter, r *http.Request, err error) {
		w.record(r, http.StatusBadGateway, http.Header{})
		rw.WriteHeader(http.StatusBadGateway)
	}
	w.srv = &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.cut.Load() {
			if hj, ok := rw.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		// Keep what the client sent: the proxy must not add or strip
		// Accept-Encoding, or gzip handling would not be the client's.
		if _, ok := r.Header["Accept-Encoding"]; !ok {
			r.Header["Accept-Encoding"] = nil
		}
		proxy.ServeHTTP(rw, r)
	})}
	if serve != nil {
		ln = tls.NewListener(ln, serve)
	}
	go func() { _ = w.srv.Serve(ln) }()
	t.Cleanup(func() { _ = w.srv.Close() })
	return w
}

func (w *WireTap) record(r *http.Request, status int, h http.Header) {
	e := Exchange{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type"), EurekaAccept: r.Header.Get("X-Eureka-Accept"), AcceptEncoding: r.Header.Get("Accept-Encoding"),
		Status: status, RespType: h.Get("Content-Type"), RespEnc: h.Get("Content-Encoding"), Header: r.Header.Clone()}
	w.mu.Lock()
	w.seen = append(w.seen, e)
	w.mu.Unlock()
}

// URL is the tap's scheme://127.0.0.1:port, in place of the target's.
func (w *WireTap) URL() string {
	u, _ := url.Parse(w.Target)
	return u.Scheme + "://" + w.ln.Addr().String()
}

// SetCut cuts the client off from the server (true) or heals it (false).
func (w *WireTap) SetCut(cut bool) { w.cut.Store(cut) }

// Len is the number of exchanges so far: a mark for Since.
func (w *WireTap) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// Since returns the exchanges from index i on.
func (w *WireTap) Since(i int) []Exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i > len(w.seen) {
		i = len(w.seen)
	}
	return append([]Exchange(nil), w.seen[i:]...)
}

// Find returns the exchanges from index i on with this method whose path
// contains pathPart.
func (w *WireTap) Find(i int, method, pathPart string) []Exchange {
	var out []Exchange
	for _, e := range w.Since(i) {
		if e.Method == method && strings.Contains(e.Path, pathPart) {
			out = append(out, e)
		}
	}
	return out
}

// Dump is every exchange from index i on, one a line, for a failure message.
func (w *WireTap) Dump(i int) string {
	var b strings.Builder
	for _, e := range w.Since(i) {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistogram_Quantile_withinPrecision(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.Quantile(tt.q)
		if diff := float64(got-tt.want) / float64(tt.want); diff < -0.02 || diff > 0.02 {
			t.Errorf("Quantile(%v) = %v, want %v ± 2 %%", tt.q, got, tt.want)
		}
	}
	if h.Count() != 10000 || h.Max() != 10*time.Millisecond || h.Min() != time.Microsecond {
		t.Errorf("Count, Max, Min = %d, %v, %v", h.Count(), h.Max(), h.Min())
	}
}

func TestHistogram_bucketsAreContiguous(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<20; v++ {
		b := bucketOf(v)
		if b != prev && b != prev+1 {
			t.Fatalf("bucketOf(%d) = %d after %d", v, b, prev)
		}
		if lo := bucketValue(b); lo > v+(v>>subBits)+1 || lo < v-(v>>subBits)-1 {
			t.Fatalf("bucketValue(bucketOf(%d)) = %d", v, lo)
		}
		prev = b
	}
	if b := bucketOf(1<<63 - 1); b >= numBuckets {
		t.Fatalf("bucketOf(MaxInt64) = %d, want < %d", b, numBuckets)
	}
}

func TestReadResponse_framings(t *testing.T) {
	for _, tt := range []struct {
		name, raw, body string
		keep            bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n", "hello", true},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", "hi", false},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sink bytes.Buffer
			_, n, keep, err := readResponse(bufio.NewReader(strings.NewReader(tt.raw)), false, &sink)
			if err != nil || sink.String() != tt.body || n != int64(len(tt.body)) || keep != tt.keep {
				t.Fatalf("readResponse = %d bytes %q keep %v err %v, want %q keep %v", n, sink.String(), keep, err, tt.body, tt.keep)
			}
		})
	}
}

func TestRun_bothClientsCountRequestsAndBytes(t *testing.T) {
	big := strings.Repeat("x", 100_000) // chunked by net/http
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusOK)
			return
		}
		_, _ = io.WriteString(w, big)
	}))
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	for _, client := range []Client{ClientRaw, ClientStd} {
		t.Run(client.String(), func(t *testing.T) {
			res, err := Run(context.Background(), Config{
				Addr: addr, Concurrency: 4, Total: 40, Client: client,
				Next: func(w int, seq uint64) Request {
					if seq%2 == 0 {
						return Request{Method: "PUT", Path: "/put?x=1"}
					}
					return Request{Method: "GET", Path: "/get", Header: "Accept: application/json\r\n"}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 40 || res.OK() != 40 || res.Errors != 0 || res.BodyBytes != 20*uint64(len(big)) {
				t.Fatalf("requests %d, ok %d, errors %d (%v), body bytes %d; want 40, 40, 0, %d",
					res.Requests, res.OK(), res.Errors, res.FirstErr, res.BodyBytes, 20*len(big))
			}
			if res.Latency.Count() != 40 {
				t.Fatalf("latency count %d", res.Latency.Count())
			}
		})
	}
}

// TestRun_TLS: both clients speak https when Config.TLS is set, one
// handshake per worker connection.
func TestRun_TLS(t *testing.T) {
	var handshakes atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "plain", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			handshakes.Add(1)
		}
	}
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	addr := strings.TrimPrefix(ts.URL, "https://")
	for _, client := range []Client{ClientRaw, ClientStd} {
		t.Run(client.String(), func(t *testing.T) {
			handshakes.Store(0)
			res, err := Run(context.Background(), Config{
				Addr: addr, Concurrency: 2, Total: 20, Client: client,
				TLS:  &tls.Config{RootCAs: pool}, // httptest's certificate is for 127.0.0.1
				Next: func(w int, seq uint64) Request { return Request{Method: "PUT", Path: "/x"} },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() != 20 || res.Errors != 0 {
				t.Fatalf("ok %d, errors %d (%v), statuses %v", res.OK(), res.Errors, res.FirstErr, res.Status)
			}
			if n := handshakes.Load(); n > 2 {
				t.Errorf("%d connections for 2 workers", n)
			}
		})
	}
	if _, err := Run(context.Background(), Config{Addr: addr, Concurrency: 1, Total: 1, TLS: &tls.Config{},
		Next: func(int, uint64) Request { return Request{Method: "GET", Path: "/"} }}); err == nil {
		t.Error("a raw client that does not trust the server connected")
	}
}

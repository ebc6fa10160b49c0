package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// Micro-benchmarks of the HTTP hot paths through Server.ServeHTTP, without
// the network. tools/bench measures the same paths over loopback next to
// a bare echo server; these show what Muster itself adds per request.

// benchServer returns a server over a registry of n instances, 50 per app
// (APP-0, APP-1, …), ids i-0, i-1, …
func benchServer(b *testing.B, n int) (*httpapi.Server, *registry.Registry) {
	b.Helper()
	rcfg := registry.DefaultConfig()
	rcfg.Logger = zerolog.Nop()
	reg, err := registry.New(rcfg)
	if err != nil {
		b.Fatal(err)
	}
	reg.OpenForTraffic()
	for i := range n {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i),
			registrytest.WithDirty(1718000000000), registrytest.WithMetadata(map[string]string{"management.port": "8081", "version": "1.4.2", "zone": "eu-west-1a"}))
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = reg
	hcfg.Logger = zerolog.Nop()
	srv, err := httpapi.New(hcfg)
	if err != nil {
		b.Fatal(err)
	}
	return srv, reg
}

// BenchmarkServer_heartbeat is Spring's renewal, PUT
// /eureka/apps/{APP}/{id}?status=UP&lastDirtyTimestamp=…, over 10k
// instances in turn.
func BenchmarkServer_heartbeat(b *testing.B) {
	const n = 10_000
	srv, _ := benchServer(b, n)
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodPut,
			fmt.Sprintf("/eureka/apps/APP-%d/i-%d?status=UP&lastDirtyTimestamp=1718000000000", i/50, i), nil)
		reqs[i].Header.Set("Accept", "application/json")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, reqs[i%n])
		if w.Code != http.StatusOK {
			b.Fatalf("heartbeat: %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkServer_fullFetchCached is GET /eureka/apps (JSON, gzip) while
// the registry does not change: the payload comes from the cache.
func BenchmarkServer_fullFetchCached(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			srv, _ := benchServer(b, n)
			req := httptest.NewRequest(http.MethodGet, "/eureka/apps", nil)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Accept-Encoding", "gzip")
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req) // builds the cached payload
			size := w.Body.Len()
			b.ReportAllocs()
			for b.Loop() {
				w := &discardWriter{h: http.Header{}}
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("fetch: %d", w.Code)
				}
			}
			b.ReportMetric(float64(size)/float64(n), "gzipB/instance")
		})
	}
}

// BenchmarkServer_fullFetchAfterChange is the first GET /eureka/apps
// (JSON, gzip) after one status change: snapshot, JSON encoding and gzip.
func BenchmarkServer_fullFetchAfterChange(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			srv, reg := benchServer(b, n)
			req := httptest.NewRequest(http.MethodGet, "/eureka/apps", nil)
			req.Header.Set("Accept", "application/json")
			req.Header.Set("Accept-Encoding", "gzip")
			statuses := []registry.Status{registry.StatusDown, registry.StatusUp}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := reg.Apply(registry.StatusOp("APP-0", "i-0", statuses[i%2])); err != nil {
					b.Fatal(err)
				}
				w := &discardWriter{h: http.Header{}}
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("fetch: %d", w.Code)
				}
			}
		})
	}
}

// BenchmarkServer_register is POST /eureka/apps/{APP} with Spring's JSON
// body, into a registry that grows.
func BenchmarkServer_register(b *testing.B) {
	srv, _ := benchServer(b, 0)
	const n = 100_000
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = strings.NewReplacer("host-a:orders:8080", fmt.Sprintf("host-%d:orders:8080", i)).Replace(springBody)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/eureka/apps/ORDERS", strings.NewReader(bodies[i%n]))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatalf("register: %d %s", w.Code, w.Body)
		}
	}
}

// discardWriter keeps the status code and drops the body, so a benchmark
// of a large payload measures the server, not a recorder's buffer.
type discardWriter struct {
	h    http.Header
	Code int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

func (w *discardWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(b), nil
}

// BenchmarkServer_deltaAfterChange is the first GET /eureka/apps/delta
// (JSON, gzip) after one status change, with all 10k instances in the
// delta: the new snapshot, the changed group's piece and its chunk.
func BenchmarkServer_deltaAfterChange(b *testing.B) {
	srv, reg := benchServer(b, 10_000)
	req := httptest.NewRequest(http.MethodGet, "/eureka/apps/delta", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	statuses := []registry.Status{registry.StatusDown, registry.StatusUp}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := reg.Apply(registry.StatusOp(fmt.Sprintf("APP-%d", i%200), fmt.Sprintf("i-%d", (i%200)*50), statuses[(i/200)%2])); err != nil {
			b.Fatal(err)
		}
		w := &discardWriter{h: http.Header{}}
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("delta: %d", w.Code)
		}
	}
}

package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// TestJavaBytes compares the gzip bytes of Muster's full and delta fetches,
// in the full and the compact form, with the real Java Eureka server's for
// the same Spring-shaped fleet
// (docs/performance.md says how to start the Java server for it). Bytes are
// deterministic, so the machine's load does not matter. It needs a running
// Java server: MUSTER_JAVA_URL is its base URL (…/eureka/), MUSTER_JAVA_N
// the fleet size (default 10000). The fleet is registered in the Java
// server unless it holds it already (an empty server, or one this test
// filled); the delta is 1 % of the fleet given
// an OUT_OF_SERVICE override, once the Java server's delta queue is empty
// (start it with a short retention), then the overrides are removed.
func TestJavaBytes(t *testing.T) {
	base := os.Getenv("MUSTER_JAVA_URL")
	if base == "" {
		t.Skip("MUSTER_JAVA_URL is not set: no Java Eureka server to compare bytes with (docs/performance.md)")
	}
	n := 10_000
	if s := os.Getenv("MUSTER_JAVA_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			t.Fatalf("MUSTER_JAVA_N=%q: want a fleet size of at least 100", s)
		}
	}
	java := &javaBytesTarget{t: t, do: func(req *http.Request) *http.Response {
		u := base + req.URL.Path[len("/eureka/"):] + "?" + req.URL.RawQuery
		out, _ := http.NewRequest(req.Method, u, req.Body)
		out.Header = req.Header
		resp, err := http.DefaultTransport.RoundTrip(out) // gzip left as sent
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}}
	switch have := java.fullCount(); {
	case have == 0:
		java.register(n)
	case have != n:
		t.Fatalf("the Java server holds %d instances, not %d: start a fresh one (docs/performance.md)", have, n)
	}
	var offset atomic.Int64
	rcfg := registry.DefaultConfig()
	rcfg.Logger = zerolog.Nop()
	rcfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	rcfg.DeltaRetention = time.Second // as the Java server is started: see the skip message
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = reg
	hcfg.Logger = zerolog.Nop()
	srv, err := httpapi.New(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	muster := &javaBytesTarget{t: t, do: func(req *http.Request) *http.Response {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w.Result()
	}}
	muster.register(n)
	offset.Store(int64(2 * time.Second)) // the registrations leave the delta, the leases stay
	reg.PruneDeltas()

	deadline := time.Now().Add(5 * time.Minute)
	for java.deltaCount() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Java server's delta did not empty in 5 minutes: start it as docs/performance.md says (a short delta retention and cache expiry)")
		}
		time.Sleep(2 * time.Second)
	}

	type row struct {
		figure                 string
		muster, javaB          int
		musterPlain, javaPlain int
	}
	var rows []row
	measure := func(figure, path string) {
		for _, compact := range []bool{false, true} {
			for _, f := range []struct{ name, accept string }{{"JSON", "application/json"}, {"XML", "application/xml"}} {
				name := figure + " gzip " + f.name
				if compact {
					name += ", compact"
				}
				m, j := muster.gzipBody(path, f.accept, compact), java.gzipBody(path, f.accept, compact)
				rows = append(rows, row{name, len(m), len(j), len(gunzipBench(t, m)), len(gunzipBench(t, j))})
			}
		}
	}
	measure(fmt.Sprintf("full fetch, %d instances,", n), "/eureka/apps")
	churn := n / 100
	for _, tg := range []*javaBytesTarget{muster, java} {
		tg.overrides(churn, http.MethodPut)
	}
	if got := java.deltaCount(); got != churn {
		t.Fatalf("the Java server's delta holds %d instances after %d overrides: start it with --eureka.shouldUseReadOnlyResponseCache=false", got, churn)
	}
	measure(fmt.Sprintf("delta, %d changed,", churn), "/eureka/apps/delta")
	for _, tg := range []*javaBytesTarget{muster, java} {
		tg.overrides(churn, http.MethodDelete)
	}

	var table bytes.Buffer
	fmt.Fprintf(&table, "| figure | Muster | Java Eureka | ratio | plain text, Muster / Java |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&table, "| %s | %s | %s | %.2f× | %s / %s |\n", r.figure, kb(r.muster), kb(r.javaB), float64(r.muster)/float64(r.javaB),
			kb(r.musterPlain), kb(r.javaPlain))
	}
	t.Logf("gzip bytes, Muster against the Java server at %s:\n%s", base, table.String())
	for _, r := range rows {
		if r.muster > r.javaB {
			t.Errorf("%s: Muster sends %d bytes, the Java server %d", r.figure, r.muster, r.javaB)
		}
	}
}

func kb(b int) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	}
	return fmt.Sprintf("%.1f KB", float64(b)/1e3)
}

// javaBytesTarget is a Eureka server reached through do (a Java server
// over HTTP, or a Muster server's handler), with Spring's URL layout.
type javaBytesTarget struct {
	t  *testing.T
	do func(*http.Request) *http.Response
}

func (tg *javaBytesTarget) call(method, path, accept string, body []byte, extra ...string) (int, http.Header, []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Accept", accept)
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	req.Header.Set("Accept-Encoding", "gzip")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp := tg.do(req)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tg.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (tg *javaBytesTarget) register(n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if code, _, b := tg.call(http.MethodPost, "/eureka/apps/"+benchAppName(i), "application/json", benchRegisterBody(i)); code != http.StatusNoContent {
					tg.t.Errorf("register %d: %d %s", i, code, b)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// overrides puts (PUT) or removes (DELETE) an OUT_OF_SERVICE override on
// count instances spread over the fleet.
func (tg *javaBytesTarget) overrides(count int, method string) {
	for k := range count {
		i := k * 100
		path := benchStatusPath(i, "OUT_OF_SERVICE")
		if method == http.MethodDelete {
			path = benchStatusPath(i, "UP")
		}
		if code, _, b := tg.call(method, path, "application/json", nil); code != http.StatusOK {
			tg.t.Fatalf("%s %s: %d %s", method, path, code, b)
		}
	}
}

// gzipBody fetches path gzip-encoded, in the compact form (X-Eureka-Accept:
// compact) when compact.
func (tg *javaBytesTarget) gzipBody(path, accept string, compact bool) []byte {
	var extra []string
	if compact {
		extra = []string{"X-Eureka-Accept", "compact"}
	}
	code, h, b := tg.call(http.MethodGet, path, accept, nil, extra...)
	if code != http.StatusOK || h.Get("Content-Encoding") != "gzip" {
		tg.t.Fatalf("GET %s (%s): %d, Content-Encoding %q", path, accept, code, h.Get("Content-Encoding"))
	}
	return b
}

var javaBytesInstances = regexp.MustCompile(`"instanceId"`)

// fullCount and deltaCount count the instances of a document (plain JSON
// after gunzip).
func (tg *javaBytesTarget) fullCount() int  { return tg.count("/eureka/apps") }
func (tg *javaBytesTarget) deltaCount() int { return tg.count("/eureka/apps/delta") }

func (tg *javaBytesTarget) count(path string) int {
	_, _, b := tg.call(http.MethodGet, path, "application/json", nil)
	return len(javaBytesInstances.FindAllIndex(gunzipBench(tg.t, b), -1))
}

func gunzipBench(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

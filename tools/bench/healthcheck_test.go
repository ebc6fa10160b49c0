package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The healthcheck scenario's control: /dialcycles runs the cycles it is
// asked for against real loopback backends and counts what they answer.
func TestBenchDialCycles_runsAndChecksEveryCycle(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	port := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Port() }

	call := func(query string) (int, benchDialResult) {
		rec := httptest.NewRecorder()
		benchDialCycles(rec, httptest.NewRequest(http.MethodPost, "/dialcycles?"+query, nil))
		var res benchDialResult
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, res
	}
	if code, res := call("mode=http&n=40&conc=4&path=/actuator/health&ports=" + port(up)); code != http.StatusOK || res.OK != 40 || res.Failed != 0 || hits.Load() != 40 {
		t.Fatalf("http to a 200 backend: %d %+v, %d requests; want 40 ok", code, res, hits.Load())
	}
	if code, res := call("mode=http&n=10&conc=2&path=/x&ports=" + port(down)); code != http.StatusOK || res.OK != 0 || res.Failed != 10 || !strings.Contains(res.FirstErr, "503") {
		t.Fatalf("http to a 503 backend: %d %+v; want 10 failed", code, res)
	}
	if code, res := call("mode=tcp&n=20&conc=4&path=/&ports=" + port(down)); code != http.StatusOK || res.OK != 20 {
		t.Fatalf("tcp: %d %+v; want 20 ok", code, res)
	}
	// The very request a probe writes.
	var gotUA, gotAccept, gotConn string
	ua := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAccept, gotConn = r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("Connection")
	}))
	defer ua.Close()
	if code, res := call("mode=http&n=1&conc=1&path=/x&ports=" + port(ua)); code != http.StatusOK || res.OK != 1 ||
		gotUA != "muster-health-check" || gotAccept != "*/*" || gotConn != "close" {
		t.Fatalf("request: %d %+v, User-Agent %q, Accept %q, Connection %q; want a probe's", code, res, gotUA, gotAccept, gotConn)
	}
	// Each cycle is bounded by the timeout, as a probe is: a backend that
	// accepts and never answers fails every cycle after timeoutMs.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	if code, res := call(fmt.Sprintf("mode=http&n=4&conc=4&path=/&timeoutMs=100&ports=%d", mute.Addr().(*net.TCPAddr).Port)); code != http.StatusOK || res.Failed != 4 ||
		!strings.Contains(res.FirstErr, "timeout") || time.Since(start) > 5*time.Second {
		t.Fatalf("a mute backend: %d %+v after %s; want 4 timeouts after 100ms", code, res, time.Since(start))
	}
	for _, q := range []string{"mode=udp&n=1&conc=1&path=/&ports=1", "mode=http&n=0&conc=1&path=/&ports=1", "mode=http&n=1&conc=1&path=/&ports=x", "mode=tcp&n=1&conc=1&path=/&ports=1&timeoutMs=0"} {
		if code, _ := call(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
}

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
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
	for _, q := range []string{"mode=udp&n=1&conc=1&path=/&ports=1", "mode=http&n=0&conc=1&path=/&ports=1", "mode=http&n=1&conc=1&path=/&ports=x"} {
		if code, _ := call(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
}

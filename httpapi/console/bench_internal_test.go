package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// BenchmarkConsole_100k is the console's pages over 100,000 instances
// (2,000 apps of 50), gzipped, with an hour of samples behind the chart:
// the console's time per page (ns/op, its handlers as the server mounts
// them, without the server's middleware) and the page weight on the wire
// (gzip-bytes/op). Targets: ≤ 50 ms and ≤ 200 KB. The "after change" case
// toggles one instance's status before each view, so it pays for the new
// snapshot and the console's index as the first viewer after a change
// does; a search's result is cached per version, so the last case asks a
// new one every time. tools/bench reports the same figures over loopback.
func BenchmarkConsole_100k(b *testing.B) {
	srv, reg := consoleBenchServer(b, 100_000)
	for _, c := range []struct {
		name, path string
		change     bool
	}{
		{"overview", "/", false},
		{"overview_after_change", "/", true},
		{"app_page", "/console/apps/APP-1234", false},
		{"search_host_all_apps", "/console/instances?host=host-i-4242", false},
		{"filter_status_zone_meta", "/console/instances?status=UP&zone=eu-west-1a&meta=version%3D1.4.2&page=40", false},
		{"search_uncached_every_filter_new", "/console/instances?status=UP&zone=eu-west-1b&meta=version%%3D1.4.2&host=i-%d", false},
		{"summary_unchanged", "/console/api/summary?index=", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := c.path
			if c.name == "summary_unchanged" {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?partial=1", nil))
				path += w.Header().Get("X-Console-Index")
			}
			var bytes int
			var worst time.Duration
			for i := 0; b.Loop(); i++ {
				if c.change {
					st := registry.StatusDown
					if i%2 == 1 {
						st = registry.StatusUp
					}
					if _, err := reg.Apply(registry.StatusOp("APP-0", "i-0", st)); err != nil {
						b.Fatal(err)
					}
				}
				p := path
				if strings.Contains(p, "%d") {
					p = fmt.Sprintf(p, i) // a new search each time: no cached result
				}
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.Header.Set("Accept-Encoding", "gzip")
				req.RemoteAddr = "127.0.0.1:5000"
				w := httptest.NewRecorder()
				t0 := time.Now()
				srv.ServeHTTP(w, req)
				worst = max(worst, time.Since(t0))
				if w.Code != http.StatusOK && w.Code != http.StatusNotModified {
					b.Fatalf("%s: %d %s", path, w.Code, w.Body)
				}
				bytes = w.Body.Len()
			}
			b.ReportMetric(float64(bytes), "gzip-bytes/op")
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
		})
	}
}

// consoleBenchServer is the console over n instances on a manual clock,
// over three zones, moved past the delta retention so the registry is in its steady state
// (a fresh registration of 100k would leave 100k changes in the delta,
// which every snapshot then reduces), with an hour of samples.
func consoleBenchServer(b *testing.B, n int) (http.Handler, *registry.Registry) {
	b.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Logger = zerolog.Nop()
	rcfg.Now = clk.Now
	reg, err := registry.New(rcfg)
	if err != nil {
		b.Fatal(err)
	}
	reg.OpenForTraffic()
	zones := []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}
	for i := range n {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i),
			registrytest.WithDirty(1718000000000), registrytest.WithMetadata(map[string]string{"management.port": "8081", "version": "1.4.2", "zone": zones[i%3]}))
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	c, h := mount(Config{Registry: reg, Logger: zerolog.Nop(), Now: clk.Now, Security: ops.Security{ClientAuth: "none"}})
	clk.Advance(4 * time.Minute)
	reg.PruneDeltas()
	for range 360 {
		clk.Advance(10 * time.Second)
		c.Sample()
	}
	return h, reg
}

package main

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- Dashboard at 100k instances ----
//
// The console's pages on the shared 100k node: the page weight on the wire
// (gzip, as browsers ask) and the time to answer, which over loopback is
// the server's time plus a few hundred microseconds. Targets: ≤ 200 KB and
// ≤ 50 ms. Each page is timed unchanged and as the first view after a
// status change (the console then shows the previous version while the new
// one is built, when the registry has 10k instances or more).

const (
	dashboardMaxBytes = 200 << 10
	dashboardMaxTime  = 50 * time.Millisecond
)

var benchDashboardHeaders = "Accept: text/html\r\nAccept-Encoding: gzip\r\nUser-Agent: muster-bench\r\n"

// dashboardBench is the dashboard scenario (bench --only dashboard): its methods share
// the run's environment, benchEnv, and its helpers.
type dashboardBench struct{ *benchEnv }

func (e dashboardBench) run() error {
	mu, _, err := e.bigNode()
	if err != nil {
		return err
	}
	// A search's result is cached per registry version: the searches ask
	// something new on every view (k), so each one scans all 100k.
	pages := []struct {
		name string
		path func(k int) string
	}{
		{"overview /", func(int) string { return "/" }},
		{"app page", func(int) string { return "/console/apps/" + benchAppName(42*benchPerApp) }},
		{"search host across apps", func(k int) string { return "/console/instances?host=" + benchIP(4242+k) }},
		{"filter status+meta+host, page 40", func(k int) string {
			return fmt.Sprintf("/console/instances?status=UP&meta=management.port&host=%d&page=40", k%10)
		}},
	}
	reps := 9
	if e.quick {
		reps = 5
	}
	sc := "dashboard " + benchSize(e.bigN)
	for _, p := range pages {
		code, body, err := mu.api(http.MethodGet, p.path(100), nil, "Accept", "text/html", "Accept-Encoding", "gzip")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %v", p.path(100), code, err)
		}
		if _, err := benchGunzip(body); err != nil {
			return fmt.Errorf("GET %s is not gzip: %w", p.path(100), err)
		}
		e.add(benchRow{Scenario: sc, Figure: p.name + ": page weight (gzip)", Value: float64(len(body)) / 1024, Unit: "KB",
			Target: "≤ 200 KB", Met: benchBool(len(body) <= dashboardMaxBytes)})

		req := func(k int) loadgen.Request {
			return loadgen.Request{Method: http.MethodGet, Path: p.path(k), Header: benchDashboardHeaders}
		}
		var unchanged, changed []time.Duration
		for k := 0; k < reps; k++ {
			d, err := e.timeOne(mu, req(2*k))
			if err != nil {
				return err
			}
			unchanged = append(unchanged, d)
			if err := benchToggle(mu, 1000+k); err != nil {
				return err
			}
			if d, err = e.timeOne(mu, req(2*k+1)); err != nil {
				return err
			}
			changed = append(changed, d)
		}
		// Leave the toggled instance UP.
		if reps%2 == 1 {
			if err := benchToggle(mu, 1000+reps); err != nil {
				return err
			}
		}
		slices.Sort(unchanged)
		slices.Sort(changed)
		med, worst := unchanged[len(unchanged)/2], max(unchanged[len(unchanged)-1], changed[len(changed)-1])
		e.add(benchRow{Scenario: sc, Figure: p.name + ": time, median", Value: ms(med), Unit: "ms",
			Target: "≤ 50 ms", Met: benchBool(med <= dashboardMaxTime),
			Note: fmt.Sprintf("first view after a change: median %.1f ms", ms(changed[len(changed)/2]))})
		e.add(benchRow{Scenario: sc, Figure: p.name + ": time, max", Value: ms(worst), Unit: "ms",
			Target: "≤ 50 ms", Met: benchBool(worst <= dashboardMaxTime), Note: fmt.Sprintf("of %d views, half after a change", 2*reps)})
	}
	return nil
}

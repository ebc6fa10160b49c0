package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These test the bench command's plumbing; no benchmark runs here.

func TestBenchFleet_decodesAsSpringInstances(t *testing.T) {
	for _, i := range []int{0, 1, 2, 49, 50, 9_999, 99_999} {
		in := benchInstance(i)
		if err := in.Validate(); err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if in.ID() != benchInstanceID(i) || in.App != benchAppName(i) || in.LastDirtyTimestamp != benchDirty(i) {
			t.Errorf("instance %d: id %q app %q dirty %d, want %q %q %d", i, in.ID(), in.App, in.LastDirtyTimestamp,
				benchInstanceID(i), benchAppName(i), benchDirty(i))
		}
		if n := len(in.Metadata); n < 3 || n > 5 {
			t.Errorf("instance %d has %d metadata entries, want 3 to 5", i, n)
		}
		if in.RenewalIntervalSecs != 30 || in.LeaseDurationSecs != 90 {
			t.Errorf("instance %d: lease %d/%d s, want 30/90", i, in.RenewalIntervalSecs, in.LeaseDurationSecs)
		}
	}
}

func TestBenchAddr_uniqueAcrossTheFleet(t *testing.T) {
	seen := make(map[[3]int]int, 200_000)
	for i := range 200_000 {
		a, b, c := benchAddr(i)
		k := [3]int{a, b, c}
		if j, dup := seen[k]; dup {
			t.Fatalf("instances %d and %d share 10.%d.%d.%d", j, i, a, b, c)
		}
		seen[k] = i
	}
}

func TestBenchCmd_rejectsUnknownScenario(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--only", "heartbeat,nope"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `unknown scenario "nope"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestBenchPrintTable_showsCeilingRatioAndTarget(t *testing.T) {
	ceiling, ratio, met := 1000.0, 0.5, false
	rep := benchReport{Results: []benchRow{
		{Scenario: "heartbeat", Figure: "renewals/s", Value: 500, Unit: "req/s", Ceiling: &ceiling, Ratio: &ratio, Target: "≥ 0.7× ceiling", Met: &met},
		{Scenario: "micro", Figure: "Registry.Renew", Value: 123.456, Unit: "ns/op"},
	}}
	var out bytes.Buffer
	benchPrintTable(&out, rep)
	for _, want := range []string{"scenario", "renewals/s", "500 req/s", "1000", "0.50", "≥ 0.7× ceiling", "NO", "123 ns/op"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchPeerProxy_countsRoundsBytesAndCuts(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"root":7}`)
	}))
	defer upstream.Close()
	p, err := newBenchPeerProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	p.point(strings.TrimPrefix(upstream.URL, "http://"))
	post := func(path, body string) error {
		resp, err := http.Post("http://"+p.addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != `{"root":7}` {
			t.Errorf("%s answered %q through the proxy", path, b)
		}
		return nil
	}
	for _, c := range []struct{ path, body string }{
		{"/eureka/peerreplication/digest", `{"root":1}`},
		{"/eureka/peerreplication/digest", `{"root":1,"apps":["A"]}`},
		{"/eureka/peerreplication/copies", `{"keys":[]}`},
		{"/eureka/peerreplication/digest", `{"root":2}`},
	} {
		if err := post(c.path, c.body); err != nil {
			t.Fatal(err)
		}
	}
	if r, a := p.rounds.Load(), p.asks.Load(); r != 2 || a != 2 {
		t.Errorf("rounds %d, narrowing requests %d; want 2 and 2", r, a)
	}
	if p.bytes.Load() < 4*int64(len(`{"root":7}`)) {
		t.Errorf("%d bytes counted on the wire for four exchanges", p.bytes.Load())
	}
	p.cut.Store(true)
	if err := post("/eureka/peerreplication/digest", `{"root":3}`); err == nil {
		t.Error("a request went through a cut link")
	}
}

// The java scenario reads a JVM's CPU and memory from /proc; here it reads
// this process's.
func TestProcCPUAndRSS_readAProcess(t *testing.T) {
	pid := os.Getpid()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: not Linux")
	}
	deadline := time.Now().Add(5 * time.Second)
	for procCPU(pid) == 0 && time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			_ = strconv.Itoa(i)
		}
	}
	if procCPU(pid) <= 0 {
		t.Fatal("procCPU of this process is 0 after 5 s of work")
	}
	if rss := procRSS(pid); rss < 1<<20 || rss > 1<<40 {
		t.Fatalf("procRSS of this process = %d bytes", rss)
	}
}

// Without java the java scenario is a skipped row that says why, not a
// failure.
func TestBenchJava_skipsWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var log bytes.Buffer
	e := javaBench{&benchEnv{log: &log}}
	if err := e.run(); err != nil {
		t.Fatal(err)
	}
	if len(e.rows) != 1 || e.rows[0].Figure != "skipped" || !strings.Contains(e.rows[0].Note, "no java on PATH") {
		t.Fatalf("rows %+v", e.rows)
	}
}

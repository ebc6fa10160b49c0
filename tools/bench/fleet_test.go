package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

func TestBenchFleetCount_leavesOutTheNodesOwnApp(t *testing.T) {
	sizes := map[string]int{"SERVICE-0000": 50, "SERVICE-0001": 50, "MUSTER": 3, "HOT": 1}
	if got := benchFleetCount(sizes, "MUSTER"); got != 101 {
		t.Errorf("fleet = %d, want 101 (every app but the nodes' own)", got)
	}
	if got := benchFleetCount(sizes, "muster"); got != 101 {
		t.Errorf("fleet with the app name in lower case = %d, want 101", got)
	}
	if got := benchFleetCount(map[string]int{"MUSTER": 1}, "MUSTER"); got != 0 {
		t.Errorf("fleet of a node holding only itself = %d, want 0", got)
	}
}

// A bench node registers itself, as a user's node does; its /status
// counts the fleet apart from that.
func TestBenchNodeStatus_fleetIsNotTheNodesOwnInstance(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, own, err := benchStartNode(ctx, "fleet-test", false, false, "", nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = n.Shutdown(sctx)
	}()
	if own != "MUSTER" {
		t.Errorf("own app %q, want MUSTER", own)
	}
	ctl := http.NewServeMux()
	benchNodeControl(ctl, n, own)
	srv := httptest.NewServer(ctl)
	defer srv.Close()
	for i := range 3 {
		resp, err := http.Post("http://"+n.Addr()+"/eureka/apps/"+benchAppName(i), "application/json", bytes.NewReader(benchRegisterBody(i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("register %d: %d", i, resp.StatusCode)
		}
	}
	// The self-registration runs in the background once the node opened.
	testwait.For(t, 10*time.Second, "a fleet of 3, the node's own instance, 4 in all", func() error {
		resp, err := http.Get(srv.URL + "/status")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var st benchNodeStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err
		}
		if st.Fleet != 3 || st.Own != 1 || st.Instances != 4 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

func TestBenchSameFleet_comparesOnlyTheSameFleet(t *testing.T) {
	if ok, why := benchSameFleet([2]int{10_000, 10_000}, 10_000); !ok || why != "" {
		t.Errorf("same fleet: %v %q", ok, why)
	}
	for _, held := range [][2]int{{10_000, 6_857}, {10_001, 10_000}, {9_999, 9_999}} {
		ok, why := benchSameFleet(held, 10_000)
		if ok || !strings.HasPrefix(why, "not measured: ") {
			t.Errorf("held %v of 10000: %v %q", held, ok, why)
		}
	}
}

// A side-by-side row of two different fleets has no value, ceiling or
// ratio, and the table says "not measured" and why.
func TestBenchAddSideBySide_notMeasuredUnlessTheSameFleet(t *testing.T) {
	e := javaBench{&benchEnv{log: io.Discard}}
	e.addSideBySide("java", "bytes per full fetch (gzip JSON)", 538_563, 430_000, "B", "", [2]int{10_000, 6_857}, 10_000)
	e.addSideBySide("java", "bytes per full fetch (gzip XML)", 600_000, 650_000, "B", "n", [2]int{10_000, 10_000}, 10_000)
	if len(e.rows) != 2 {
		t.Fatalf("rows %+v", e.rows)
	}
	if r := e.rows[0]; !r.NotMeasured || r.Ceiling != nil || r.Ratio != nil || r.Value != 0 || !strings.Contains(r.Note, "6857") {
		t.Errorf("different fleets: %+v", r)
	}
	if r := e.rows[1]; r.NotMeasured || r.Ceiling == nil || *r.Ceiling != 650_000 || r.Value != 600_000 {
		t.Errorf("same fleet: %+v", r)
	}
	var out bytes.Buffer
	benchPrintTable(&out, benchReport{Results: e.rows})
	if !strings.Contains(out.String(), "not measured") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestBenchFailedRows_failASmokeRun(t *testing.T) {
	if err := benchFailedRows([]benchRow{{Figure: "renewals/s"}, {Figure: "status changes applied"}}); err != nil {
		t.Errorf("no failed rows: %v", err)
	}
	for _, figure := range []string{"failed requests", "failed heartbeats during the flood", "A queries (500 instances, 32 UDP clients): failed queries", "http: failed probes"} {
		if err := benchFailedRows([]benchRow{{Figure: "renewals/s"}, {Figure: figure, Value: 3}}); err == nil || !strings.Contains(err.Error(), figure) {
			t.Errorf("%q: %v", figure, err)
		}
	}
}

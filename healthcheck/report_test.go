package healthcheck_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestChecker_report: what /admin/status and the console show of the
// health checks is the checker's own Report: on every node, the mark (any
// node's, as replicated) with its reason, who marked it and who probes it
// now; on the prober, the probe state; the settings and the last round.
// (The node's /admin/status serves it as it is: node's
// TestNode_healthChecks.)
func TestChecker_report(t *testing.T) {
	h := newHCCluster(t, 3, nil)
	h.backends["i-1"].healthy.Store(false)
	for range 3 {
		h.round()
	}
	owner := h.owner("i-1")
	for _, name := range h.members {
		r := h.checkers[name].Report()
		if !r.Enabled || !strings.Contains(r.Ownership, "rendezvous") || r.IntervalMillis != 10000 || r.FailuresBeforeDown != 3 {
			t.Errorf("%s: settings %+v", name, r)
		}
		if r.LastRound == nil || r.LastRound.At.Location().String() != "UTC" {
			t.Errorf("%s: last round %+v, want one, in UTC", name, r.LastRound)
		}
		if len(r.Marked) != 1 || r.Marked[0].ID != "i-1" || r.Marked[0].App != "SVC" || r.Marked[0].Status != "DOWN" ||
			r.Marked[0].Reason != "http 503" || r.Marked[0].MarkedBy != owner || r.Marked[0].ProbedBy != owner {
			t.Errorf("%s: marked %+v, want i-1 DOWN by and probed by %s", name, r.Marked, owner)
		}
		if name != owner {
			if len(r.Probes) != 0 {
				t.Errorf("%s probes nothing failing, reports %+v", name, r.Probes)
			}
			continue
		}
		if len(r.Probes) != 1 || r.Probes[0].ID != "i-1" || r.Probes[0].State != "down" || r.Probes[0].LastProbe == nil {
			t.Errorf("prober %s: probes %+v, want i-1 down", name, r.Probes)
		}
		if r.LastRound.Marked != 1 {
			t.Errorf("prober %s: last round %+v, want one mark", name, r.LastRound)
		}
	}
	// Empty lists are [] in the JSON, as before the report moved here.
	b, err := json.Marshal(h.checkers[h.owner("i-0")].Report())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"guardedApps":[]`) {
		t.Errorf("report JSON %s: want guardedApps []", b)
	}
}

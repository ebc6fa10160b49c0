package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
)

// TestMetrics_clusterPeersByState: every state is exported, zeros included,
// so an alert sees 0 alive peers rather than no series.
func TestMetrics_clusterPeersByState(t *testing.T) {
	peers := []httpapi.PeerInfo{
		{Name: "b", State: "alive"}, {Name: "c", State: "alive"}, {Name: "d", State: "suspect"},
		{Name: "http://java-eureka:8761/eureka/", State: "static"},
	}
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Peers = func() []httpapi.PeerInfo { return peers }
	})
	check := func(want map[string]string) {
		t.Helper()
		body := n.do(t, "GET", "/metrics", "").Body
		for state, value := range want {
			line := `muster_cluster_peers{state="` + state + `"} ` + value
			if !strings.Contains(body, line+"\n") {
				t.Errorf("/metrics lacks %q", line)
			}
		}
	}
	check(map[string]string{"alive": "2", "suspect": "1", "dead": "0", "left": "0", "static": "1"})
	peers = nil
	check(map[string]string{"alive": "0", "suspect": "0", "dead": "0", "left": "0", "static": "0"})
}

type fixedAntiEntropy struct {
	stats []replication.AntiEntropyStats
}

func (f fixedAntiEntropy) Stats() []replication.AntiEntropyStats { return f.stats }
func (f fixedAntiEntropy) Totals() replication.Repairs {
	return replication.Repairs{Missing: 3, Stale: 2, Cancelled: 1}
}

// Anti-entropy shows: per peer on /admin/status (antiEntropy's state,
// inSync but for a Eureka peer, lastAntiEntropy only once a round ran, the
// last failed round's error and time, repairs) and on the dashboard's
// replica table, and in /metrics as repairs by kind and, per peer that
// serves anti-entropy, divergent instances, rounds by result, in sync and
// the last good round's time.
func TestAntiEntropy_shown(t *testing.T) {
	last := time.Date(2024, 6, 10, 6, 0, 0, 0, time.UTC)
	failedAt := last.Add(time.Minute)
	yes, no := true, false
	peers := []httpapi.PeerInfo{
		{Name: "b", State: "alive", AntiEntropy: replication.AEInSync, InSync: &yes, LastAntiEntropy: &last, Repairs: 4},
		{Name: "c", State: "alive", AntiEntropy: replication.AEDivergent, InSync: &no},
		{Name: "d", State: "static", AntiEntropy: replication.AEUnsupported},
		{Name: "e", State: "suspect", AntiEntropy: replication.AEFailing, InSync: &no,
			AntiEntropyError: "digest from e: 403 Forbidden", AntiEntropyErrorAt: &failedAt},
	}
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Peers = func() []httpapi.PeerInfo { return peers }
		h.AntiEntropy = fixedAntiEntropy{[]replication.AntiEntropyStats{
			{Peer: "b", InSync: true, Last: last, RoundsOK: 5},
			{Peer: "c", Divergent: 7, Last: last, RoundsOK: 2, RoundsFailed: 1},
			{Peer: "d", Unsupported: true},
			{Peer: "e", Failing: true, Divergent: 3, RoundsFailed: 9},
		}}
	})
	status := n.do(t, "GET", "/admin/status", "").Body
	for _, want := range []string{
		`"name": "b"`, `"antiEntropy": "in-sync"`, `"inSync": true`, `"lastAntiEntropy": "2024-06-10T06:00:00Z"`, `"repairs": 4`,
		`"antiEntropy": "divergent"`, `"inSync": false`, `"antiEntropy": "unsupported"`, `"antiEntropy": "failing"`,
		`"antiEntropyError": "digest from e: 403 Forbidden"`, `"antiEntropyErrorAt": "2024-06-10T06:01:00Z"`,
	} {
		if !strings.Contains(status, want) {
			t.Errorf("/admin/status lacks %s: %s", want, status)
		}
	}
	if want := fmt.Sprintf(`"digest": "%016x"`, n.reg.RootDigest()); !strings.Contains(status, want) {
		t.Errorf("/admin/status lacks %s", want)
	}
	if strings.Count(status, `"lastAntiEntropy"`) != 1 {
		t.Errorf("lastAntiEntropy shown for a peer without a round: %s", status)
	}
	if strings.Count(status, `"inSync"`) != 3 {
		t.Errorf("inSync shown for a Eureka peer: %s", status)
	}
	page := n.do(t, "GET", "/", "").Body
	for _, want := range []string{
		`"sync ok" title="last anti-entropy round 2024-06-10T06:00:00Z; 4 repairs from this peer">in sync</td>`,
		`"sync bad" title="no anti-entropy round yet; 0 repairs from this peer">not in sync</td>`,
		`"sync " title="no anti-entropy round yet; 0 repairs from this peer">n/a (Eureka peer)</td>`,
		`; last failed round 2024-06-10T06:01:00Z: digest from e: 403 Forbidden">not in sync (round failed)</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	metrics := n.do(t, "GET", "/metrics", "").Body
	for _, want := range []string{
		`muster_anti_entropy_repairs_total{kind="missing"} 3`, `muster_anti_entropy_repairs_total{kind="stale"} 2`,
		`muster_anti_entropy_repairs_total{kind="cancelled"} 1`,
		`muster_peer_divergent_instances{peer="b"} 0`, `muster_peer_divergent_instances{peer="c"} 7`,
		`muster_anti_entropy_rounds_total{peer="b",result="ok"} 5`, `muster_anti_entropy_rounds_total{peer="c",result="failed"} 1`,
		`muster_anti_entropy_rounds_total{peer="e",result="failed"} 9`, `muster_anti_entropy_rounds_total{peer="e",result="ok"} 0`,
		`muster_peer_in_sync{peer="b"} 1`, `muster_peer_in_sync{peer="c"} 0`, `muster_peer_in_sync{peer="e"} 0`,
		fmt.Sprintf(`muster_anti_entropy_last_success_timestamp_seconds{peer="b"} %g`, float64(last.Unix())),
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, absent := range []string{`peer="d"`, `muster_anti_entropy_last_success_timestamp_seconds{peer="e"}`} {
		if strings.Contains(metrics, absent) {
			t.Errorf("/metrics has %s", absent)
		}
	}
}

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
		body := n.do(t, "GET", "/metrics", "").body
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

// Anti-entropy shows: per peer on /admin/status (inSync, lastAntiEntropy
// only once a round ran, repairs) and on the dashboard's replica table,
// and in /metrics as repairs by kind and divergent instances per peer.
func TestAntiEntropy_shown(t *testing.T) {
	last := time.Date(2024, 6, 10, 6, 0, 0, 0, time.UTC)
	peers := []httpapi.PeerInfo{
		{Name: "b", State: "alive", InSync: true, LastAntiEntropy: &last, Repairs: 4},
		{Name: "c", State: "alive"},
	}
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) {
		h.Peers = func() []httpapi.PeerInfo { return peers }
		h.AntiEntropy = fixedAntiEntropy{[]replication.AntiEntropyStats{{Peer: "b", InSync: true}, {Peer: "c", Divergent: 7}}}
	})
	status := n.do(t, "GET", "/admin/status", "").body
	for _, want := range []string{`"name": "b"`, `"inSync": true`, `"lastAntiEntropy": "2024-06-10T06:00:00Z"`, `"repairs": 4`, `"inSync": false`} {
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
	page := n.do(t, "GET", "/", "").body
	for _, want := range []string{">in sync</td>", ">not in sync</td>", "4 repairs from this peer"} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	metrics := n.do(t, "GET", "/metrics", "").body
	for _, want := range []string{
		`muster_anti_entropy_repairs_total{kind="missing"} 3`, `muster_anti_entropy_repairs_total{kind="stale"} 2`,
		`muster_anti_entropy_repairs_total{kind="cancelled"} 1`,
		`muster_peer_divergent_instances{peer="b"} 0`, `muster_peer_divergent_instances{peer="c"} 7`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

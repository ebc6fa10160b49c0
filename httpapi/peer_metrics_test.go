package httpapi_test

import (
	"strings"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
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

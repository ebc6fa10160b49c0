package ops

import "github.com/prometheus/client_golang/prometheus"

// peerStates are always exported, zeros included, so an alert on a state
// sees a 0 rather than a series that is missing (memberlist forgets a dead
// peer after GossipToTheDeadTime, and its per-peer series go with it).
var peerStates = []string{"alive", "suspect", "dead", "left", "static"}

// peerCollector exports how many peers this node sees in each state, at
// scrape time.
type peerCollector struct {
	peers func() []PeerInfo
	desc  *prometheus.Desc
}

func newPeerCollector(peers func() []PeerInfo) *peerCollector {
	return &peerCollector{peers: peers, desc: prometheus.NewDesc("muster_cluster_peers",
		"Peers this node knows, by state: memberlist's alive, suspect, dead, left; static for eureka.client.service-url peers.",
		[]string{"state"}, nil)}
}

func (pc *peerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pc.desc }

func (pc *peerCollector) Collect(ch chan<- prometheus.Metric) {
	count := map[string]int{}
	for _, st := range peerStates {
		count[st] = 0
	}
	for _, p := range pc.peers() {
		count[p.State]++
	}
	for st, n := range count {
		ch <- prometheus.MustNewConstMetric(pc.desc, prometheus.GaugeValue, float64(n), st)
	}
}

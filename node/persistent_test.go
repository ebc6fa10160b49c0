package node

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
)

// offsetClock is the real clock plus an offset the test moves: the nodes'
// timers (replication's batch delay, the peers' senders) keep running,
// and leases still age when the test jumps.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// persistentInstanceBody is healthInstanceBody with the persistent marker.
func persistentInstanceBody(id string, port int) string {
	return strings.Replace(healthInstanceBody(id, port), `"vipAddress":"svc"`,
		`"vipAddress":"svc","metadata":{"muster.lease":"persistent"}`, 1)
}

// Two real nodes on one moved clock, health checks left off (the
// default): a persistent instance with a real backend outlives three lease
// durations without a heartbeat on both nodes (the peer derives the same
// lease from the replicated copy), while an ordinary one beside it is
// evicted; it is probed all the same, goes DOWN everywhere when its
// backend fails (with its app's other instance failing too, which the
// guard would hold back for ordinary ones), UP when it recovers, and is
// gone everywhere on cancel.
func TestCluster_persistentInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	clk := &offsetClock{}
	sets := []string{"cluster.bind-port=0",
		"muster.health-check.interval-ms=3600000", "muster.health-check.allowed-cidrs=127.0.0.0/8"}
	n1 := startClockedNode(t, clk, "p1", nil, sets...)
	n2 := startClockedNode(t, clk, "p2", []string{n1.gossipAddr(t)}, sets...)
	nodes := []*Node{n1, n2}
	waitOpened(t, n1, n2)
	waitFor(t, 15*time.Second, "both nodes to see two live members", func() bool {
		return len(n1.liveMemberNames()) == 2 && len(n2.liveMemberNames()) == 2
	})
	backends := map[string]*healthBackend{}
	for _, id := range []string{"db-1", "db-2"} {
		backends[id] = newHealthBackend(t)
		if code := call(t, http.MethodPost, n1.URL()+"apps/SVC", persistentInstanceBody(id, backends[id].port)); code != http.StatusNoContent {
			t.Fatalf("register %s: %d", id, code)
		}
	}
	if code := call(t, http.MethodPost, n1.URL()+"apps/SVC", instanceBody("SVC", "ordinary", 90)); code != http.StatusNoContent {
		t.Fatalf("register the ordinary one: %d", code)
	}
	everywhere := func(id string, want func(registry.InstanceView, bool) bool) func() bool {
		return func() bool {
			for _, n := range nodes {
				if !want(n.reg.Instance("SVC", id)) {
					return false
				}
			}
			return true
		}
	}
	present := func(_ registry.InstanceView, ok bool) bool { return ok }
	gone := func(_ registry.InstanceView, ok bool) bool { return !ok }
	status := func(st registry.Status) func(registry.InstanceView, bool) bool {
		return func(iv registry.InstanceView, ok bool) bool { return ok && iv.Status == st }
	}
	for _, id := range []string{"db-1", "db-2", "ordinary"} {
		waitFor(t, 10*time.Second, id+" on both nodes", everywhere(id, present))
	}

	// Three lease durations and more, nobody heartbeating.
	for range 4 * 90 / 30 {
		clk.Advance(30 * time.Second)
		for _, n := range nodes {
			n.reg.EvictExpired()
		}
	}
	for _, n := range nodes {
		if _, ok := n.reg.Instance("SVC", "ordinary"); ok {
			t.Fatalf("%s kept the ordinary instance that never renewed", n.name)
		}
		for _, id := range []string{"db-1", "db-2"} {
			if _, ok := n.reg.Instance("SVC", id); !ok {
				t.Fatalf("%s evicted persistent %s", n.name, id)
			}
		}
		if sp := n.reg.SelfPreservationState(); sp.ExpectedRenewsPerMin != 0 {
			t.Fatalf("%s expects %v renewals a minute of persistent instances", n.name, sp.ExpectedRenewsPerMin)
		}
	}

	// One round on each node: the app's owner probes both instances,
	// though no muster.health-check.apps lists it.
	round := func() (probed int) {
		for _, n := range nodes {
			probed += n.health.Round(context.Background()).Probed
		}
		return probed
	}
	backends["db-1"].healthy.Store(false)
	backends["db-2"].healthy.Store(false)
	for range 3 {
		if got := round(); got != 2 {
			t.Fatalf("a round probed %d instances, want 2", got)
		}
	}
	for _, id := range []string{"db-1", "db-2"} {
		waitFor(t, 10*time.Second, id+" DOWN on both nodes", everywhere(id, status(registry.StatusDown)))
	}
	backends["db-2"].healthy.Store(true)
	round()
	round()
	waitFor(t, 10*time.Second, "db-2 UP again on both nodes", everywhere("db-2", status(registry.StatusUp)))
	if iv, _ := n2.reg.Instance("SVC", "db-1"); iv.Status != registry.StatusDown {
		t.Fatalf("db-1, still failing, is %s", iv.Status)
	}
	backends["db-1"].healthy.Store(true)
	round()
	round()
	waitFor(t, 10*time.Second, "db-1 UP again on both nodes", everywhere("db-1", status(registry.StatusUp)))

	if code := call(t, http.MethodDelete, n2.URL()+"apps/SVC/db-1", ""); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	waitFor(t, 10*time.Second, "db-1 gone on both nodes", everywhere("db-1", gone))
	if _, ok := n1.reg.Instance("SVC", "db-2"); !ok {
		t.Fatal("the cancel took db-2 too")
	}
}

// Health checks are off by default: then a node probes its persistent
// instances and nothing else, not even an instance that opts in by its
// metadata.
func TestNode_persistentProbedWithChecksOff(t *testing.T) {
	n := startTestNode(t, "nohc", "z1", nil, "muster.health-check.allowed-cidrs=127.0.0.0/8")
	waitOpened(t, n)
	db, web := newHealthBackend(t), newHealthBackend(t)
	if code := call(t, http.MethodPost, n.URL()+"apps/SVC", persistentInstanceBody("db-1", db.port)); code != http.StatusNoContent {
		t.Fatalf("register persistent = %d, want 204", code)
	}
	optedIn := strings.Replace(healthInstanceBody("web-1", web.port), `"vipAddress":"svc"`,
		`"vipAddress":"svc","metadata":{"muster.health-check":"http"}`, 1)
	if code := call(t, http.MethodPost, n.URL()+"apps/SVC", optedIn); code != http.StatusNoContent {
		t.Fatalf("register opted-in = %d, want 204", code)
	}
	if got := n.health.Round(context.Background()); got.Probed != 1 || db.requests.Load() == 0 || web.requests.Load() != 0 {
		t.Fatalf("round probed %d (db %d hits, web %d), want the persistent instance alone", got.Probed, db.requests.Load(), web.requests.Load())
	}
}

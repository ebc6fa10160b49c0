package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
)

// startTestNode starts a node on loopback with its own free ports and fast
// memberlist timings; join lists gossip seeds (host:port).
func startTestNode(t *testing.T, name, zone string, join []string, sets ...string) *Node {
	t.Helper()
	base := []string{
		"eureka.client.register-with-eureka=false", // tests count the instances they register
		"server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0", "cluster.zone=" + zone,
		"eureka.server.registry-sync-retry-wait-ms=200",
	}
	if len(join) > 0 {
		base = append(base, "cluster.join="+strings.Join(join, ","))
	}
	s := mustLoad(t, "", nil, append(base, sets...))
	n, err := New(s, testLogger(t).With().Str("node", name).Logger(), Options{Memberlist: memberlist.DefaultLocalConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// gossipAddr is the node's memberlist address, for others to join.
func (n *Node) gossipAddr(t *testing.T) string {
	t.Helper()
	addr := n.GossipAddr()
	if addr == "" {
		t.Fatal("node lists no self member")
	}
	return addr
}

// startThreeNodes starts n1, n2 and n3 in zones a, b and c, the last two
// joining the first by gossip, with sets on each, and waits until each is
// open and replicates to the other two.
func startThreeNodes(t *testing.T, sets ...string) []*Node {
	t.Helper()
	n1 := startTestNode(t, "n1", "zone-a", nil, sets...)
	seed := n1.gossipAddr(t)
	nodes := []*Node{n1, startTestNode(t, "n2", "zone-b", []string{seed}, sets...), startTestNode(t, "n3", "zone-c", []string{seed}, sets...)}
	waitOpened(t, nodes...)
	waitFor(t, 15*time.Second, "every node to see two peers", func() bool {
		for _, n := range nodes {
			if len(n.currentPeers()) != 2 {
				return false
			}
		}
		return true
	})
	return nodes
}

func waitOpened(t *testing.T, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		select {
		case <-n.Opened():
		case <-time.After(20 * time.Second):
			t.Fatalf("node %s did not open for traffic", n.name)
		}
	}
}

func instanceBody(app, id string, leaseSecs int) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h-%s","app":%q,"ipAddr":"10.0.0.1","status":"UP",
"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":1,"durationInSecs":%d},"vipAddress":%q}}`, id, id, app, leaseSecs, strings.ToLower(app))
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func call(t *testing.T, method, url, body string) int {
	t.Helper()
	return authCall(t, "", "", method, url, body)
}

func metricValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	code, body, err := httpGet("http://" + n.Addr() + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, name+" "), 64)
			return v
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return 0
}

// TestCluster_threeNodes: three real nodes on loopback (real memberlist, real
// HTTP) find each other from one seed and replicate registers, heartbeats,
// cancels and status changes in batches.
func TestCluster_threeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	// Short leases and eviction runs, self-preservation off: if heartbeats
	// sent only to node 1 did not reach the others, they would evict.
	nodes := startThreeNodes(t, "eureka.server.enable-self-preservation=false", "eureka.server.eviction-interval-timer-in-ms=500")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	const count = 200
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < count; i += 8 {
				id := fmt.Sprintf("i-%03d", i)
				if code := call(t, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", id, 3)); code != 204 {
					t.Errorf("register %s: %d", id, code)
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, 10*time.Second, "200 instances on every node", func() bool {
		return n2.reg.Len() == count && n3.reg.Len() == count
	})

	// Heartbeats only to node 1, for longer than a lease, keep the
	// instances alive everywhere.
	// 16 clients at a time: the load under which batches fill.
	for round := 0; round < 8; round++ {
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < count; i += 16 {
					if code := call(t, "PUT", fmt.Sprintf("%sapps/ORDERS/i-%03d", n1.URL(), i), ""); code != 200 {
						t.Errorf("heartbeat: %d", code)
					}
				}
			}()
		}
		wg.Wait()
		time.Sleep(500 * time.Millisecond)
	}
	for _, n := range nodes {
		if n.reg.Len() != count || n.reg.Stats().Evictions != 0 {
			t.Fatalf("node %s: %d instances, %d evictions; heartbeats did not keep them alive", n.name, n.reg.Len(), n.reg.Stats().Evictions)
		}
	}

	// A cancel on node 2 and a status change on node 3 reach all.
	if code := call(t, "DELETE", n2.URL()+"apps/ORDERS/i-000", ""); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if code := call(t, "PUT", n3.URL()+"apps/ORDERS/i-001/status?value=OUT_OF_SERVICE", ""); code != 200 {
		t.Fatalf("status: %d", code)
	}
	waitFor(t, 10*time.Second, "the cancel and the status change everywhere", func() bool {
		for _, n := range nodes {
			if _, ok := n.reg.Instance("ORDERS", "i-000"); ok {
				return false
			}
			if iv, _ := n.reg.Instance("ORDERS", "i-001"); iv.Status != registry.StatusOutOfService {
				return false
			}
		}
		return true
	})
	hash := n1.reg.Snapshot().Hashcode
	for _, n := range nodes {
		if got := n.reg.Snapshot().Hashcode; got != hash || got != "OUT_OF_SERVICE_1_UP_198_" {
			t.Errorf("node %s hashcode %q, node 1 %q", n.name, got, hash)
		}
	}

	// Batching shows in the metrics: node 1 sent 2 × (200 registers + 1600
	// heartbeats) items in far fewer requests.
	items := metricValue(t, n1, "muster_replication_items_total")
	batches := metricValue(t, n1, "muster_replication_batches_total")
	t.Logf("node 1 replicated %.0f items in %.0f batches (%.1f items per batch)", items, batches, items/batches)
	if items < 2*count*9 || batches*3 > items {
		t.Fatalf("items %.0f, batches %.0f: want ≥ %d items and at least 3 items per batch", items, batches, 2*count*9)
	}

	// Peers are listed on /admin/status in memberlist's words.
	_, body, _ := httpGet("http://" + n1.Addr() + "/admin/status")
	for _, want := range []string{`"name": "n2"`, `"name": "n3"`, `"state": "alive"`, `"zone": "zone-b"`, `"queueDepth"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/admin/status lacks %s", want)
		}
	}
	_, dash, _ := httpGet("http://" + n1.Addr() + "/")
	if strings.Count(dash, ">available<") != 2 {
		t.Errorf("dashboard does not list two available replicas")
	}
}

// TestCluster_restartSyncsBeforeReady: a node that stops and comes back
// while the registry changed copies it from a peer before /readyz turns 200.
func TestCluster_restartSyncsBeforeReady(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	n1 := startTestNode(t, "r1", "zone-a", nil)
	seed := n1.gossipAddr(t)
	n2 := startTestNode(t, "r2", "zone-b", []string{seed})
	waitOpened(t, n1, n2)
	waitFor(t, 10*time.Second, "the two nodes to see each other", func() bool {
		return len(n1.currentPeers()) == 1 && len(n2.currentPeers()) == 1
	})
	for i := 0; i < 50; i++ {
		if code := call(t, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", fmt.Sprintf("o-%d", i), 90)); code != 204 {
			t.Fatalf("register: %d", code)
		}
	}
	waitFor(t, 10*time.Second, "replication to node 2", func() bool { return n2.reg.Len() == 50 })
	if err := n2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The registry changes while node 2 is away.
	for i := 0; i < 20; i++ {
		call(t, "POST", n1.URL()+"apps/BILLING", instanceBody("BILLING", fmt.Sprintf("b-%d", i), 90))
	}
	for i := 0; i < 10; i++ {
		call(t, "DELETE", fmt.Sprintf("%sapps/ORDERS/o-%d", n1.URL(), i), "")
	}
	call(t, "PUT", n1.URL()+"apps/ORDERS/o-20/status?value=DOWN", "")

	n2b := startTestNode(t, "r2", "zone-b", []string{seed})
	waitFor(t, 20*time.Second, "/readyz of the restarted node", func() bool {
		code, _, err := httpGet("http://" + n2b.Addr() + "/readyz")
		return err == nil && code == 200
	})
	want := n1.reg.Snapshot()
	got := n2b.reg.Snapshot()
	if got.Instances != want.Instances || got.Hashcode != want.Hashcode || got.Instances != 60 {
		t.Fatalf("restarted node holds %d instances (%q), peer %d (%q)", got.Instances, got.Hashcode, want.Instances, want.Hashcode)
	}
	sp := n2b.reg.SelfPreservationState()
	// 60 instances renewing every second: 3600 renewals a minute expected.
	if sp.ExpectedRenewsPerMin != 3600 || sp.RenewsThreshold != 3060 {
		t.Fatalf("restarted node expects %v renewals, threshold %d; want 3600, 3060 from the copied instances", sp.ExpectedRenewsPerMin, sp.RenewsThreshold)
	}
	if n2b.syncResult.Source != "r1" || n2b.syncResult.Instances != 60 {
		t.Fatalf("syncUp result %+v", n2b.syncResult)
	}
}

// TestCluster_joinsSeedThatStartsLater: cluster.join may name a node that is
// not up yet.
func TestCluster_joinsSeedThatStartsLater(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	port := freeGossipPort(t)
	seed := "127.0.0.1:" + strconv.Itoa(port)
	late := startTestNode(t, "late-joiner", "zone-a", []string{seed}, "cluster.bind-port=0")
	waitOpened(t, late) // nobody there: it opens alone
	first := startTestNode(t, "seed", "zone-a", nil, "cluster.bind-port="+strconv.Itoa(port))
	waitOpened(t, first)
	waitFor(t, 30*time.Second, "the late joiner to join the seed", func() bool {
		return len(late.currentPeers()) == 1 && len(first.currentPeers()) == 1
	})
	if code := call(t, "POST", first.URL()+"apps/WEB", instanceBody("WEB", "w1", 90)); code != 204 {
		t.Fatal(code)
	}
	waitFor(t, 10*time.Second, "replication to the joiner", func() bool { return late.reg.Len() == 1 })
	for _, m := range late.cluster.Members() {
		if !m.Self && m.State != cluster.StateAlive {
			t.Errorf("peer %s is %s", m.Name, m.State)
		}
	}
}

// freeGossipPort finds a port free for both TCP and UDP on loopback.
func freeGossipPort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// eureka.client.register-with-eureka: the node registers itself as
// host:app:port and cancels that registration when it stops.
func TestNode_registersItself(t *testing.T) {
	n := startTestNode(t, "self", "zone-a", nil, "eureka.client.register-with-eureka=true",
		"spring.application.name=eureka-server", "cluster.enabled=false")
	waitOpened(t, n)
	id := "127.0.0.1:eureka-server:" + strconv.Itoa(n.port)
	waitFor(t, 5*time.Second, "the self-registration", func() bool {
		_, ok := n.reg.Instance("EUREKA-SERVER", id)
		return ok
	})
	iv, _ := n.reg.Instance("EUREKA-SERVER", id)
	if iv.Port.Number != n.port || iv.VIPAddress != "eureka-server" {
		t.Fatalf("self-registration %+v", iv.Instance)
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.reg.Stats().Cancels != 1 {
		t.Fatalf("cancels after shutdown = %d, want 1 (the self-registration)", n.reg.Stats().Cancels)
	}
}

// A node shut down while it is still syncing stops cleanly and never
// starts its self-registration.
func TestNode_shutdownWhileSyncing(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(freeGossipPort(t))
	n := startTestNode(t, "early", "zone-a", []string{dead}, "eureka.client.register-with-eureka=true",
		"eureka.server.registry-sync-retry-wait-ms=5000")
	done := make(chan error, 1)
	go func() { done <- n.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown hung while the node was syncing")
	}
	select {
	case <-n.Opened():
		t.Fatal("a node shut down while syncing opened for traffic")
	default:
	}
	if n.reg.Len() != 0 {
		t.Fatalf("self-registration started on a node being shut down")
	}
}

// Two nodes that opened alone, each with instances of its own, reconcile
// as soon as they meet (anti-entropy's round with a new peer), signed with
// the peer secret: status overrides included, which replication's catch-up
// heartbeats alone never carried.
func TestCluster_nodesThatOpenedAloneReconcileWhenTheyMeet(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	port := freeGossipPort(t)
	seed := "127.0.0.1:" + strconv.Itoa(port)
	secret, ae := "cluster.peer-secret="+testSecret, "muster.anti-entropy-interval-ms=1000"
	late := startTestNode(t, "late-joiner", "zone-a", []string{seed}, "cluster.bind-port=0", secret, ae)
	waitOpened(t, late)
	if code := call(t, "POST", late.URL()+"apps/WEB", instanceBody("WEB", "w1", 90)); code != 204 {
		t.Fatal(code)
	}
	if code := call(t, "PUT", late.URL()+"apps/WEB/w1/status?value=OUT_OF_SERVICE", ""); code != 200 {
		t.Fatal(code)
	}
	first := startTestNode(t, "seed", "zone-a", nil, "cluster.bind-port="+strconv.Itoa(port), secret, ae)
	waitOpened(t, first)
	if code := call(t, "POST", first.URL()+"apps/API", instanceBody("API", "a1", 90)); code != 204 {
		t.Fatal(code)
	}
	waitFor(t, 30*time.Second, "both nodes to hold both instances, override included", func() bool {
		for _, n := range []*Node{late, first} {
			iv, ok := n.reg.Instance("WEB", "w1")
			if !ok || iv.Status != "OUT_OF_SERVICE" || n.reg.Len() != 2 {
				return false
			}
		}
		return late.reg.RootDigest() == first.reg.RootDigest()
	})
	waitFor(t, 30*time.Second, "the peers to show in sync", func() bool {
		for _, n := range []*Node{late, first} {
			ps := n.peerInfos()
			if len(ps) != 1 || ps[0].InSync == nil || !*ps[0].InSync || ps[0].AntiEntropy != replication.AEInSync || ps[0].LastAntiEntropy == nil {
				return false
			}
		}
		return true
	})
}

// TestNode_antiEntropyInfo: a node passes anti-entropy's state through to
// /admin/status: inSync only for a peer that serves anti-entropy, the
// failed round's error and time.
func TestNode_antiEntropyInfo(t *testing.T) {
	n := &Node{settings: &settings.Settings{AntiEntropy: replication.AntiEntropyConfig{Interval: time.Second}}}
	at := time.Date(2024, 6, 10, 6, 0, 0, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		as    replication.AntiEntropyStats
		state string
		sync  *bool
	}{
		{replication.AntiEntropyStats{}, replication.AEPending, new(bool)},
		{replication.AntiEntropyStats{Unsupported: true}, replication.AEUnsupported, nil},
		{replication.AntiEntropyStats{InSync: true, Last: at, LastError: "x", LastErrorAt: at, Failing: true}, replication.AEFailing, new(bool)},
	} {
		var pi httpapi.PeerInfo
		n.antiEntropyInfo(&pi, c.as)
		if pi.AntiEntropy != c.state || (pi.InSync == nil) != (c.sync == nil) {
			t.Errorf("%+v: got %s, inSync %v", c.as, pi.AntiEntropy, pi.InSync)
		}
		if c.as.LastError != "" && (pi.AntiEntropyError != "x" || pi.AntiEntropyErrorAt == nil || pi.AntiEntropyErrorAt.Location() != time.UTC) {
			t.Errorf("%+v: error %q at %v", c.as, pi.AntiEntropyError, pi.AntiEntropyErrorAt)
		}
	}
	n.settings.AntiEntropy.Interval = 0
	var pi httpapi.PeerInfo
	n.antiEntropyInfo(&pi, replication.AntiEntropyStats{})
	if pi.AntiEntropy != httpapi.AntiEntropyOff || pi.InSync != nil {
		t.Errorf("anti-entropy off: %+v", pi)
	}
}

// muster.testing.clock-offset-ms moves the registry's clock: the chaos
// checker's node with a clock ahead stamps its registrations (and their
// write versions) that far in the future.
func TestNode_clockOffset(t *testing.T) {
	n := startTestNode(t, "ahead", "zone-a", nil, "eureka.client.register-with-eureka=true",
		"spring.application.name=eureka-server", "cluster.enabled=false", "muster.testing.clock-offset-ms=180000")
	waitOpened(t, n)
	id := "127.0.0.1:eureka-server:" + strconv.Itoa(n.port)
	waitFor(t, 5*time.Second, "the self-registration", func() bool {
		_, ok := n.reg.Instance("EUREKA-SERVER", id)
		return ok
	})
	iv, _ := n.reg.Instance("EUREKA-SERVER", id)
	if ahead := registry.VersionTime(iv.WriteVersion).Sub(time.Now()); ahead < 170*time.Second || ahead > 190*time.Second {
		t.Fatalf("write version %s ahead of the machine's clock, want about 3 min", ahead)
	}
}

package node

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
)

// The start-up rules a Spring file's keys select (coldstart.go).
func TestStartRefusal_springKeys(t *testing.T) {
	unreachable := replication.SyncResult{Attempts: 5, PeersKnown: true}
	cold := replication.SyncResult{Attempts: 5}
	for _, tc := range []struct {
		name      string
		sets      []string
		res       replication.SyncResult
		peers     bool
		wait      time.Duration
		state     string
		following bool
	}{
		{"unreachable peers hold reads as long as a cold start", nil, unreachable, true, 35 * time.Second, startNoPeer, true},
		{"cold start", nil, cold, true, 35 * time.Second, startCold, true},
		{"wait-time 0 opens a cold start at once", []string{"eureka.server.wait-time-in-ms-when-sync-empty=0"}, cold, true, 0, startCold, true},
		{"wait-time 0 opens at once with unreachable peers", []string{"eureka.server.wait-time-in-ms-when-sync-empty=0"}, unreachable, true, 0, startNoPeer, true},
		{"wait-time below the interval caps the wait", []string{"eureka.server.wait-time-in-ms-when-sync-empty=10000"}, unreachable, true, 10 * time.Second, startNoPeer, true},
		{"an explicit cold-start wait wins over wait-time", []string{"eureka.server.wait-time-in-ms-when-sync-empty=0", "muster.cold-start-wait-ms=7000"}, cold, true, 7 * time.Second, startCold, false},
		{"default-open-for-traffic-count set: Spring opens at once", []string{"eureka.instance.registry.default-open-for-traffic-count=1"}, unreachable, true, 0, startOpenCount, false},
		{"Spring's older name eureka.server.default-open-for-traffic-count", []string{"eureka.server.defaultOpenForTrafficCount=0"}, cold, true, 5 * time.Minute, startSyncEmpty, false},
		{"default-open-for-traffic-count 0: Eureka's gate", []string{"eureka.instance.registry.default-open-for-traffic-count=0"}, cold, true, 5 * time.Minute, startSyncEmpty, false},
		{"default-open-for-traffic-count 0 gates a lone node too, as Eureka", []string{"eureka.instance.registry.default-open-for-traffic-count=0", "eureka.server.wait-time-in-ms-when-sync-empty=20000"},
			replication.SyncResult{Attempts: 1}, false, 20 * time.Second, startSyncEmpty, false},
		{"a lone node serves at once", nil, replication.SyncResult{Attempts: 1}, false, 0, startAlone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, "", nil, tc.sets)
			wait, state := startRefusal(s, tc.res, tc.peers, false, false)
			if wait != tc.wait || state != tc.state {
				t.Fatalf("got %s, %q; want %s, %q", wait, state, tc.wait, tc.state)
			}
			if got := followsClients(s, state); got != tc.following {
				t.Errorf("follows the clients' intervals: %v, want %v", got, tc.following)
			}
		})
	}
}

// peerPairFile is a Spring peer pair in one file, one profile per node, as
// the Spring Cloud guide writes it (ports from the environment here, so
// the test can pick free ones).
const peerPairFile = `spring:
  application:
    name: eureka-server
eureka:
  instance:
    hostname: 127.0.0.1
    ip-address: 127.0.0.1
  client:
    register-with-eureka: false
    fetch-registry: false
  server:
    registry-sync-retry-wait-ms: 100
server:
  address: 127.0.0.1
cluster:
  enabled: false
---
spring:
  config:
    activate:
      on-profile: peer1
server:
  port: ${PORT1}
eureka:
  client:
    service-url:
      defaultZone: http://127.0.0.1:${PORT2}/eureka/
---
spring:
  config:
    activate:
      on-profile: peer2
server:
  port: ${PORT2}
eureka:
  client:
    service-url:
      defaultZone: http://127.0.0.1:${PORT1}/eureka/
`

// A 2-node peer group from one Spring file with two profiles, the second
// node 60 s late (by the registry's clock): the first serves reads one
// client renewal interval plus the margin after its start, not
// wait-time-in-ms-when-sync-empty's 5 minutes, and the late node copies
// the registry from it and serves at once.
func TestPeerPair_secondNodeLate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	p1, p2 := freeTCPPort(t), freeTCPPort(t)
	env := []string{"PORT1=" + strconv.Itoa(p1), "PORT2=" + strconv.Itoa(p2)}
	file := filepath.Join(t.TempDir(), "application.yml")
	if err := os.WriteFile(file, []byte(peerPairFile), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := registrytest.NewClock()
	start := clk.Now()
	startProfile := func(profile string) *Node {
		s, _, err := settings.Load(settings.LoadRequest{File: file, Env: env, Profiles: []string{profile}})
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(s, testLogger(t).With().Str("node", profile).Logger(), Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
		waitOpened(t, n)
		return n
	}

	a := startProfile("peer1")
	if a.startState != startNoPeer {
		t.Fatalf("first node's start state %s, want %s (its peer is not up)", a.startState, startNoPeer)
	}
	if code := readCode(t, a); code != 403 {
		t.Fatalf("first node at once: GET apps %d, want 403 while live clients re-register", code)
	}
	// A live client re-registers within its interval.
	clk.Advance(10 * time.Second)
	if code := call(t, "POST", a.URL()+"apps/ORDERS", instanceBody("ORDERS", "o1", 90)); code != 204 {
		t.Fatalf("register on the first node: %d", code)
	}
	clk.Set(start.Add(34 * time.Second))
	if code := readCode(t, a); code != 403 {
		t.Errorf("first node at 34 s: GET apps %d, want 403", code)
	}
	clk.Set(start.Add(35 * time.Second)) // the clients' 30 s + 5 s
	if code := readCode(t, a); code != 200 {
		t.Fatalf("first node at 35 s: GET apps %d, want 200 (not wait-time-in-ms-when-sync-empty's 5 min)", code)
	}

	clk.Set(start.Add(60 * time.Second))
	b := startProfile("peer2")
	if b.startState != startCopied {
		t.Fatalf("late node's start state %s, want %s", b.startState, startCopied)
	}
	if code, body, err := httpGet(b.URL() + "apps/ORDERS"); err != nil || code != 200 {
		t.Fatalf("late node: GET apps/ORDERS %d %v %s", code, err, body)
	}
}

// wait-time-in-ms-when-sync-empty: 0 in a Spring file opens at once, a
// cold start included (the configured peer never appears).
func TestNode_syncEmptyZeroOpensAtOnce(t *testing.T) {
	clk := registrytest.NewClock()
	n := startClockedNode(t, clk, "z", []string{"127.0.0.1:" + strconv.Itoa(freeGossipPort(t))},
		"cluster.bind-port=0", "eureka.server.registry-sync-retries=1", "eureka.server.wait-time-in-ms-when-sync-empty=0")
	waitOpened(t, n)
	if n.startState != startCold {
		t.Fatalf("start state %s, want cold", n.startState)
	}
	if code := readCode(t, n); code != 200 {
		t.Errorf("GET apps at once: %d, want 200", code)
	}
}

// TestNode_syncEmptyZero_unreachablePeerServesAtOnce (issue 42, symptom
// 5): with wait-time-in-ms-when-sync-empty: 0 and its only peer
// unreachable, a node serves reads at once, as Spring's server does, not
// after syncUp's five rounds (here 5 × 3 s apart); syncUp goes on in the
// background and copies the peer's registry once the peer is up.
func TestNode_syncEmptyZero_unreachablePeerServesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	peerPort := freeTCPPort(t)
	base := []string{"server.port=0", "server.address=127.0.0.1", "cluster.enabled=false",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1", "eureka.client.register-with-eureka=false"}
	start := func(name string, sets ...string) *Node {
		t.Helper()
		n, err := New(mustLoad(t, "", nil, append(append([]string{"cluster.node-name=" + name}, base...), sets...)),
			testLogger(t).With().Str("node", name).Logger())
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
		return n
	}
	began := time.Now()
	a := start("a", "eureka.server.wait-time-in-ms-when-sync-empty=0", "eureka.server.registry-sync-retry-wait-ms=3000",
		"eureka.client.service-url.defaultZone=http://127.0.0.1:"+strconv.Itoa(peerPort)+"/eureka/")
	select {
	case <-a.Opened():
	case <-time.After(2500 * time.Millisecond):
		t.Fatalf("not open %s after the start: syncUp's rounds hold it although wait-time-in-ms-when-sync-empty is 0", time.Since(began).Round(time.Millisecond))
	}
	t.Logf("opened %s after the start", time.Since(began).Round(time.Millisecond))
	if code := readCode(t, a); code != 200 {
		t.Fatalf("GET apps at once: %d, want 200", code)
	}
	if a.startState != startSyncBackground {
		t.Errorf("start state %s, want %s", a.startState, startSyncBackground)
	}
	// The peer comes up (alone: it knows no peer) holding an instance;
	// syncUp's next round copies it.
	b := start("b", "server.port="+strconv.Itoa(peerPort))
	waitOpened(t, b)
	if code := call(t, "POST", b.URL()+"apps/ORDERS", instanceBody("ORDERS", "o1", 90)); code != 204 {
		t.Fatalf("register on the peer: %d", code)
	}
	select {
	case <-a.syncUpDone():
	case <-time.After(20 * time.Second):
		t.Fatal("background syncUp did not end")
	}
	if _, res := a.SyncUp(); res.Source == "" || res.Instances != 1 || res.Attempts != 2 {
		t.Fatalf("background syncUp %+v, want 1 instance copied from the peer at the second round", res)
	}
	if _, ok := a.Registry().Instance("ORDERS", "o1"); !ok {
		t.Fatal("the peer's instance was not copied")
	}
}

package startup

import (
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/interop/interoptest"
)

// node is one muster process of a test, and what its reads answered.
type node struct {
	name      string
	port      int
	proc      *interoptest.Process
	refused   bool          // a read answered 403 (the cold-start refusal ran)
	servedIn  time.Duration // from the start until reads answered 200; 0: never
	lastCode  int
	lastError error
}

// served says when reads were served, for the log.
func (n *node) served() string {
	if n.servedIn == 0 {
		return "never"
	}
	return n.servedIn.Round(10 * time.Millisecond).String()
}

func (n *node) apps() string { return "http://127.0.0.1:" + strconv.Itoa(n.port) + "/eureka/apps" }

// start runs `muster serve` with sets (key=value), not waiting for it.
func start(t *testing.T, name string, port int, sets ...string) *node {
	t.Helper()
	args := []string{"serve",
		"--set", "server.port=" + strconv.Itoa(port),
		"--set", "server.address=127.0.0.1",
		"--set", "eureka.instance.hostname=127.0.0.1",
		"--set", "eureka.instance.ip-address=127.0.0.1",
		"--set", "cluster.node-name=" + name,
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(interoptest.Binary(t), args...)
	return &node{name: name, port: port, proc: interoptest.Start(t, "muster "+name, cmd)}
}

// watchReads polls each node's GET /eureka/apps from began until it
// answers 200 or limit has passed, noting a 403 on the way.
func watchReads(nodes []*node, began time.Time, limit time.Duration) {
	client := &http.Client{Timeout: 2 * time.Second}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(began) < limit && !n.proc.Exited() {
				resp, err := client.Get(n.apps())
				n.lastError = err
				if err == nil {
					resp.Body.Close()
					n.lastCode = resp.StatusCode
					switch resp.StatusCode {
					case http.StatusForbidden:
						n.refused = true
					case http.StatusOK:
						n.servedIn = time.Since(began)
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// TestProcesses_ColdStartBoundedByClients (issue 42, symptom 4): three
// muster processes started together, each registering itself (Spring's
// register-with-eureka default, 30 s renewals), told their clients renew
// every 2 s. None has the registry: they start cold and refuse reads for
// 2 s + the 5 s margin, then serve. Before, the nodes' own 30 s held reads
// for 35 s after the cold start (39 s from the processes' start).
func TestProcesses_ColdStartBoundedByClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three muster processes for about 10 s")
	}
	interoptest.Binary(t) // built before the clock starts
	ports := []int{interoptest.FreePort(t), interoptest.FreePort(t), interoptest.FreePort(t)}
	gossip := []int{interoptest.FreePort(t), interoptest.FreePort(t), interoptest.FreePort(t)}
	began := time.Now()
	nodes := make([]*node, len(ports))
	for i := range nodes {
		var join []string
		for j, g := range gossip {
			if j != i {
				join = append(join, "127.0.0.1:"+strconv.Itoa(g))
			}
		}
		nodes[i] = start(t, "cs-"+strconv.Itoa(i), ports[i],
			"cluster.enabled=true", "cluster.bind-addr=127.0.0.1", "cluster.bind-port="+strconv.Itoa(gossip[i]),
			"cluster.join="+strings.Join(join, ","),
			"eureka.client.register-with-eureka=true",
			"eureka.server.expected-client-renewal-interval-seconds=2",
			"eureka.server.registry-sync-retry-wait-ms=500")
	}
	// The bound: the 7 s refusal after a syncUp of two rounds 0.5 s apart
	// (every peer starting), with room for a loaded machine; the nodes'
	// own 35 s would be far beyond it.
	const bound = 20 * time.Second
	watchReads(nodes, began, bound+5*time.Second)
	for _, n := range nodes {
		t.Logf("%s: reads refused (403) at first: %v; served (200) %s after the start", n.name, n.refused, n.served())
		switch {
		case n.servedIn == 0:
			t.Errorf("%s: reads not served %s after the start (last: %d %v): the cold start waits for more than the clients' 2 s + 5 s", n.name, bound+5*time.Second, n.lastCode, n.lastError)
		case n.servedIn > bound:
			t.Errorf("%s: reads served %s after the start, want within %s", n.name, n.servedIn.Round(10*time.Millisecond), bound)
		}
	}
	refused := 0
	for _, n := range nodes {
		if n.refused {
			refused++
		}
	}
	if refused == 0 {
		t.Error("no node refused reads at first: the cluster did not start cold, the test proves nothing")
	}
}

// TestProcesses_SyncEmptyZeroUnreachablePeer (issue 42, symptom 5): with
// eureka.server.wait-time-in-ms-when-sync-empty: 0 and its only peer
// unreachable, a muster process serves reads at once, as Spring's server
// does, not after syncUp's five rounds (here 5 s apart: 20 s).
func TestProcesses_SyncEmptyZeroUnreachablePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a muster process")
	}
	interoptest.Binary(t)
	began := time.Now()
	n := start(t, "w0", interoptest.FreePort(t), "cluster.enabled=false",
		"eureka.client.register-with-eureka=false",
		"eureka.client.service-url.defaultZone=http://127.0.0.1:"+strconv.Itoa(interoptest.FreePort(t))+"/eureka/",
		"eureka.server.wait-time-in-ms-when-sync-empty=0",
		"eureka.server.registry-sync-retry-wait-ms=5000")
	const bound = 4 * time.Second // a process start on a loaded machine; syncUp's rounds would take 20 s
	watchReads([]*node{n}, began, bound)
	t.Logf("%s: reads served (200) %s after the start", n.name, n.served())
	if n.servedIn == 0 {
		t.Fatalf("reads not served %s after the start (last: %d %v), want at once", bound, n.lastCode, n.lastError)
	}
}

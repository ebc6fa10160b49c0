package node

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
)

func TestStartRefusal(t *testing.T) {
	s := &settings.Settings{Sync: replication.SyncConfig{Attempts: 5}, ColdStartWait: 35 * time.Second, WaitWhenSyncEmpty: 5 * time.Minute}
	const refused = true
	cases := []struct {
		name          string
		res           replication.SyncResult
		peersExpected bool
		restored      bool
		retries       int
		wait          time.Duration
		state         string
		refused       bool // a snapshot was there and was refused
	}{
		{"copied from a peer", replication.SyncResult{Source: "b", Reached: true, PeersKnown: true, Instances: 3}, true, false, 5, 0, startCopied, false},
		{"a warm peer with an empty registry", replication.SyncResult{Source: "b", Reached: true, PeersKnown: true}, true, false, 5, 0, startCopied, false},
		{"full restart, snapshot loaded", replication.SyncResult{Reached: true, PeersKnown: true, AllStarting: true}, true, true, 5, 0, startRestored, false},
		{"full restart, no snapshot", replication.SyncResult{Reached: true, PeersKnown: true, AllStarting: true}, true, false, 5, 35 * time.Second, startCold, false},
		{"full restart, snapshot refused", replication.SyncResult{Reached: true, PeersKnown: true, AllStarting: true}, true, false, 5, 35 * time.Second, startCold, refused},
		{"configured peers never appeared", replication.SyncResult{Attempts: 5}, true, false, 5, 35 * time.Second, startCold, false},
		{"peers known, unreachable: as a cold start", replication.SyncResult{Attempts: 5, PeersKnown: true}, true, false, 5, 35 * time.Second, startNoPeer, false},
		{"peers unreachable, snapshot refused", replication.SyncResult{Attempts: 5, PeersKnown: true}, true, false, 5, 35 * time.Second, startNoPeer, refused},
		{"peers unreachable, snapshot loaded", replication.SyncResult{Attempts: 5, PeersKnown: true}, true, true, 5, 0, startRestored, false},
		{"a single node, no peers configured", replication.SyncResult{Attempts: 1}, false, false, 5, 0, startAlone, false},
		{"a single node with a snapshot", replication.SyncResult{Attempts: 1}, false, true, 5, 0, startRestored, false},
		{"a single node whose snapshot was refused", replication.SyncResult{Attempts: 1}, false, false, 5, 35 * time.Second, startCold, refused},
		{"a peer had it, local snapshot refused", replication.SyncResult{Source: "b", Reached: true, PeersKnown: true}, true, false, 5, 0, startCopied, refused},
		{"syncUp off", replication.SyncResult{}, true, false, 0, 0, startSyncOff, false},
		{"syncUp off, snapshot refused", replication.SyncResult{}, false, false, 0, 35 * time.Second, startCold, refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := *s
			s.Sync.Attempts = tc.retries
			wait, state := startRefusal(&s, tc.res, tc.peersExpected, tc.restored, tc.refused)
			if wait != tc.wait || state != tc.state {
				t.Fatalf("got %s, %q; want %s, %q", wait, state, tc.wait, tc.state)
			}
		})
	}
}

// liveClients keeps instances alive the way Eureka clients do: a heartbeat
// every interval to the first node that answers, a registration when the
// heartbeat gets 404.
type liveClients struct {
	n        int
	mu       sync.Mutex // guards urls
	urls     []string
	failures atomic.Int64
	reRegs   atomic.Int64
}

func (lc *liveClients) setURLs(urls []string) {
	lc.mu.Lock()
	lc.urls = urls
	lc.mu.Unlock()
}

func (lc *liveClients) run(ctx context.Context, every time.Duration) {
	client := &http.Client{Timeout: time.Second}
	send := func(method, url, body string) int {
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for ctx.Err() == nil {
		lc.mu.Lock()
		urls := lc.urls
		lc.mu.Unlock()
		for i := 0; i < lc.n; i++ {
			id := fmt.Sprintf("live-%d", i)
			for k := range urls {
				base := urls[(i+k)%len(urls)]
				code := send("PUT", base+"apps/LIVE/"+id, "")
				if code == 404 {
					lc.reRegs.Add(1)
					code = send("POST", base+"apps/LIVE", instanceBody("LIVE", id, 90))
				}
				if code == 200 || code == 204 {
					break
				}
				lc.failures.Add(1)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// readWatch polls every node's GET /eureka/apps and notes any 200 that
// lists fewer instances than are alive.
type readWatch struct {
	want               int
	mu                 sync.Mutex // guards urls
	urls               []string
	ok, refused, short atomic.Int64
	firstShort         atomic.Value
}

func (w *readWatch) setURLs(urls []string) {
	w.mu.Lock()
	w.urls = urls
	w.mu.Unlock()
}

func (w *readWatch) run(ctx context.Context) {
	client := &http.Client{Timeout: time.Second}
	for ctx.Err() == nil {
		w.mu.Lock()
		urls := w.urls
		w.mu.Unlock()
		for _, u := range urls {
			req, _ := http.NewRequestWithContext(ctx, "GET", u+"apps", nil)
			req.Header.Set("Accept", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			body := readAll(resp)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				got := strings.Count(body, `"instanceId"`)
				w.ok.Add(1)
				if got < w.want {
					if w.short.Add(1) == 1 {
						w.firstShort.Store(fmt.Sprintf("%s answered 200 with %d instances, %d alive", u, got, w.want))
					}
				}
			case 403:
				w.refused.Add(1)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestCluster_fullRestart stops all three nodes of a cluster while 30 live
// clients keep heartbeating, starts them again, and checks that no read
// ever answered 200 with fewer instances than are alive: without a data
// dir the nodes refuse reads until the clients have registered again (cold
// start), with one they serve their snapshot.
func TestCluster_fullRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	for _, withDataDir := range []bool{false, true} {
		name := "without data dir"
		if withDataDir {
			name = "with data dir"
		}
		t.Run(name, func(t *testing.T) { fullRestart(t, withDataDir) })
	}
}

func fullRestart(t *testing.T, withDataDir bool) {
	const live = 30
	ports := []int{freeGossipPort(t), freeGossipPort(t), freeGossipPort(t)}
	names := []string{"fr-a", "fr-b", "fr-c"}
	dataRoot := t.TempDir()
	start := func() []*Node {
		nodes := make([]*Node, 3)
		var wg sync.WaitGroup
		for i := range nodes {
			var join []string
			for j, p := range ports {
				if j != i {
					join = append(join, "127.0.0.1:"+strconv.Itoa(p))
				}
			}
			sets := []string{"cluster.bind-port=" + strconv.Itoa(ports[i]), "muster.cold-start-wait-ms=6000",
				"eureka.server.registry-sync-retries=10"}
			if withDataDir {
				sets = append(sets, "muster.data-dir="+filepath.Join(dataRoot, names[i]), "muster.snapshot-interval-ms=1000")
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				nodes[i] = startTestNode(t, names[i], "zone-"+strconv.Itoa(i), join, sets...)
			}()
		}
		wg.Wait()
		return nodes
	}
	urls := func(nodes []*Node) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.URL())
		}
		return out
	}

	nodes := start()
	waitOpened(t, nodes...)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	clients := &liveClients{n: live}
	clients.setURLs(urls(nodes))
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); clients.run(ctx, 1500*time.Millisecond) }()
	defer bg.Wait()
	defer stop()
	waitFor(t, 30*time.Second, "every node to serve all live instances", func() bool {
		for _, n := range nodes {
			if !n.reg.ReadsAllowed() || n.reg.Len() != live {
				return false
			}
		}
		return true
	})

	watch := &readWatch{want: live}
	watch.setURLs(urls(nodes))
	bg.Add(1)
	go func() { defer bg.Done(); watch.run(ctx) }()
	if withDataDir {
		// The periodic write has run (1 s) on every node.
		waitFor(t, 10*time.Second, "a snapshot on every node", func() bool {
			for _, name := range names {
				if _, err := os.Stat(persist.Path(filepath.Join(dataRoot, name))); err != nil {
					return false
				}
			}
			return true
		})
	}

	// All three go down; the clients keep trying.
	for _, n := range nodes {
		// The last nodes to go may find no one to hear their leave
		// (memberlist's broadcast times out): that is not this test's
		// subject.
		if err := n.Shutdown(context.Background()); err != nil {
			t.Logf("shutdown of %s: %v", n.name, err)
		}
	}
	restarted := start()
	clients.setURLs(urls(restarted))
	watch.setURLs(urls(restarted))
	began := time.Now()
	waitFor(t, 60*time.Second, "every restarted node to serve all live instances", func() bool {
		for _, n := range restarted {
			if !n.reg.ReadsAllowed() || n.reg.Len() != live {
				return false
			}
		}
		return true
	})
	servingAfter := time.Since(began)
	time.Sleep(500 * time.Millisecond) // a few more polls of the open nodes
	stop()
	bg.Wait()

	states := map[string]int{}
	for _, n := range restarted {
		states[n.startState]++
	}
	t.Logf("restarted nodes: %v; all serving %d instances %s after the start; reads: %d × 200, %d × 403; re-registrations %d",
		states, live, servingAfter.Round(10*time.Millisecond), watch.ok.Load(), watch.refused.Load(), clients.reRegs.Load())
	if n := watch.short.Load(); n > 0 {
		t.Fatalf("%d reads answered 200 with fewer instances than alive; first: %v", n, watch.firstShort.Load())
	}
	if watch.ok.Load() == 0 {
		t.Fatal("the watcher saw no successful read")
	}
	if withDataDir {
		if states[startRestored] == 0 || states[startCold] != 0 {
			t.Fatalf("with a data dir, start states %v: want a node restored from its snapshot and none cold", states)
		}
	} else {
		if states[startCold] == 0 || states[startRestored] != 0 {
			t.Fatalf("without a data dir, start states %v: want a cold start", states)
		}
		if watch.refused.Load() == 0 {
			t.Fatal("without a data dir no read was refused: the cold start did not hold reads back")
		}
	}
}

// TestNode_dataDirRoundTrip: a lone node with a data dir keeps its
// registry across a restart (over HTTP), refuses a corrupt or foreign
// snapshot as a whole and says so in its metrics, and will not start on a
// data dir it cannot write.
func TestNode_dataDirRoundTrip(t *testing.T) {
	dir := t.TempDir()
	sets := []string{"cluster.enabled=false", "muster.data-dir=" + dir, "muster.cluster-name=shop"}
	n1 := startTestNode(t, "dd", "zone-a", nil, sets...)
	waitOpened(t, n1)
	for i := 0; i < 5; i++ {
		if code := call(t, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", fmt.Sprintf("o-%d", i), 90)); code != 204 {
			t.Fatalf("register: %d", code)
		}
	}
	if code := call(t, "PUT", n1.URL()+"apps/ORDERS/o-3/status?value=OUT_OF_SERVICE", ""); code != 200 {
		t.Fatalf("status: %d", code)
	}
	if code := call(t, "DELETE", n1.URL()+"apps/ORDERS/o-4", ""); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if err := n1.Shutdown(context.Background()); err != nil { // writes the snapshot
		t.Fatal(err)
	}

	n2 := startTestNode(t, "dd", "zone-a", nil, sets...)
	waitOpened(t, n2)
	code, body, err := httpGet(n2.URL() + "apps/ORDERS/o-3")
	if err != nil || code != 200 || !strings.Contains(body, "<status>OUT_OF_SERVICE</status>") || !strings.Contains(body, "<overriddenstatus>OUT_OF_SERVICE</overriddenstatus>") {
		t.Fatalf("o-3 after the restart: %d %v %s", code, err, body)
	}
	if n2.reg.Len() != 4 || n2.startState != startRestored {
		t.Fatalf("restarted node holds %d instances, start state %q", n2.reg.Len(), n2.startState)
	}
	// The cancel's tombstone came back with the snapshot.
	if _, ok := n2.reg.Tombstone("ORDERS", "o-4"); !ok {
		t.Fatal("the restarted node forgot the cancel of o-4")
	}
	if v := metricValue(t, n2, `muster_snapshot_load{outcome="loaded"}`); v != 1 {
		t.Fatalf("load outcome metric %v", v)
	}
	if err := n2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	good, err := os.ReadFile(persist.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name, outcome string
		data          []byte
		sets          []string
	}{
		{"truncated", "corrupt", good[:len(good)*2/3], sets},
		{"another cluster's", "foreign", good, []string{"cluster.enabled=false", "muster.data-dir=" + dir, "muster.cluster-name=other"}},
	} {
		if err := os.WriteFile(persist.Path(dir), tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		n := startTestNode(t, "dd", "zone-a", nil, tc.sets...)
		waitOpened(t, n)
		if n.reg.Len() != 0 {
			t.Fatalf("%s snapshot: %d instances loaded, want none", tc.name, n.reg.Len())
		}
		if v := metricValue(t, n, `muster_snapshot_load{outcome="`+tc.outcome+`"}`); v != 1 {
			t.Fatalf("%s snapshot: load outcome %s = %v", tc.name, tc.outcome, v)
		}
		if err := n.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The refused file is kept aside, beside those refused before.
		kept, err := persist.Refused(dir)
		if err != nil || len(kept) != i+1 {
			t.Fatalf("%s snapshot: refused files %v (%v), want %d", tc.name, kept, err, i+1)
		}
		if aside, err := os.ReadFile(kept[len(kept)-1]); err != nil || !bytes.Equal(aside, tc.data) {
			t.Fatalf("%s snapshot: not set aside intact: %v", tc.name, err)
		}
	}

	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustLoad(t, "", nil, []string{"cluster.enabled=false", "server.port=0", "muster.data-dir=" + file})
	if _, err := New(s, testLogger(t)); err == nil || !strings.Contains(err.Error(), "muster.data-dir") {
		t.Fatalf("a data dir that is a file: %v", err)
	}
}

// TestNode_snapshotWrites: a write is skipped while nothing visible
// changed, and a node that refuses reads (it has no trustworthy registry)
// never replaces the snapshot on disk.
func TestNode_snapshotWrites(t *testing.T) {
	dir := t.TempDir()
	n := startTestNode(t, "sw", "zone-a", nil, "cluster.enabled=false", "muster.data-dir="+dir)
	waitOpened(t, n)
	ok := func() float64 { return metricValue(t, n, `muster_snapshot_writes_total{result="ok"}`) }
	n.writeSnapshot("test")
	n.writeSnapshot("test")
	if got := ok(); got != 1 {
		t.Fatalf("two writes of an unchanged registry: %v writes, want 1", got)
	}
	if code := call(t, "POST", n.URL()+"apps/WEB", instanceBody("WEB", "w1", 90)); code != 204 {
		t.Fatal(code)
	}
	if code := call(t, "PUT", n.URL()+"apps/WEB/w1", ""); code != 200 { // a heartbeat changes nothing visible
		t.Fatal(code)
	}
	n.writeSnapshot("test")
	n.writeSnapshot("test")
	if got := ok(); got != 2 {
		t.Fatalf("after a register: %v writes, want 2", got)
	}
	if v := metricValue(t, n, "muster_snapshot_instances"); v != 1 {
		t.Fatalf("muster_snapshot_instances %v", v)
	}
	if v := metricValue(t, n, "muster_snapshot_last_success_timestamp_seconds"); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("muster_snapshot_last_success_timestamp_seconds %v", v)
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A node whose static peer does not answer and whose snapshot is
	// corrupt (set aside) opens refusing reads (Eureka's
	// wait-time-in-ms-when-sync-empty): it must write nothing, not even
	// at shutdown.
	other := t.TempDir()
	if err := os.WriteFile(persist.Path(other), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cold := startTestNode(t, "sw2", "zone-a", nil, "cluster.enabled=false", "muster.data-dir="+other,
		"eureka.client.service-url.defaultZone=http://127.0.0.1:1/eureka/", "eureka.server.registry-sync-retries=2")
	waitOpened(t, cold)
	if cold.reg.ReadsAllowed() || cold.startState != startNoPeer {
		t.Fatalf("start state %q, reads allowed %v", cold.startState, cold.reg.ReadsAllowed())
	}
	if code := call(t, "POST", cold.URL()+"apps/WEB", instanceBody("WEB", "w9", 90)); code != 204 {
		t.Fatal(code)
	}
	cold.writeSnapshot("test")
	if err := cold.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(persist.Path(other)); !os.IsNotExist(err) {
		t.Fatalf("a node refusing reads wrote a snapshot: %v", err)
	}
}

// startClockedNode is startTestNode on a registry clock the test moves.
func startClockedNode(t *testing.T, clk interface{ Now() time.Time }, name string, join []string, sets ...string) *Node {
	t.Helper()
	base := []string{
		"eureka.client.register-with-eureka=false", // tests count the instances they register
		"server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.zone=zone-a",
		"eureka.server.registry-sync-retry-wait-ms=200", "cluster.join=" + strings.Join(join, ","),
	}
	s := mustLoad(t, "", nil, append(base, sets...))
	n, err := New(s, testLogger(t).With().Str("node", name).Logger(), Options{Memberlist: memberlist.DefaultLocalConfig(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// readCode is what GET /eureka/apps answers: 403 while reads are refused.
func readCode(t *testing.T, n *Node) int {
	t.Helper()
	code, _, err := httpGet(n.URL() + "apps")
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestCluster_ColdStart_followsTheClients: a two-node cluster told that
// its clients renew every 10 s (eureka.server.expected-client-renewal-
// interval-seconds) starts cold, both nodes at once, no data dir: reads
// open 15 s later by the registry's clock, not after the 35 s of Eureka's
// default interval.
func TestCluster_ColdStart_followsTheClients(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	clk := registrytest.NewClock()
	ports := []int{freeGossipPort(t), freeGossipPort(t)}
	nodes := make([]*Node, 2)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = startClockedNode(t, clk, "cs-"+strconv.Itoa(i), []string{"127.0.0.1:" + strconv.Itoa(ports[1-i])},
				"cluster.bind-port="+strconv.Itoa(ports[i]), "eureka.server.expected-client-renewal-interval-seconds=10",
				"eureka.server.registry-sync-retries=3")
		}()
	}
	wg.Wait()
	waitOpened(t, nodes...)
	var cold []*Node
	for _, n := range nodes {
		if n.startState == startCold {
			cold = append(cold, n)
		}
		if n.settings.ColdStartWait != 15*time.Second {
			t.Errorf("%s: cold-start wait %s, want 15 s", n.name, n.settings.ColdStartWait)
		}
	}
	if len(cold) == 0 {
		t.Fatalf("start states %s, %s: want a cold start", nodes[0].startState, nodes[1].startState)
	}
	for _, n := range cold {
		if code := readCode(t, n); code != 403 {
			t.Fatalf("%s right after a cold start: GET apps %d, want 403", n.name, code)
		}
	}
	clk.Advance(14 * time.Second)
	for _, n := range cold {
		if code := readCode(t, n); code != 403 {
			t.Errorf("%s 14 s after a cold start: GET apps %d, want 403", n.name, code)
		}
	}
	clk.Advance(time.Second)
	for _, n := range cold {
		if code := readCode(t, n); code != 200 {
			t.Errorf("%s 15 s after a cold start: GET apps %d, want 200", n.name, code)
		}
	}
}

// slowInstanceBody is an instance renewing every renewSecs.
func slowInstanceBody(app, id string, renewSecs int) string {
	return strings.Replace(instanceBody(app, id, 90), `"renewalIntervalInSecs":1`, `"renewalIntervalInSecs":`+strconv.Itoa(renewSecs), 1)
}

// TestNode_ColdStart_waitRules: a client declaring a longer renewal
// interval while reads are refused stretches the wait to its interval plus
// 5 s; an explicit muster.cold-start-wait-ms is a fixed wait whatever the
// clients declare.
func TestNode_ColdStart_waitRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		closed time.Duration // still refused at this time after the start
		open   time.Duration // open by then
	}{
		{"default: a client renewing every 60 s stretches 35 s to 65 s", nil, 64 * time.Second, 65 * time.Second},
		{"explicit wait wins", []string{"muster.cold-start-wait-ms=6000", "eureka.server.expected-client-renewal-interval-seconds=10"}, 5 * time.Second, 6 * time.Second},
		{"stretched at most to wait-time-in-ms-when-sync-empty", []string{"eureka.server.wait-time-in-ms-when-sync-empty=40000"}, 39 * time.Second, 40 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := registrytest.NewClock()
			start := clk.Now()
			// The configured peer never appears: a cold start.
			n := startClockedNode(t, clk, "cw", []string{"127.0.0.1:" + strconv.Itoa(freeGossipPort(t))},
				append([]string{"cluster.bind-port=0", "eureka.server.registry-sync-retries=1"}, tc.sets...)...)
			waitOpened(t, n)
			if n.startState != startCold {
				t.Fatalf("start state %s, want cold", n.startState)
			}
			clk.Advance(2 * time.Second)
			if code := call(t, "POST", n.URL()+"apps/SLOW", slowInstanceBody("SLOW", "s1", 60)); code != 204 {
				t.Fatalf("register during the wait: %d", code)
			}
			clk.Set(start.Add(tc.closed))
			if code := readCode(t, n); code != 403 {
				t.Errorf("at %s: GET apps %d, want 403", tc.closed, code)
			}
			clk.Set(start.Add(tc.open))
			if code := readCode(t, n); code != 200 {
				t.Errorf("at %s: GET apps %d, want 200", tc.open, code)
			}
		})
	}
}

// TestNode_ColdStart_refusedSnapshotAlone: a lone node (no peers) whose
// snapshot is refused — truncated, a flipped byte, empty — knows it had a
// registry and lost it. It sets the file aside (beside those refused
// before), holds reads for the cold-start wait by the registry's clock,
// and then serves what the clients registered again meanwhile, not an
// empty registry at once.
func TestNode_ColdStart_refusedSnapshotAlone(t *testing.T) {
	dir := t.TempDir()
	sets := []string{"cluster.enabled=false", "muster.data-dir=" + dir, "eureka.server.expected-client-renewal-interval-seconds=10"}
	start := func(clk *registrytest.Clock) *Node {
		t.Helper()
		s := mustLoad(t, "", nil, append([]string{"server.port=0", "server.address=127.0.0.1",
			"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1", "cluster.node-name=rs"}, sets...))
		n, err := New(s, testLogger(t), Options{Now: clk.Now})
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
	// A good snapshot of two instances, written at shutdown.
	first := start(registrytest.NewClock())
	for _, id := range []string{"o-1", "o-2"} {
		if code := call(t, "POST", first.URL()+"apps/ORDERS", instanceBody("ORDERS", id, 90)); code != 204 {
			t.Fatalf("register %s: %d", id, code)
		}
	}
	if err := first.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(persist.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x20

	for i, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated", good[:len(good)*2/3]},
		{"a flipped byte", flipped},
		{"empty", []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(persist.Path(dir), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			clk := registrytest.NewClock()
			n := start(clk)
			if n.startState != startCold {
				t.Fatalf("start state %q, want %q", n.startState, startCold)
			}
			if v := metricValue(t, n, `muster_snapshot_load{outcome="corrupt"}`); v != 1 {
				t.Fatalf("load outcome corrupt = %v", v)
			}
			if code := readCode(t, n); code != 403 {
				t.Fatalf("right after the start: GET apps %d, want 403 (the registry it had is lost)", code)
			}
			// A live client's heartbeat finds nothing; it registers again.
			if code := call(t, "PUT", n.URL()+"apps/ORDERS/o-1", ""); code != 404 {
				t.Fatalf("heartbeat of a lost instance: %d, want 404", code)
			}
			clk.Advance(2 * time.Second)
			if code := call(t, "POST", n.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
				t.Fatalf("re-register: %d", code)
			}
			clk.Advance(12 * time.Second) // 14 s of the 15 s wait (10 s interval + 5 s)
			if code := readCode(t, n); code != 403 {
				t.Fatalf("14 s after the start: GET apps %d, want 403", code)
			}
			clk.Advance(time.Second)
			code, body, err := httpGet(n.URL() + "apps/ORDERS")
			if err != nil || code != 200 || !strings.Contains(body, "<instanceId>o-1</instanceId>") || strings.Contains(body, "o-2") {
				t.Fatalf("15 s after the start: GET apps/ORDERS %d %v, want o-1 alone (re-registered)\n%s", code, err, body)
			}
			// Set aside beside the ones refused before, intact.
			kept, err := persist.Refused(dir)
			if err != nil || len(kept) != i+1 {
				t.Fatalf("refused snapshots kept: %v (%v), want %d", kept, err, i+1)
			}
			if aside, err := os.ReadFile(kept[len(kept)-1]); err != nil || !bytes.Equal(aside, tc.data) {
				t.Fatalf("the refused snapshot was not set aside intact: %v", err)
			}
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCluster_ColdStart_selfRegistrationsDoNotStretch (issue 42, symptom
// 4): three nodes that register themselves (Spring's register-with-eureka
// default, a 30 s renewal interval) start cold together, told that their
// clients renew every 2 s. Their own instances, registered here and
// replicated from the others, are not clients that must come back: reads
// open 2 s + the 5 s margin after the start by the registry's clock, not
// after the nodes' own 30 s + 5 s.
func TestCluster_ColdStart_selfRegistrationsDoNotStretch(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	clk := registrytest.NewClock()
	start := clk.Now()
	ports := []int{freeGossipPort(t), freeGossipPort(t), freeGossipPort(t)}
	nodes := make([]*Node, len(ports))
	var wg sync.WaitGroup
	for i := range nodes {
		var join []string
		for j, p := range ports {
			if j != i {
				join = append(join, "127.0.0.1:"+strconv.Itoa(p))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = startClockedNode(t, clk, "ss-"+strconv.Itoa(i), join,
				"eureka.client.register-with-eureka=true", "spring.application.name=muster-nodes",
				"cluster.bind-port="+strconv.Itoa(ports[i]), "eureka.server.expected-client-renewal-interval-seconds=2",
				"eureka.server.registry-sync-retries=3")
		}()
	}
	wg.Wait()
	waitOpened(t, nodes...)
	var cold []*Node
	for _, n := range nodes {
		if n.startState == startCold {
			cold = append(cold, n)
		}
	}
	if len(cold) == 0 {
		t.Fatalf("no node started cold: want a full-cluster cold start")
	}
	// Every node holds the three nodes' own instances: its own, and the
	// others' by replication (while its reads are still refused).
	waitFor(t, 20*time.Second, "every node holds the three self-registrations", func() bool {
		for _, n := range nodes {
			app, ok := n.reg.Snapshot().App("MUSTER-NODES")
			if !ok || len(app.Instances) != len(nodes) {
				return false
			}
		}
		return true
	})
	for _, n := range cold {
		t.Logf("%s: reads refused for %s after the start", n.name, n.reg.ReadsRefusedUntil().Sub(start))
		if got := n.reg.ReadsRefusedUntil().Sub(start); got != 7*time.Second {
			t.Errorf("%s: reads refused until start + %s, want 7 s (2 s interval + 5 s margin; the nodes' own 30 s does not count)", n.name, got)
		}
	}
	clk.Set(start.Add(6 * time.Second))
	for _, n := range cold {
		if code := readCode(t, n); code != 403 {
			t.Errorf("%s 6 s after a cold start: GET apps %d, want 403", n.name, code)
		}
	}
	clk.Set(start.Add(7 * time.Second))
	for _, n := range cold {
		if code := readCode(t, n); code != 200 {
			t.Errorf("%s 7 s after a cold start: GET apps %d, want 200", n.name, code)
		}
	}
}

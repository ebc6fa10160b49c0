package httpapi_test

// The hostile-input suite (issue 10): every case found by trying the node
// as a hostile or careless client would, reproduced through the real HTTP
// interface and shown fixed. Connection-level cases run a real
// http.Server (Server.HTTPServer, Server.LimitListener) on loopback;
// registry time runs on the injected clock.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// serveReal serves n's API with the production http.Server settings and
// connection limit on a loopback port, and returns its address.
func serveReal(t *testing.T, n *testNode) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := n.srv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(n.srv.LimitListener(ln))
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func metricLine(t *testing.T, n *testNode, prefix string) float64 {
	t.Helper()
	body := n.do(t, "GET", "/metrics", "").Body
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, prefix+" "), 64)
			return v
		}
	}
	t.Fatalf("/metrics lacks %s", prefix)
	return 0
}

// readResponseLine waits (at most within) for the server to answer on c
// and returns the status line, or "" if the connection closed without one.
func readResponseLine(c net.Conn, within time.Duration) (string, time.Duration) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(within))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), time.Since(start)
}

// Why: ten connections declaring Content-Length: 16777216 and sending one
// byte raised the RSS by 164 MB and kept it (the body buffer was reserved
// from the declared length), and a body that never came kept its
// connection open for minutes. Now 50 such connections hold what they sent,
// and every one is answered 408 and closed at the body deadline.
func TestHostile_slowBodiesHoldWhatTheySentAndAreClosed(t *testing.T) {
	const conns, deadline = 50, 1500 * time.Millisecond
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.BodyReadTimeout = deadline })
	addr := serveReal(t, n)
	before := heapInUse()

	var cs []net.Conn
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		path, length := "/eureka/peerreplication/batch", 16<<20 // the batch route accepts 16 MiB
		if i%10 == 9 {
			path, length = "/eureka/apps/SLOW", 100 // declares 100 bytes, sends none
		}
		first := "{"
		if length == 100 {
			first = ""
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, length, first)
		cs = append(cs, c)
	}
	// Give the handlers time to start reading (they block on the body).
	time.Sleep(deadline / 3)
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap growth with %d slow connections: %.1f MB (reserving the declared length would be %d MB)",
		conns, float64(grown)/(1<<20), conns*16)
	// Generous: ~30 KB per connection is expected (buffers, goroutine,
	// race detector shadow); reserving from Content-Length would be 16 MB each.
	if grown > 64<<20 {
		t.Fatalf("heap grew %d MB under %d slow connections, want < 64 MB", grown>>20, conns)
	}
	for i, c := range cs {
		line, took := readResponseLine(c, 10*deadline)
		if !strings.HasPrefix(line, "HTTP/1.1 408") {
			t.Fatalf("conn %d: answered %q after %s, want 408 at the body deadline", i, line, took)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			// Drain the rest of the answer; the connection must then close.
			_, err = io.Copy(io.Discard, c)
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("conn %d still open after its 408: %v", i, err)
			}
		}
	}
	if got := metricLine(t, n, `muster_limit_rejections_total{limit="body-read-timeout-ms"}`); got != conns {
		t.Errorf("body-read-timeout rejections = %v, want %d", got, conns)
	}
}

func waitUntil(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	testwait.True(t, within, "the condition", cond)
}

// floodBatch is a peer replication batch registering n instances of app
// with renewalIntervalInSecs=1, as the "Why" flood did (~250 bytes each).
func floodBatch(app string, from, n int) string {
	var b strings.Builder
	b.WriteString(`{"replicationList":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("f-%d", from+i)
		fmt.Fprintf(&b, `{"appName":%q,"id":%q,"status":"UP","action":"Register","instanceInfo":{"instanceId":%q,"hostName":"h-%s","app":%q,"ipAddr":"10.9.0.1","status":"UP","dataCenterInfo":{"name":"MyOwn"},"leaseInfo":{"renewalIntervalInSecs":1,"durationInSecs":90}}}`,
			app, id, id, id, app)
	}
	b.WriteString(`]}`)
	return b.String()
}

func batchStatuses(t *testing.T, body string) map[int]int {
	t.Helper()
	var resp struct {
		ResponseList []struct {
			StatusCode int `json:"statusCode"`
		} `json:"responseList"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("batch response: %v: %.200s", err, body)
	}
	out := map[int]int{}
	for _, r := range resp.ResponseList {
		out[r.StatusCode]++
	}
	return out
}

// Why: one 13 MB batch registered 50,000 instances declaring
// renewalIntervalInSecs=1; ~70 s later self-preservation was active with
// the EMERGENCY banner, for good. Now the flood never switches it on, and
// its leases are evicted once they expire, while the fleet is untouched.
func TestHostile_registrationFloodCannotSwitchOnSelfPreservation(t *testing.T) {
	n := newTestNode(t)
	fleet := make([]string, 20)
	for i := range fleet {
		fleet[i] = fmt.Sprintf("fleet-%d", i)
		mustRegisterInstance(t, n, "FLEET", fleet[i])
	}
	renewFleet := func() {
		for _, id := range fleet {
			if r := n.do(t, "PUT", "/eureka/apps/FLEET/"+id, ""); r.Code != 200 {
				t.Fatalf("heartbeat %s: %d", id, r.Code)
			}
		}
	}
	for range 4 {
		n.clock.Advance(30 * time.Second)
		renewFleet()
	}

	body := floodBatch("FLOOD", 0, 50_000)
	t.Logf("flood batch: %.1f MB", float64(len(body))/(1<<20))
	r := n.do(t, "POST", "/eureka/peerreplication/batch", body, "Content-Type", "application/json")
	if r.Code != 200 || batchStatuses(t, r.Body)[200] != 50_000 {
		t.Fatalf("flood batch: %d %v", r.Code, batchStatuses(t, r.Body))
	}
	evicted := 0
	for step := range 12 { // 6 minutes of the fleet renewing every 30 s
		n.clock.Advance(30 * time.Second)
		renewFleet()
		var st struct {
			SelfPreservation struct {
				Active   bool    `json:"active"`
				Unproven float64 `json:"unprovenRenewsPerMin"`
			} `json:"selfPreservation"`
		}
		if err := json.Unmarshal([]byte(n.do(t, "GET", "/admin/status", "").Body), &st); err != nil {
			t.Fatal(err)
		}
		if st.SelfPreservation.Active {
			t.Fatalf("step %d: self-preservation active after a registration flood", step)
		}
		if strings.Contains(n.do(t, "GET", "/", "").Body, "EMERGENCY") {
			t.Fatalf("step %d: EMERGENCY banner after a registration flood", step)
		}
		evicted += len(n.reg.EvictExpired())
	}
	if evicted != 50_000 || n.reg.Len() != len(fleet) {
		t.Fatalf("evicted %d, %d left; want the 50000 flooded evicted, the %d renewing kept", evicted, n.reg.Len(), len(fleet))
	}
}

func mustRegisterInstance(t *testing.T, n *testNode, app, id string) {
	t.Helper()
	body := strings.NewReplacer("host-a:orders:8080", id, `"app":"ORDERS"`, `"app":"`+app+`"`).Replace(springBody)
	if r := n.do(t, "POST", "/eureka/apps/"+app, body, jsonHeaders()...); r.Code != 204 {
		t.Fatalf("register %s/%s: %d %s", app, id, r.Code, r.Body)
	}
}

// Why: no limit on instances, metadata or names (50,000 instances in one
// request, 60,000 metadata keys → 204, 20 instances of 1 MB → 204, /apps
// grew to 23 MB). Now floods stop at the limits, each refusal names its
// key and is counted, and the node keeps serving heartbeats and fetches.
func TestHostile_floodsStopAtTheLimits(t *testing.T) {
	n := newTestNode(t, func(r *registry.Config, _ *httpapi.Config) {
		r.Limits.MaxInstances = 3000
		r.Limits.MaxInstancesPerApp = 2000
	})
	mustRegisterInstance(t, n, "LEGIT", "legit-1")

	r := n.do(t, "POST", "/eureka/peerreplication/batch", floodBatch("FLOOD", 0, 2500), "Content-Type", "application/json")
	if got := batchStatuses(t, r.Body); got[200] != 2000 || got[403] != 500 {
		t.Fatalf("2500 in one app: %v, want 2000 × 200 and 500 × 403 (max-instances-per-app)", got)
	}
	r = n.do(t, "POST", "/eureka/peerreplication/batch", floodBatch("FLOOD2", 0, 1500), "Content-Type", "application/json")
	if got := batchStatuses(t, r.Body); got[200] != 999 || got[503] != 501 {
		t.Fatalf("1500 more: %v, want 999 × 200 and 501 × 503 (max-instances)", got)
	}
	if n.reg.Len() != 3000 {
		t.Fatalf("Len = %d, want 3000", n.reg.Len())
	}
	// A client's own new registration now gets 503 naming the limit.
	body := strings.Replace(springBody, "host-a:orders:8080", "late", 1)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", body, jsonHeaders()...); r.Code != 503 || !strings.Contains(r.Reason(), "muster.max-instances") {
		t.Fatalf("registration at capacity: %d %q, want 503 naming muster.max-instances", r.Code, r.Reason())
	}
	// The node still serves heartbeats, re-registrations and fetches.
	if r := n.do(t, "PUT", "/eureka/apps/LEGIT/legit-1", ""); r.Code != 200 {
		t.Fatalf("heartbeat at capacity: %d", r.Code)
	}
	mustRegisterInstance(t, n, "LEGIT", "legit-1")
	if r := n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json"); r.Code != 200 || !strings.Contains(r.Body, "legit-1") {
		t.Fatalf("fetch at capacity: %d", r.Code)
	}

	// 60,000 metadata keys on one instance.
	var md strings.Builder
	for i := range 60_000 {
		if i > 0 {
			md.WriteByte(',')
		}
		fmt.Fprintf(&md, `"k%d":"v"`, i)
	}
	big := strings.Replace(springBody, `"metadata":{"management.port":"8080"}`, `"metadata":{`+md.String()+`}`, 1)
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", big, jsonHeaders()...); r.Code != 400 || !strings.Contains(r.Reason(), "muster.max-metadata-entries") {
		t.Fatalf("60000 metadata keys: %d %.200q", r.Code, r.Reason())
	}
	// Instances of ~1 MB: a metadata value, or a host name.
	huge := strings.Repeat("x", 900_000)
	for field, body := range map[string]string{
		"max-metadata-bytes": strings.Replace(springBody, `"management.port":"8080"`, `"blob":"`+huge+`"`, 1),
		"max-name-length":    strings.Replace(springBody, `"hostName":"host-a"`, `"hostName":"`+huge+`"`, 1),
	} {
		r := n.do(t, "POST", "/eureka/apps/ORDERS", body, jsonHeaders()...)
		if r.Code != 400 || !strings.Contains(r.Reason(), "muster."+field) || len(r.Body)+len(r.Reason()) > 400 {
			t.Fatalf("1 MB instance (%s): %d, %d-byte answer %.200q", field, r.Code, len(r.Reason()), r.Reason())
		}
	}
	if n.reg.Len() != 3000 {
		t.Fatalf("refused writes changed the registry: Len %d", n.reg.Len())
	}
	// /apps grew to 23 MB before; now it is what 3000 small instances make.
	if size := len(n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json").Body); size > 3000*1500 {
		t.Fatalf("/apps is %d bytes for 3000 instances", size)
	}
	for limit, want := range map[string]float64{"max-instances-per-app": 500, "max-instances": 502, "max-metadata-entries": 1, "max-metadata-bytes": 1, "max-name-length": 1} {
		if got := metricLine(t, n, `muster_limit_rejections_total{limit="`+limit+`"}`); got != want {
			t.Errorf("rejections{%s} = %v, want %v", limit, got, want)
		}
	}
}

// Muster.max-connections: beyond it new connections wait; open ones keep
// working, and the waiting one is served once a connection closes.
func TestHostile_maxConnectionsWaitsAndKeepsOpenOnesWorking(t *testing.T) {
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.MaxConnections = 2 })
	addr := serveReal(t, n)
	open := make([]net.Conn, 2)
	for i := range open {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open[i] = c
	}
	get := func(c net.Conn) string {
		fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err.Error()
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status
	}
	for _, c := range open {
		if s := get(c); !strings.HasPrefix(s, "200") {
			t.Fatalf("open connection: %s", s)
		}
	}
	third := make(chan string, 1)
	go func() {
		c, err := net.Dial("tcp", addr) // the kernel accepts; the server does not yet
		if err != nil {
			third <- err.Error()
			return
		}
		defer c.Close()
		third <- get(c)
	}()
	select {
	case s := <-third:
		t.Fatalf("third connection served at once (%s), want it to wait", s)
	case <-time.After(300 * time.Millisecond):
	}
	if s := get(open[0]); !strings.HasPrefix(s, "200") {
		t.Fatalf("open connection while one waits: %s", s)
	}
	open[1].Close()
	select {
	case s := <-third:
		if !strings.HasPrefix(s, "200") {
			t.Fatalf("third connection: %s", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("third connection never served after one closed")
	}
	if got := metricLine(t, n, `muster_limit_rejections_total{limit="max-connections"}`); got < 1 {
		t.Errorf("max-connections waits = %v, want ≥ 1", got)
	}
}

// Write deadlines move with progress: a reader that keeps reading gets a
// payload that takes many deadlines to send, and one that stops reading is
// dropped at the deadline instead of holding the connection and the
// payload forever.
func TestHostile_writeDeadlineFollowsProgress(t *testing.T) {
	const chunkTimeout = 2 * time.Second
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.WriteChunkTimeout = chunkTimeout })
	addr := serveReal(t, n)
	pad := strings.Repeat("p", 60_000)
	for i := range 300 { // ~18 MB of JSON: more than loopback's socket buffers
		in := registrytest.NewInstance("BIG", fmt.Sprintf("big-%d", i), registrytest.WithMetadata(map[string]string{"pad": pad}))
		if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(pause time.Duration, readEach int) (int, error) {
		return fetchSlowly(t, &net.Dialer{}, addr, pause, readEach)
	}
	full := len(n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json").Body)
	// Slow but honest: 4 MB per 600 ms, well over a chunk per deadline;
	// the whole takes longer than one deadline.
	start := time.Now()
	got, err := fetch(600*time.Millisecond, 4<<20)
	if err != nil || got != full {
		t.Fatalf("slow reader got %d of %d bytes in %s: %v", got, full, time.Since(start), err)
	}
	t.Logf("slow reader: %d bytes in %s (deadline per chunk %s)", got, time.Since(start).Round(time.Millisecond), chunkTimeout)
	// Stalled: reads nothing for three deadlines, then everything.
	got, err = fetch(3*chunkTimeout, 64<<20)
	if err == nil || got >= full {
		t.Fatalf("stalled reader got %d of %d bytes (%v); want it dropped at the write deadline", got, full, err)
	}
	t.Logf("stalled reader: dropped after %d bytes (%v)", got, err)
}

// Why: batches were capped at 250 items but not in bytes: 30 registrations
// of ~700 KB made a 413 at the peer (16 MiB limit) and the whole batch was
// dropped. Now the sender cuts batches below the receiver's limit, and an
// item the peer refuses for good is dropped alone, counted by reason, and
// logged at error level with its key under its own rate limit. Scaled down
// ten times (70 KB items, a 1.6 MB receiver limit) to keep the test quick
// under the race detector.
func TestHostile_replicationBatchesCappedInBytes(t *testing.T) {
	big := strings.Repeat("m", 70_000)
	const receiverLimit = 1_600_000
	run := func(t *testing.T, receiverMetadata int, senderCap int) (*testNode, replication.Counters, string) {
		n := newTestNode(t, func(r *registry.Config, h *httpapi.Config) {
			r.Limits.MaxMetadataBytes = receiverMetadata
			h.MaxBatchBodyBytes = receiverLimit
		})
		var logs testlog.Buffer
		// The sending node's registry takes the heavy instances (its own
		// metadata limit raised); its replicator sends them on.
		scfg := registry.DefaultConfig()
		scfg.Limits.MaxMetadataBytes = 1 << 20
		sender, err := registry.New(scfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg := replication.DefaultConfig()
		cfg.MaxBatchBytes = senderCap
		cfg.Transport = replicationtest.HTTPTransport(t, 10*time.Second)
		cfg.Store = sender
		cfg.Logger = zerolog.New(&logs)
		rep, err := replication.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// All 30 are in the stream before the sender starts, so they meet
		// the batcher together, as a burst does.
		rep.SetPeers([]replication.Peer{{Name: "b", URL: n.http.URL + "/eureka/"}})
		for i := range 30 {
			// lastDirtyTimestamp by the peer's clock, which refuses
			// timestamps from its future.
			in := registrytest.NewInstance("HEAVY", fmt.Sprintf("heavy-%d", i), registrytest.WithMetadata(map[string]string{"blob": big}),
				registrytest.WithDirty(n.clock.Now().UnixMilli()))
			if _, err := sender.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = rep.Run(ctx) }()
		waitUntil(t, 60*time.Second, func() bool {
			c := rep.Totals()
			return c.ItemsSent+c.Drops.Permanent+c.Drops.TooLarge >= 30 // each task ends in one of these
		})
		cancel()
		<-done
		return n, rep.Totals(), logs.String()
	}
	t.Run("capped batches all arrive", func(t *testing.T) {
		n, c, _ := run(t, 1<<20, receiverLimit/4*3)
		if n.reg.Len() != 30 || c.Drops.Total() != 0 || c.BatchesSent < 2 {
			t.Fatalf("peer holds %d of 30, drops %+v, batches %d", n.reg.Len(), c.Drops, c.BatchesSent)
		}
		t.Logf("30 × 70 KB in %d batches", c.BatchesSent)
	})
	t.Run("uncapped sender recovers from the 413", func(t *testing.T) {
		n, c, _ := run(t, 1<<20, 0)
		if n.reg.Len() != 30 || c.Drops.Total() != 0 || c.Retries == 0 {
			t.Fatalf("peer holds %d of 30, drops %+v, retries %d", n.reg.Len(), c.Drops, c.Retries)
		}
	})
	t.Run("refused items dropped alone and logged with key", func(t *testing.T) {
		n, c, logs := run(t, 64<<10, receiverLimit/4*3) // the default metadata limit
		if n.reg.Len() != 0 || c.Drops.Refused != 30 || c.Drops.Permanent != 0 {
			t.Fatalf("peer holds %d, drops %+v; want 30 refused", n.reg.Len(), c.Drops)
		}
		errorLines := 0
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "dropped for good") {
				errorLines++
				if !strings.Contains(line, `heavy-`) || !strings.Contains(line, `"reason":"refused"`) || !strings.Contains(line, `"status_code":400`) {
					t.Errorf("error line lacks key, reason or status: %s", line)
				}
			}
		}
		if errorLines != 1 {
			t.Fatalf("%d error lines for 30 refusals within one log interval, want 1 (rate-limited):\n%s", errorLines, logs)
		}
		// Counted by reason in the peer's metrics.
		n2 := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.Replication = fixedReplication{c} })
		if got := metricLine(t, n2, `muster_replication_drops_total{reason="refused"}`); got != 30 {
			t.Errorf("drops_total{refused} = %v, want 30", got)
		}
	})
}

type fixedReplication struct{ c replication.Counters }

func (f fixedReplication) Peers() []replication.PeerStats { return nil }

func (f fixedReplication) Totals() replication.Counters { return f.c }

// testlog.Buffer (auth_test.go) collects the sender's log lines.

// Why: syncUp read a peer's registry with no size cap. Now it reads at most
// MaxBodyBytes and fails the attempt beyond.
func TestHostile_syncUpReadCapped(t *testing.T) {
	src := newTestNode(t)
	for i := range 50 {
		mustRegisterInstance(t, src, "ORDERS", fmt.Sprintf("o-%d", i))
	}
	copyWith := func(limit int64) (replication.SyncResult, int) {
		rcfg := registry.DefaultConfig()
		reg, err := registry.New(rcfg)
		if err != nil {
			t.Fatal(err)
		}
		tr := replicationtest.HTTPTransport(t, 10*time.Second, func(c *replication.HTTPTransportConfig) { c.MaxSyncBodyBytes = limit })
		s, err := replication.NewSyncer(replication.SyncConfig{
			Store: reg, Transport: tr, Attempts: 1, Logger: zerolog.New(zerolog.NewTestWriter(t)),
			Candidates: func() []replication.Peer { return []replication.Peer{{Name: "src", URL: src.http.URL + "/eureka/"}} },
		})
		if err != nil {
			t.Fatal(err)
		}
		return s.Run(context.Background()), reg.Len()
	}
	if res, n := copyWith(10 << 10); res.Reached || n != 0 {
		t.Fatalf("10 KB cap on a ~60 KB registry: reached %v, copied %d; want the attempt failed", res.Reached, n)
	}
	if res, n := copyWith(replication.DefaultMaxSyncBodyBytes); !res.Reached || n != 50 {
		t.Fatalf("default cap: reached %v, copied %d; want 50", res.Reached, n)
	}
}

// fetchSlowly GETs the registry over a raw connection dialed with d and
// reads its body readEach bytes at a time, with pause before each read. It
// returns the bytes read; io.ErrUnexpectedEOF means the server cut the
// body.
func fetchSlowly(t *testing.T, d *net.Dialer, addr string, pause time.Duration, readEach int) (int, error) {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /eureka/apps HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0
	buf := make([]byte, 64<<10)
	for {
		time.Sleep(pause)
		for want := readEach; want > 0; {
			m, err := resp.Body.Read(buf[:min(len(buf), want)])
			total, want = total+m, want-m
			if err == io.EOF {
				return total, nil
			}
			if err != nil {
				return total, err
			}
		}
	}
}

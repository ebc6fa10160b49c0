package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- Anti-entropy ----
//
// Two nodes that know each other as static Muster peers
// (eureka.client.service-url), each reaching the other through a proxy of
// the bench's: the proxy counts the bytes on the wire (requests and
// answers, headers included) and the anti-entropy rounds (the root-only
// POST peerreplication/digest that opens each), and can cut the link.

// benchAEInterval is muster.anti-entropy-interval-ms of the two nodes:
// short, so that a window holds enough rounds for their CPU to stand out
// of the nodes' idle CPU; what a round costs does not depend on it.
const benchAEInterval = 100 * time.Millisecond

// benchPeerProxy forwards one node's calls to its peer.
type benchPeerProxy struct {
	srv    *http.Server
	addr   string
	target atomic.Pointer[url.URL]
	cut    atomic.Bool
	bytes  atomic.Int64 // on the upstream connections, both ways
	rounds atomic.Int64 // root-only digest requests
	asks   atomic.Int64 // digest requests naming apps, and copies requests
}

type benchCountingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c benchCountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c benchCountingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func newBenchPeerProxy() (*benchPeerProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &benchPeerProxy{addr: ln.Addr().String()}
	dial := (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(p.target.Load())
			r.Out.Host = r.In.Host
		},
		// A peer that has gone (the pair stopping) is a 502, not a log line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) },
		ErrorLog:     log.New(io.Discard, "", 0),
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return benchCountingConn{Conn: c, n: &p.bytes}, nil
			},
			MaxIdleConnsPerHost: 16,
			DisableCompression:  true,
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cut.Load() || p.target.Load() == nil {
			// A cut link: the connection goes without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			http.Error(w, "cut", http.StatusBadGateway)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "peerreplication/digest"):
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Apps []string `json:"apps"`
			}
			if json.Unmarshal(body, &req) == nil && len(req.Apps) == 0 {
				p.rounds.Add(1)
			} else {
				p.asks.Add(1)
			}
		case strings.HasSuffix(r.URL.Path, "peerreplication/copies"):
			p.asks.Add(1)
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *benchPeerProxy) point(api string) {
	p.target.Store(&url.URL{Scheme: "http", Host: api})
}

func (p *benchPeerProxy) close() { _ = p.srv.Close() }

// benchAEPair is two nodes peered through two proxies.
type benchAEPair struct {
	a, b       *benchChild
	toB, toA   *benchPeerProxy // A's calls to B, B's calls to A
	apps, size int
}

func (pr *benchAEPair) close() {
	pr.a.stop()
	pr.b.stop()
	pr.toA.close()
	pr.toB.close()
}

func (pr *benchAEPair) setCut(cut bool) {
	pr.toA.cut.Store(cut)
	pr.toB.cut.Store(cut)
}

// benchAESets are the settings of the anti-entropy nodes: one static peer
// (the proxy), no memberlist, no wait for an empty peer at start-up.
func benchAESets(peer string) []string {
	return []string{
		"eureka.client.service-url.defaultZone=http://" + peer + "/eureka/",
		fmt.Sprintf("muster.anti-entropy-interval-ms=%d", benchAEInterval.Milliseconds()),
		"eureka.server.registry-sync-retries=0",
		"eureka.server.wait-time-in-ms-when-sync-empty=1",
		"muster.cold-start-wait-ms=0",
		// Tasks queued for a cut peer expire quickly: the heal is then
		// anti-entropy's work (registrations may still be retried).
		"eureka.server.max-time-for-replication=1000",
	}
}

func benchSetArgs(sets []string) []string {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// startAEPair starts A and B and registers n fleet instances on A, which
// replicates them to B.
func (e antiEntropyBench) startAEPair(n int) (*benchAEPair, error) {
	toB, err := newBenchPeerProxy()
	if err != nil {
		return nil, err
	}
	toA, err := newBenchPeerProxy()
	if err != nil {
		toB.close()
		return nil, err
	}
	name := fmt.Sprintf("ae-%s", benchSize(n))
	a, err := e.startChild(name+"-a", "muster", benchSetArgs(benchAESets(toB.addr))...)
	if err != nil {
		return nil, err
	}
	toA.point(a.API)
	b, err := e.startChild(name+"-b", "muster", benchSetArgs(benchAESets(toA.addr))...)
	if err != nil {
		return nil, err
	}
	toB.point(b.API)
	pr := &benchAEPair{a: a, b: b, toA: toA, toB: toB, size: n, apps: (n + benchPerApp - 1) / benchPerApp}
	if _, err := e.registerFleet(a, 0, n); err != nil {
		pr.close()
		return nil, err
	}
	if err := benchWait(e.ctx, 5*time.Minute, fmt.Sprintf("B to hold the %d instances and the same root digest as A", n), pr.inSync); err != nil {
		pr.close()
		return nil, err
	}
	return pr, nil
}

// benchRoot asks a node for its root digest, as a peer does.
func benchRoot(c *benchChild) (uint64, error) {
	code, body, err := c.api(http.MethodPost, "/eureka/peerreplication/digest", []byte(`{"root":0}`), "Content-Type", "application/json")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("%s: POST peerreplication/digest: %d %s", c.name, code, bytes.TrimSpace(body))
	}
	var reply struct {
		Root uint64 `json:"root"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		return 0, err
	}
	return reply.Root, nil
}

func (pr *benchAEPair) inSync() bool {
	ra, errA := benchRoot(pr.a)
	rb, errB := benchRoot(pr.b)
	return errA == nil && errB == nil && ra == rb
}

// antiEntropyBench is the antientropy scenario (bench --only antientropy): its methods share
// the run's environment, benchEnv, and its helpers.
type antiEntropyBench struct{ *benchEnv }

func (e antiEntropyBench) run() error {
	sizes := []int{e.fleetN, e.bigN}
	window := 15 * time.Second
	if e.quick {
		sizes, window = []int{e.fleetN}, 5*time.Second
	}
	if e.smoke {
		window = 1500 * time.Millisecond
	}
	for i, n := range sizes {
		pr, err := e.startAEPair(n)
		if err != nil {
			return err
		}
		err = e.aeInSync(pr, window)
		if err == nil && i == 0 {
			err = e.aeConverge(pr, benchPick(e.smoke, 1000, 50))
		}
		pr.close()
		if err != nil {
			return err
		}
	}
	return nil
}

// aeInSync measures the rounds of two nodes in sync: bytes on the wire,
// and CPU of both nodes (asker and answerer) per round. The CPU of the
// rounds is small beside what the two nodes use anyway (timers, GC, the
// console's background rebuilds of a large registry), and that comes in
// bursts: windows with rounds alternate with windows of the same length
// with the link cut (a round that cannot connect costs a refused dial),
// and the quietest of each kind are compared.
func (e antiEntropyBench) aeInSync(pr *benchAEPair, window time.Duration) error {
	time.Sleep(benchPick(e.smoke, 5*time.Second, time.Second)) // replication idle, the fleet's garbage collected
	const windows = 3
	part := window / windows
	var wire, rounds, asks int64
	busy, idle := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	var busyRounds int64
	for i := 0; i < windows; i++ {
		bytes0 := pr.toA.bytes.Load() + pr.toB.bytes.Load()
		rounds0 := pr.toA.rounds.Load() + pr.toB.rounds.Load()
		asks0 := pr.toA.asks.Load() + pr.toB.asks.Load()
		cpu0 := pr.a.cpu() + pr.b.cpu()
		time.Sleep(part)
		cpu := pr.a.cpu() + pr.b.cpu() - cpu0
		r := pr.toA.rounds.Load() + pr.toB.rounds.Load() - rounds0
		wire += pr.toA.bytes.Load() + pr.toB.bytes.Load() - bytes0
		asks += pr.toA.asks.Load() + pr.toB.asks.Load() - asks0
		rounds += r
		if cpu < busy {
			busy, busyRounds = cpu, r
		}

		pr.setCut(true)
		cpu0 = pr.a.cpu() + pr.b.cpu()
		var profiled <-chan error
		if e.profileDir != "" && i == 0 {
			profiled = pr.a.profile(part, filepath.Join(e.profileDir, "antientropy-cut-"+benchSize(pr.size)+".pprof"))
		}
		time.Sleep(part)
		idle = min(idle, pr.a.cpu()+pr.b.cpu()-cpu0)
		pr.setCut(false)
		if profiled != nil {
			if err := <-profiled; err != nil {
				e.logf("   profile of A with the link cut: %v", err)
			}
		}
	}
	if rounds == 0 || busyRounds == 0 {
		return fmt.Errorf("no anti-entropy round between the two %d-instance nodes in %s (muster.anti-entropy-interval-ms=%d)", pr.size, window, benchAEInterval.Milliseconds())
	}

	size := benchSize(pr.size)
	perRound := float64(wire) / float64(rounds)
	note := fmt.Sprintf("%d apps; %d rounds in %s (both directions, every %s), %d of them went past the root", pr.apps, rounds, window, benchAEInterval, asks)
	e.add(benchRow{Scenario: "antientropy", Figure: "in sync, " + size + ": bytes per round", Value: perRound, Unit: "B",
		Target: "< 2 KB (roots only, not O(instances))", Met: benchBool(perRound < 2048 && asks == 0), Note: note})
	cpuPer := ms(max(busy-idle, 0)) / float64(busyRounds)
	note = fmt.Sprintf("both nodes: %.0f ms CPU in the quietest %s with rounds (%d of them) less %.0f ms in the quietest as long with the link cut, of %d each",
		ms(busy), part, busyRounds, ms(idle), windows)
	if busy <= idle {
		note += "; within the noise of the idle CPU: see the CPU to answer a round"
	}
	e.add(benchRow{Scenario: "antientropy", Figure: "in sync, " + size + ": CPU per round", Value: cpuPer, Unit: "ms",
		Target: "< 1 ms", Met: benchBool(cpuPer < 1), Note: note})
	return e.aeAnswerCPU(pr)
}

// aeAnswerCPU drives root-only digest requests, as a peer's round opens,
// at B with the link cut (no rounds of the nodes' own meanwhile): B's CPU
// per answer, measured over many, stands well above B's idle CPU.
func (e antiEntropyBench) aeAnswerCPU(pr *benchAEPair) error {
	n := benchPick(e.smoke, 20_000, 500)
	root, err := benchRoot(pr.a)
	if err != nil {
		return err
	}
	body := []byte(fmt.Sprintf(`{"root":%d}`, root))
	pr.setCut(true)
	defer pr.setCut(false)
	cpu0 := pr.b.cpu()
	res, err := e.load(pr.b, loadgen.Config{Total: uint64(n), Concurrency: 4, Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPost, Path: "/eureka/peerreplication/digest", Header: "Content-Type: application/json\r\n", Body: body}
	}})
	cpu := pr.b.cpu() - cpu0
	if err != nil {
		return err
	}
	if res.NotOK() > 0 {
		return fmt.Errorf("root digest requests to B: %d of %d failed (statuses %v, first error %v)", res.NotOK(), n, res.Status, res.FirstErr)
	}
	per := float64(cpu) / float64(time.Microsecond) / float64(n)
	e.add(benchRow{Scenario: "antientropy", Figure: "in sync, " + benchSize(pr.size) + ": CPU to answer a round", Value: per, Unit: "µs",
		Note: fmt.Sprintf("%d root-only digest requests driven at B (4 conns, %.0f/s), B's CPU ÷ requests; the asking side's part is the same exchange from the client end", n, res.RPS())})
	return nil
}

// aeConverge cuts the link, makes changes on A alone (registrations,
// status overrides and cancels), heals, and times until both roots match.
func (e antiEntropyBench) aeConverge(pr *benchAEPair, changes int) error {
	pr.setCut(true)
	regs, outs := changes*2/5, changes*3/10
	cancels := changes - regs - outs
	if _, err := e.registerFleet(pr.a, pr.size, pr.size+regs); err != nil {
		return err
	}
	f := benchFleetOf(pr.size + regs)
	for i := 0; i < outs; i++ {
		if code, _, err := pr.a.api(http.MethodPut, f.down[i], nil); err != nil || code != http.StatusOK {
			return fmt.Errorf("status override %d on A: %d %v", i, code, err)
		}
	}
	for i := outs; i < outs+cancels; i++ {
		path := "/eureka/apps/" + benchAppName(i) + "/" + benchInstanceID(i)
		if code, _, err := pr.a.api(http.MethodDelete, path, nil); err != nil || code != http.StatusOK {
			return fmt.Errorf("cancel %d on A: %d %v", i, code, err)
		}
	}
	// Let what A queued for B expire (max-time-for-replication 1 s) and
	// B's rounds fail.
	time.Sleep(3 * time.Second)
	if pr.inSync() {
		return fmt.Errorf("A and B already agree after %d changes on A behind a cut link", changes)
	}
	repairs0 := pr.b.metricSum("muster_anti_entropy_repairs_total") + pr.a.metricSum("muster_anti_entropy_repairs_total")
	asks0 := pr.toA.asks.Load() + pr.toB.asks.Load()
	bytes0 := pr.toA.bytes.Load() + pr.toB.bytes.Load()
	t0 := time.Now()
	pr.setCut(false)
	var took time.Duration
	if err := benchWait(e.ctx, time.Minute, "A and B to agree again", func() bool {
		ok := pr.inSync()
		took = time.Since(t0)
		return ok
	}); err != nil {
		return err
	}
	repairs := pr.b.metricSum("muster_anti_entropy_repairs_total") + pr.a.metricSum("muster_anti_entropy_repairs_total") - repairs0
	wire := pr.toA.bytes.Load() + pr.toB.bytes.Load() - bytes0
	// The bound: the next round (at most 1.2 intervals away, jittered)
	// and the round itself, which fetches the 1,000 copies.
	target := time.Second
	e.add(benchRow{Scenario: "antientropy", Figure: fmt.Sprintf("%d divergent of %s: heal → same root digest", changes, benchSize(pr.size)), Value: ms(took), Unit: "ms",
		Target: "< 1 s", Met: benchBool(took < target),
		Note: fmt.Sprintf("%d registrations, %d OUT_OF_SERVICE, %d cancels on A behind a cut link; rounds every %s; %.0f anti-entropy repairs, %d narrowing requests, %.0f KB on the wire until equal",
			regs, outs, cancels, benchAEInterval, repairs, pr.toA.asks.Load()+pr.toB.asks.Load()-asks0, float64(wire)/1024)})
	return nil
}

// metricSum adds up every sample of a metric, whatever its labels.
func (c *benchChild) metricSum(name string) float64 {
	resp, err := benchCtl.Get("http://" + c.API + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			if i := strings.LastIndexByte(rest, ' '); i >= 0 {
				v, _ := strconv.ParseFloat(rest[i+1:], 64)
				sum += v
			}
		}
	}
	return sum
}

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/tools/loadgen"
)

// benchBigN is the large registry size (fetch, memory).
const benchBigN = 100_000

// benchFleet holds the requests of the first n fleet instances, built once.
type benchFleet struct {
	bodies   [][]byte // register bodies
	regPaths []string // POST paths
	hbPaths  []string // heartbeat paths
	down, up []string // status override paths
}

var benchFleetCache benchFleet

func benchFleetOf(n int) *benchFleet {
	f := &benchFleetCache
	for i := len(f.bodies); i < n; i++ {
		f.bodies = append(f.bodies, benchRegisterBody(i))
		f.regPaths = append(f.regPaths, "/eureka/apps/"+benchAppName(i))
		f.hbPaths = append(f.hbPaths, benchHeartbeatPath(i))
		f.down = append(f.down, benchStatusPath(i, "DOWN"))
		f.up = append(f.up, benchStatusPath(i, "UP"))
	}
	return f
}

func (f *benchFleet) register(i int) loadgen.Request {
	return loadgen.Request{Method: http.MethodPost, Path: f.regPaths[i], Header: benchJSONBodyHeaders, Body: f.bodies[i]}
}

func (e *benchEnv) load(c *benchChild, cfg loadgen.Config) (loadgen.Result, error) {
	cfg.Addr = c.API
	cfg.Client = e.client
	if c.clientTLS != nil {
		cfg.TLS = c.clientTLS
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = e.conc
	}
	return loadgen.Run(e.ctx, cfg)
}

// registerFleet registers fleet instances [from, to) on c, 64 at a time.
func (e *benchEnv) registerFleet(c *benchChild, from, to int) (loadgen.Result, error) {
	f := benchFleetOf(to)
	res, err := e.load(c, loadgen.Config{Total: uint64(to - from), Next: func(w int, seq uint64) loadgen.Request {
		return f.register(from + int(seq))
	}})
	if err != nil {
		return res, err
	}
	if res.NotOK() > 0 {
		return res, fmt.Errorf("registering %d instances on %s: %d failed (statuses %v, first error %v)", to-from, c.name, res.NotOK(), res.Status, res.FirstErr)
	}
	return res, nil
}

// benchSide is one server's aggregate over the rounds of a comparison.
type benchSide struct {
	res      loadgen.Result
	cpu      time.Duration // the server's CPU time during the measured rounds
	roundRPS []float64
}

func (s *benchSide) add(r loadgen.Result, cpu time.Duration) {
	if s.res.Latency == nil {
		s.res = loadgen.Result{Status: map[int]uint64{}, Latency: loadgen.NewHistogram()}
	}
	s.res.Requests += r.Requests
	s.res.Errors += r.Errors
	s.res.BodyBytes += r.BodyBytes
	s.res.Elapsed += r.Elapsed
	s.res.Latency.Merge(r.Latency)
	for k, v := range r.Status {
		s.res.Status[k] += v
	}
	if s.res.FirstErr == nil {
		s.res.FirstErr = r.FirstErr
	}
	s.cpu += cpu
	s.roundRPS = append(s.roundRPS, r.RPS())
}

// cpuPerReq is server CPU µs per answered request.
func (s *benchSide) cpuPerReq() float64 {
	if s.res.Requests == 0 {
		return 0
	}
	return float64(s.cpu.Microseconds()) / float64(s.res.Requests)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// compare drives mu and bare with the same requests: a warm-up of each,
// then e.rounds rounds that alternate which goes first, so drift on a
// noisy machine hits both alike. around, if set, runs around every run
// against mu (background work such as churn) and returns its stop func.
func (e *benchEnv) compare(mu, bare *benchChild, cfg loadgen.Config, around func() func()) (m, b benchSide, err error) {
	return e.compareWith(mu, bare, func(c *benchChild, d time.Duration) (loadgen.Result, error) {
		cfg := cfg
		cfg.Duration = d
		return e.load(c, cfg)
	}, around)
}

// compareWith is compare with the load of one run made by load (HTTP
// requests, or another protocol such as DNS).
func (e *benchEnv) compareWith(mu, bare *benchChild, load func(c *benchChild, d time.Duration) (loadgen.Result, error), around func() func()) (m, b benchSide, err error) {
	runOne := func(c *benchChild, d time.Duration) (loadgen.Result, time.Duration, error) {
		var stop func()
		if c == mu && around != nil {
			stop = around()
		}
		cpu0 := c.cpu()
		res, err := load(c, d)
		cpu := c.cpu() - cpu0
		if stop != nil {
			stop()
		}
		return res, cpu, err
	}
	for _, c := range []*benchChild{bare, mu} {
		if _, _, err := runOne(c, e.warmup); err != nil {
			return m, b, err
		}
	}
	for r := 0; r < e.rounds; r++ {
		order := []*benchChild{mu, bare}
		if r%2 == 1 {
			order = []*benchChild{bare, mu}
		}
		for _, c := range order {
			res, cpu, err := runOne(c, e.dur)
			if err != nil {
				return m, b, err
			}
			if c == mu {
				m.add(res, cpu)
			} else {
				b.add(res, cpu)
			}
		}
	}
	return m, b, nil
}

func roundRatios(m, b benchSide) string {
	var parts []string
	for i := range min(len(m.roundRPS), len(b.roundRPS)) {
		if b.roundRPS[i] > 0 {
			parts = append(parts, fmt.Sprintf("%.2f", m.roundRPS[i]/b.roundRPS[i]))
		}
	}
	return "per round " + strings.Join(parts, ", ")
}

// addThroughput adds the usual rows of a comparison: rate, latencies, CPU
// per request and failures.
func (e *benchEnv) addThroughput(scenario, what string, m, b benchSide, targetRatio float64) {
	ratio := m.res.RPS() / b.res.RPS()
	var met *bool
	target := ""
	if targetRatio > 0 {
		met = benchBool(ratio >= targetRatio)
		target = fmt.Sprintf("≥ %.1f× ceiling", targetRatio)
	}
	e.addCompared(scenario, what+"/s", m.res.RPS(), b.res.RPS(), "req/s", target, met, roundRatios(m, b))
	e.addCompared(scenario, what+" latency p50", ms(m.res.Latency.Quantile(0.5)), ms(b.res.Latency.Quantile(0.5)), "ms", "", nil, "")
	e.addCompared(scenario, what+" latency p99", ms(m.res.Latency.Quantile(0.99)), ms(b.res.Latency.Quantile(0.99)), "ms", "", nil,
		fmt.Sprintf("max %.1f ms", ms(m.res.Latency.Max())))
	e.addCompared(scenario, "server CPU per request", m.cpuPerReq(), b.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process")
	if bad := m.res.NotOK(); bad > 0 {
		e.add(benchRow{Scenario: scenario, Figure: "failed requests", Value: float64(bad), Target: "0", Met: benchBool(false),
			Note: fmt.Sprintf("statuses %v, first error %v", m.res.Status, m.res.FirstErr)})
	}
}

// profileDuring saves a CPU profile of c while cfg runs against it.
func (e *benchEnv) profileDuring(c *benchChild, name string, cfg loadgen.Config) error {
	if e.profileDir == "" {
		return nil
	}
	d := 5 * time.Second
	path := filepath.Join(e.profileDir, name+".cpu.pprof")
	done := c.profile(d, path)
	if cfg.Total == 0 {
		cfg.Duration = d + 500*time.Millisecond
	}
	if _, err := e.load(c, cfg); err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	e.logf("   CPU profile of %s under load: %s", c.name, path)
	return nil
}

// ---- 1. Heartbeats ----

// heartbeatBench is the heartbeat scenario (bench --only heartbeat): its methods share
// the run's environment, benchEnv, and its helpers.
type heartbeatBench struct{ *benchEnv }

func (e heartbeatBench) run() error {
	n := e.fleetN
	mu, err := e.startChild("heartbeat-muster", "muster")
	if err != nil {
		return err
	}
	bare, err := e.startChild("heartbeat-bare", "bare")
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(mu, 0, n); err != nil {
		return err
	}
	f := benchFleetOf(n)
	cfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(n)], Header: benchClientHeaders}
	}}
	m, b, err := e.compare(mu, bare, cfg, nil)
	if err != nil {
		return err
	}
	e.addThroughput("heartbeat", fmt.Sprintf("renewals (%s instances, 64 conns)", benchSize(n)), m, b, 0.7)
	rps := m.res.RPS()
	e.add(benchRow{Scenario: "heartbeat", Figure: "vs Consul 1.16 TTL passes, 100 services", Value: rps / 10_000, Unit: "×",
		Note: fmt.Sprintf("orientation only: Consul ~10 000/s; Muster %.0f/s", rps)})
	e.add(benchRow{Scenario: "heartbeat", Figure: "vs Consul 1.16 TTL passes, 10 000 services", Value: rps / 250, Unit: "×",
		Note: fmt.Sprintf("orientation only: Consul ~130–250/s, i.e. %.0f–%.0f× here", rps/250, rps/130)})
	if err := e.heartbeatAuth(mu, n); err != nil {
		return err
	}
	if err := e.heartbeatTLS(mu, n); err != nil {
		return err
	}
	return e.profileDuring(mu, "heartbeat", cfg)
}

// ---- 2. Full fetch ----

func benchGunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

const benchFetchHeaders = "Accept: application/json\r\nAccept-Encoding: gzip\r\nDiscoveryIdentity-Name: DefaultClient\r\n" +
	"DiscoveryIdentity-Version: 1.4\r\nDiscoveryIdentity-Id: 10.0.0.1\r\nUser-Agent: Java-EurekaClient/v1.10.17\r\n"

var benchFetchHeaderPairs = []string{"Accept", "application/json", "Accept-Encoding", "gzip"}

// benchFetchXMLHeaders ask for gzip XML, as fargo and Prometheus's Eureka
// discovery do.
const benchFetchXMLHeaders = "Accept: application/xml\r\nAccept-Encoding: gzip\r\nUser-Agent: Prometheus/2.53.0\r\n"

var benchFetchXMLHeaderPairs = []string{"Accept", "application/xml", "Accept-Encoding", "gzip"}

// newFetchNode starts a node with n instances whose delta queue has been
// pruned (retention 3 s), so a rebuild costs what it costs in a steady
// state rather than right after a mass registration.
func (e *benchEnv) newFetchNode(name string, n int) (*benchChild, proccontrol.Mem, error) {
	c, err := e.startChild(name, "muster",
		"--set", "eureka.server.retention-time-in-m-s-in-delta-queue=3000",
		"--set", "eureka.server.delta-retention-timer-interval-in-ms=500")
	if err != nil {
		return nil, proccontrol.Mem{}, err
	}
	empty, err := c.mem(true)
	if err != nil {
		return nil, empty, err
	}
	t0 := time.Now()
	res, err := e.registerFleet(c, 0, n)
	if err != nil {
		return nil, empty, err
	}
	e.logf("   registered %d instances on %s in %s (%.0f/s)", n, name, time.Since(t0).Round(time.Millisecond), res.RPS())
	time.Sleep(4 * time.Second) // retention 3 s + a pruning run
	return c, empty, nil
}

// bigNode is the shared 100k node; bigEmpty is its heap before registering.
func (e *benchEnv) bigNode() (*benchChild, proccontrol.Mem, error) {
	if e.big != nil {
		return e.big, e.bigEmpty, nil
	}
	c, empty, err := e.newFetchNode("big-muster", e.bigN)
	if err != nil {
		return nil, empty, err
	}
	e.big, e.bigEmpty = c, empty
	return c, empty, nil
}

// fetchBench is the fetch scenario (bench --only fetch): its methods share
// the run's environment, benchEnv, and its helpers.
type fetchBench struct{ *benchEnv }

func (e fetchBench) run() error {
	bare, err := e.startChild("fetch-bare", "bare")
	if err != nil {
		return err
	}
	for _, n := range e.fetchSizes {
		if err := e.fetchAt(bare, n); err != nil {
			return err
		}
	}
	return nil
}

func (e fetchBench) fetchAt(bare *benchChild, n int) error {
	label := benchSize(n)
	var mu *benchChild
	var err error
	if n == e.bigN {
		mu, _, err = e.bigNode()
	} else {
		mu, _, err = e.newFetchNode("fetch-muster-"+label, n)
	}
	if err != nil {
		return err
	}
	code, gz, err := mu.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...)
	if err != nil || code != 200 {
		return fmt.Errorf("GET /eureka/apps: %d %v", code, err)
	}
	raw, err := benchGunzip(gz)
	if err != nil {
		return fmt.Errorf("full fetch is not gzip: %w", err)
	}
	if _, err := bare.ctl("POST", "/body?path=/eureka/apps", gz, "Content-Type", "application/json", "X-Content-Encoding", "gzip"); err != nil {
		return err
	}
	if code, got, err := bare.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...); err != nil || code != 200 || !bytes.Equal(got, gz) {
		return fmt.Errorf("bare server does not serve the same bytes: %d %v", code, err)
	}
	sc := "fetch " + label
	e.add(benchRow{Scenario: sc, Figure: "gzip bytes per instance on the wire", Value: float64(len(gz)) / float64(n), Unit: "B",
		Note: fmt.Sprintf("%.1f MB per response; %.0f B/instance uncompressed JSON", float64(len(gz))/1e6, float64(len(raw))/float64(n))})

	cfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: benchFetchHeaders}
	}}
	m, b, err := e.compare(mu, bare, cfg, nil)
	if err != nil {
		return err
	}
	e.addThroughput(sc, "full fetches (gzip JSON)", m, b, 0.8)
	e.addCompared(sc, "wire throughput", float64(m.res.BodyBytes)/m.res.Elapsed.Seconds()/1e6, float64(b.res.BodyBytes)/b.res.Elapsed.Seconds()/1e6, "MB/s", "", nil, "")

	// XML: the same registry in the other format (Prometheus and fargo read
	// XML), against the ceiling serving the same XML bytes.
	code, gzXML, err := mu.api("GET", "/eureka/apps", nil, benchFetchXMLHeaderPairs...)
	if err != nil || code != 200 {
		return fmt.Errorf("GET /eureka/apps (XML): %d %v", code, err)
	}
	if _, err := benchGunzip(gzXML); err != nil {
		return fmt.Errorf("XML full fetch is not gzip: %w", err)
	}
	if _, err := bare.ctl("POST", "/body?path=/eureka/apps", gzXML, "Content-Type", "application/xml", "X-Content-Encoding", "gzip"); err != nil {
		return err
	}
	cfgXML := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: benchFetchXMLHeaders}
	}}
	mx, bx, err := e.compare(mu, bare, cfgXML, nil)
	if err != nil {
		return err
	}
	e.addCompared(sc, "full fetches (gzip XML)/s", mx.res.RPS(), bx.res.RPS(), "req/s", "≥ 0.8× ceiling", benchBool(mx.res.RPS()/bx.res.RPS() >= 0.8),
		fmt.Sprintf("%s; %.0f B/instance gzip XML", roundRatios(mx, bx), float64(len(gzXML))/float64(n)))
	e.addCompared(sc, "server CPU per XML fetch", mx.cpuPerReq(), bx.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process")

	// The first GET after one change (a status change in a 50-instance
	// app) pays for the new snapshot, that app's piece and the chunk it
	// sits in; every other app's piece is reused. Timed from the client:
	// the figure includes sending the whole response, which the same GET
	// unchanged costs too.
	reps := 5
	if e.quick {
		reps = 3
	}
	var profDone <-chan error
	if e.profileDir != "" {
		profDone = mu.profile(5*time.Second, filepath.Join(e.profileDir, "rebuild-"+label+".cpu.pprof"))
		time.Sleep(100 * time.Millisecond)
	}
	k := 0
	for _, format := range []struct {
		name string
		req  loadgen.Request
	}{{"gzip JSON", cfg.Next(0, 0)}, {"gzip XML", cfgXML.Next(0, 0)}} {
		cached, rebuild, err := timeAroundChanges(mu, reps, &k, func() (time.Duration, error) { return e.timeOne(mu, format.req) })
		if err != nil {
			return err
		}
		med := rebuild[len(rebuild)/2]
		e.add(benchRow{Scenario: sc, Figure: "first " + format.name + " GET after one change, median", Value: ms(med), Unit: "ms",
			Target: "≤ 5 ms", Met: benchBool(med <= 5*time.Millisecond),
			Note: fmt.Sprintf("same GET unchanged: %.1f ms; max after a change %.1f ms of %d", ms(cached[len(cached)/2]), ms(rebuild[len(rebuild)-1]), reps)})
	}
	if k%2 == 1 { // leave the toggled instance UP
		if err := benchToggle(mu, k); err != nil {
			return err
		}
		k++
	}
	if profDone != nil {
		if err := <-profDone; err != nil {
			return err
		}
	}

	// 64 concurrent GETs right after a change: how many encodings?
	const enc = "muster_payload_encodings_total"
	var maxBuilds float64
	var waited []time.Duration
	for k := 0; k < 3; k++ {
		if err := benchToggle(mu, k); err != nil {
			return err
		}
		before := mu.metric(enc)
		res, err := e.load(mu, loadgen.Config{Concurrency: 64, Total: 64, Next: cfg.Next})
		if err != nil {
			return err
		}
		if res.OK() != 64 {
			return fmt.Errorf("64 concurrent GETs: %d ok (%v)", res.OK(), res.Status)
		}
		maxBuilds = max(maxBuilds, mu.metric(enc)-before)
		waited = append(waited, res.Latency.Quantile(0.5), res.Latency.Max())
	}
	e.add(benchRow{Scenario: sc, Figure: "encodings for 64 concurrent GETs after a change", Value: maxBuilds,
		Target: "1 (the changed app's gzip JSON piece)", Met: benchBool(maxBuilds <= 1),
		Note: fmt.Sprintf("worst of 3; p50/max latency of the 64: %s", benchDurs(waited))})
	return e.profileDuring(mu, "fetch-"+label, cfg)
}

// timeAroundChanges measures reps times: once with the registry as it is,
// then again right after one status change (benchToggle k, then k+1, …),
// and returns both series sorted. *k counts the toggles, so the caller
// can leave the toggled instance as it found it.
func timeAroundChanges(mu *benchChild, reps int, k *int, measure func() (time.Duration, error)) (unchanged, afterChange []time.Duration, err error) {
	for range reps {
		d, err := measure()
		if err != nil {
			return nil, nil, err
		}
		unchanged = append(unchanged, d)
		if err := benchToggle(mu, *k); err != nil {
			return nil, nil, err
		}
		*k++
		if d, err = measure(); err != nil {
			return nil, nil, err
		}
		afterChange = append(afterChange, d)
	}
	slices.Sort(unchanged)
	slices.Sort(afterChange)
	return unchanged, afterChange, nil
}

// timeOne sends one request with the load generator's client (body
// discarded, no buffers to grow) and returns its latency.
func (e *benchEnv) timeOne(c *benchChild, req loadgen.Request) (time.Duration, error) {
	res, err := e.load(c, loadgen.Config{Concurrency: 1, Total: 1, Next: func(int, uint64) loadgen.Request { return req }})
	if err != nil {
		return 0, err
	}
	if res.OK() != 1 {
		return 0, fmt.Errorf("%s %s: %v %v", req.Method, req.Path, res.Status, res.FirstErr)
	}
	return res.Latency.Max(), nil
}

func benchDurs(ds []time.Duration) string {
	var parts []string
	for i := 0; i+1 < len(ds); i += 2 {
		parts = append(parts, fmt.Sprintf("%.0f/%.0f ms", ms(ds[i]), ms(ds[i+1])))
	}
	return strings.Join(parts, ", ")
}

// benchToggle changes the status of fleet instance k: DOWN on even k
// visits, UP on odd ones (a status override, replicated like any change).
func benchToggle(c *benchChild, k int) error {
	i := k / 2
	path := benchStatusPath(i, "DOWN")
	if k%2 == 1 {
		path = benchStatusPath(i, "UP")
	}
	code, body, err := c.api("PUT", path, nil)
	if err != nil || code != 200 {
		return fmt.Errorf("PUT %s: %d %s %v", path, code, body, err)
	}
	return nil
}

// ---- 3. Delta under churn ----

// deltaBench is the delta scenario (bench --only delta): its methods share
// the run's environment, benchEnv, and its helpers.
type deltaBench struct{ *benchEnv }

func (e deltaBench) run() error {
	n := e.fleetN
	mu, err := e.startChild("delta-muster", "muster")
	if err != nil {
		return err
	}
	bare, err := e.startChild("delta-bare", "bare")
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(mu, 0, n); err != nil {
		return err
	}
	f := benchFleetOf(n)
	flips := make([]atomic.Uint32, n)
	change := func(seq uint64) loadgen.Request {
		i := int(benchMix(seq) % uint64(n))
		if flips[i].Add(1)%2 == 1 {
			return loadgen.Request{Method: http.MethodPut, Path: f.down[i], Header: benchClientHeaders}
		}
		return loadgen.Request{Method: http.MethodPut, Path: f.up[i], Header: benchClientHeaders}
	}
	// Steady state: the delta keeps 180 s of changes; at 1 % per second
	// that is 1.8 n changes, which prefill puts there at once.
	var seq atomic.Uint64
	prefill := uint64(n * 18 / 10)
	if res, err := e.load(mu, loadgen.Config{Total: prefill, Next: func(w int, _ uint64) loadgen.Request { return change(seq.Add(1)) }}); err != nil {
		return err
	} else if res.NotOK() > 0 {
		return fmt.Errorf("prefill: %d failed (%v)", res.NotOK(), res.Status)
	}
	code, gz, err := mu.api("GET", "/eureka/apps/delta", nil, benchFetchHeaderPairs...)
	if err != nil || code != 200 {
		return fmt.Errorf("GET /eureka/apps/delta: %d %v", code, err)
	}
	raw, err := benchGunzip(gz)
	if err != nil {
		return err
	}
	inDelta := bytes.Count(raw, []byte(`"instanceId"`))
	if _, err := bare.ctl("POST", "/body?path=/eureka/apps/delta", gz, "Content-Type", "application/json", "X-Content-Encoding", "gzip"); err != nil {
		return err
	}

	// Churn: 1 % of the instances per second, paced, from 4 connections.
	rate := float64(n) / 100
	const churners = 4
	var churnDone, churnTime float64
	var encodings float64
	around := func() func() {
		ctx, cancel := context.WithCancel(e.ctx)
		enc0 := mu.metric("muster_payload_encodings_total")
		t0 := time.Now()
		done := make(chan loadgen.Result, 1)
		go func() {
			res, _ := loadgen.Run(ctx, loadgen.Config{Addr: mu.API, Client: e.client, Concurrency: churners,
				Duration: time.Hour, Interval: time.Duration(float64(churners) / rate * float64(time.Second)),
				Next: func(w int, _ uint64) loadgen.Request { return change(seq.Add(1)) }})
			done <- res
		}()
		return func() {
			cancel()
			res := <-done
			churnDone += float64(res.OK())
			churnTime += time.Since(t0).Seconds()
			encodings += mu.metric("muster_payload_encodings_total") - enc0
		}
	}
	cfg := loadgen.Config{Next: func(w int, _ uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps/delta", Header: benchFetchHeaders}
	}}
	m, b, err := e.compare(mu, bare, cfg, around)
	if err != nil {
		return err
	}
	if e.profileDir != "" {
		stop := around()
		err := e.profileDuring(mu, "delta", cfg)
		stop()
		if err == nil {
			err = e.profileDuring(bare, "delta-ceiling", cfg)
		}
		if err != nil {
			return err
		}
	}
	sc := "delta " + benchSize(n)
	e.addThroughput(sc, "delta fetches under 1 %/s churn", m, b, 0.8)
	per := float64(m.res.BodyBytes) / float64(max(m.res.Requests, 1))
	e.add(benchRow{Scenario: sc, Figure: "gzip bytes per delta response", Value: per, Unit: "B",
		Note: fmt.Sprintf("%d instances in the 3-minute delta (a fleet of %d), %.0f B each (the fleet's own registrations count, and the node's own; at 1 %%/s the steady state is 83 %%); ceiling served a same-size copy",
			inDelta, n, per/float64(max(inDelta, 1)))})
	e.add(benchRow{Scenario: sc, Figure: "status changes applied", Value: churnDone / churnTime, Unit: "/s", Target: fmt.Sprintf("%.0f/s (1 %%/s)", rate),
		Met: benchBool(churnDone/churnTime >= 0.95*rate)})
	e.add(benchRow{Scenario: sc, Figure: "delta payload encodings", Value: encodings / churnTime, Unit: "/s",
		Note: "pieces encoded: the changed delta group's gzip JSON, at most one per change"})
	return nil
}

// benchMix scrambles a sequence number (splitmix64), to pick instances in
// a random-looking but reproducible order.
func benchMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ---- 4. Registration from cold ----

// registrationBench is the registration scenario (bench --only registration): its methods share
// the run's environment, benchEnv, and its helpers.
type registrationBench struct{ *benchEnv }

func (e registrationBench) run() error {
	n := e.fleetN
	var m, b benchSide
	benchFleetOf(n)
	rounds := e.rounds
	for r := 0; r < rounds; r++ {
		order := []string{"muster", "bare"}
		if r%2 == 1 {
			order = []string{"bare", "muster"}
		}
		for _, mode := range order {
			c, err := e.startChild(fmt.Sprintf("registration-%s-%d", mode, r), mode)
			if err != nil {
				return err
			}
			cpu0 := c.cpu()
			res, err := e.registerFleet(c, 0, n)
			if err != nil {
				return err
			}
			cpu := c.cpu() - cpu0
			if mode == "muster" {
				if st, err := c.status(); err != nil || st.Fleet != n {
					return fmt.Errorf("after registering %d: %+v %v (want a fleet of %d)", n, st, err, n)
				}
				m.add(res, cpu)
			} else {
				b.add(res, cpu)
			}
			c.stop()
		}
	}
	e.addThroughput("registration", fmt.Sprintf("registrations from cold (%s, 64 conns)", benchSize(n)), m, b, 0)
	if e.profileDir == "" {
		return nil
	}
	c, err := e.startChild("registration-profiled", "muster")
	if err != nil {
		return err
	}
	f := benchFleetOf(e.bigN)
	return e.profileDuring(c, "registration", loadgen.Config{Total: uint64(e.bigN), Next: func(w int, seq uint64) loadgen.Request {
		return f.register(int(seq))
	}})
}

// ---- 5. Propagation ----

// propagationBench is the propagation scenario (bench --only propagation): its methods share
// the run's environment, benchEnv, and its helpers.
type propagationBench struct{ *benchEnv }

func (e propagationBench) run() error {
	n := e.fleetN   // registered on A, heartbeated in the loaded phase
	const base = 50 // instances whose status the bench toggles
	nodes, err := e.startCluster("prop")
	if err != nil {
		return err
	}
	a, b := nodes[0], nodes[1]
	if _, err := e.registerFleet(a, 0, n+base); err != nil {
		return err
	}
	if err := e.waitInstances(nodes[1:], n+base); err != nil {
		return err
	}

	count := benchPick(e.smoke, 500, 10)
	idleBudget, loadBudget := 60*time.Second, 120*time.Second
	if e.quick {
		idleBudget, loadBudget = 20*time.Second, 25*time.Second
	}
	if e.smoke {
		idleBudget, loadBudget = 5*time.Second, 5*time.Second
	}
	p := &benchPropagator{a: a, b: b, base: n, baseN: base, next: n + base, downs: make([]bool, base)}
	benchFleetOf(n + base + 2*count + 10)

	const items, batches, overflow = "muster_replication_items_total", "muster_replication_batches_total", `muster_replication_drops_total{reason="overflow"}`
	fill := func(v0, v1 []float64) float64 { return (v1[0] - v0[0]) / max(v1[1]-v0[1], 1) }

	// Idle cluster.
	v0, _ := a.metrics(items, batches, overflow)
	idle, err := p.run(e.ctx, count, idleBudget)
	if err != nil {
		return err
	}
	v1, _ := a.metrics(items, batches, overflow)
	e.addPropagation("idle", idle, count, 100*time.Millisecond)
	e.add(benchRow{Scenario: "propagation", Figure: "idle: replication batch fill", Value: fill(v0, v1), Unit: "items/batch",
		Note: fmt.Sprintf("%.0f items in %.0f batches from A", v1[0]-v0[0], v1[1]-v0[1])})

	// Under scenario 1's heartbeat load on A.
	f := benchFleetOf(n)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	loadDone := make(chan loadgen.Result, 1)
	go func() {
		res, _ := loadgen.Run(ctx, loadgen.Config{Addr: a.API, Client: e.client, Concurrency: e.conc, Duration: loadBudget + 30*time.Second,
			Next: func(w int, seq uint64) loadgen.Request {
				return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(n)], Header: benchClientHeaders}
			}})
		loadDone <- res
	}()
	time.Sleep(max(e.warmup, time.Second))
	v0, _ = a.metrics(items, batches, overflow)
	t0 := time.Now()
	loaded, err := p.run(e.ctx, count, loadBudget)
	elapsed := time.Since(t0)
	v1, _ = a.metrics(items, batches, overflow)
	cancel()
	hb := <-loadDone
	if err != nil {
		return err
	}
	e.addPropagation("under heartbeat load", loaded, count, time.Second)
	e.add(benchRow{Scenario: "propagation", Figure: "under load: heartbeats/s on A", Value: hb.RPS(), Unit: "req/s",
		Note: fmt.Sprintf("64 conns for %.0f s, %d not 2xx", hb.Elapsed.Seconds(), hb.NotOK())})
	e.add(benchRow{Scenario: "propagation", Figure: "under load: replication batch fill", Value: fill(v0, v1), Unit: "items/batch",
		Note: fmt.Sprintf("%.0f items in %.0f batches from A in %.0f s; %.0f heartbeats dropped (queue overflow)", v1[0]-v0[0], v1[1]-v0[1], elapsed.Seconds(), v1[2]-v0[2])})
	return nil
}

func (e propagationBench) addPropagation(phase string, r benchPropagation, want int, target time.Duration) {
	h := r.visible
	p99 := h.Quantile(0.99)
	note := fmt.Sprintf("%d changes (registers and status changes alternating)", h.Count())
	if int(h.Count()) < want {
		note += fmt.Sprintf(", fewer than %d: time budget", want)
	}
	if r.timeouts > 0 {
		note += fmt.Sprintf(", %d not seen within 10 s", r.timeouts)
	}
	e.add(benchRow{Scenario: "propagation", Figure: phase + ": A change → visible on B, p50", Value: ms(h.Quantile(0.5)), Unit: "ms", Note: note})
	e.add(benchRow{Scenario: "propagation", Figure: phase + ": A change → visible on B, p99", Value: ms(p99), Unit: "ms",
		Target: fmt.Sprintf("< %s", target), Met: benchBool(p99 < target && r.timeouts == 0)})
	e.add(benchRow{Scenario: "propagation", Figure: phase + ": A change → visible on B, max", Value: ms(h.Max()), Unit: "ms"})
	e.add(benchRow{Scenario: "propagation", Figure: phase + ": A's answer to the change, p50/p99", Value: ms(r.ack.Quantile(0.5)), Unit: "ms",
		Note: fmt.Sprintf("p99 %.1f ms (part of the figures above)", ms(r.ack.Quantile(0.99)))})
}

// benchPropagator makes changes on A and times until B's registry shows
// them: B's control /watch is armed first (it polls B's registry every
// 100 µs and reports the wall-clock time it saw the change), then the
// change is sent to A.
type benchPropagator struct {
	a, b        *benchChild
	base, baseN int    // fleet instances [base, base+baseN) get their status toggled
	next        int    // next fleet instance to register
	downs       []bool // toggled instance is DOWN
	k           int
}

type benchPropagation struct {
	visible, ack *loadgen.Histogram
	timeouts     int
}

func (p *benchPropagator) run(ctx context.Context, count int, budget time.Duration) (benchPropagation, error) {
	out := benchPropagation{visible: loadgen.NewHistogram(), ack: loadgen.NewHistogram()}
	deadline := time.Now().Add(budget)
	for i := 0; i < count && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		vis, ack, err := p.one()
		if err != nil {
			return out, err
		}
		out.ack.Record(ack)
		if vis < 0 {
			out.timeouts++
			continue
		}
		out.visible.Record(vis)
	}
	return out, nil
}

// one makes one change; vis is -1 when B did not see it within 10 s.
func (p *benchPropagator) one() (vis, ack time.Duration, err error) {
	p.k++
	var req loadgen.Request
	var app, id, status string
	if p.k%2 == 1 {
		i := p.next
		p.next++
		f := benchFleetOf(i + 1)
		req = f.register(i)
		app, id = benchAppName(i), benchInstanceID(i)
	} else {
		j := (p.k / 2) % p.baseN
		i := p.base + j
		p.downs[j] = !p.downs[j]
		status = "UP"
		if p.downs[j] {
			status = "DOWN"
		}
		req = loadgen.Request{Method: http.MethodPut, Path: benchStatusPath(i, status)}
		app, id = benchAppName(i), benchInstanceID(i)
	}
	q := url.Values{"app": {app}, "id": {id}, "status": {status}, "timeout": {"10s"}}
	resp, err := benchCtl.Get("http://" + p.b.Control + "/watch?" + q.Encode())
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("watch %s/%s on B: %d %s", app, id, resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "armed\n" {
		return 0, 0, fmt.Errorf("watch on B: %q %v", line, err)
	}
	t0 := time.Now()
	hr, _ := http.NewRequest(req.Method, "http://"+p.a.API+req.Path, bytes.NewReader(req.Body))
	if len(req.Body) > 0 {
		hr.Header.Set("Content-Type", "application/json")
	}
	ar, err := benchCtl.Do(hr)
	if err != nil {
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, ar.Body)
	ar.Body.Close()
	ack = time.Since(t0)
	if ar.StatusCode/100 != 2 {
		return 0, 0, fmt.Errorf("%s %s on A: %d", req.Method, req.Path, ar.StatusCode)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("watch on B: %v", err)
	}
	line = strings.TrimSpace(line)
	if line == "timeout" {
		return -1, ack, nil
	}
	ns, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("watch on B answered %q", line)
	}
	return max(time.Unix(0, ns).Sub(t0), 0), ack, nil
}

func benchWait(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// ---- 6. Memory ----

// memoryBench is the memory scenario (bench --only memory): its methods share
// the run's environment, benchEnv, and its helpers.
type memoryBench struct{ *benchEnv }

func (e memoryBench) run() error {
	c, empty, err := e.bigNode()
	if err != nil {
		return err
	}
	n := float64(e.bigN)
	per := func(v, base uint64) float64 { return (float64(v) - float64(base)) / n }
	const target = 2048
	regOnly, err := c.mem(true)
	if err != nil {
		return err
	}
	if _, err := c.ctl("GET", "/snapshot", nil); err != nil {
		return err
	}
	withSnap, err := c.mem(true)
	if err != nil {
		return err
	}
	code, gz, err := c.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...)
	if err != nil || code != 200 {
		return fmt.Errorf("GET /eureka/apps: %d %v", code, err)
	}
	raw, _ := benchGunzip(gz)
	withPayload, err := c.mem(true)
	if err != nil {
		return err
	}
	if e.profileDir != "" {
		path := filepath.Join(e.profileDir, "memory-100k.heap.pprof")
		if err := c.heapProfile(path); err != nil {
			return err
		}
		e.logf("   heap profile of the 100k node with the payload cached: %s", path)
	}
	e.add(benchRow{Scenario: "memory", Figure: "live heap per instance: registry only", Value: per(regOnly.HeapAlloc, empty.HeapAlloc), Unit: "B",
		Note: benchSize(e.bigN) + " Spring-like instances (3–5 metadata entries), delta queue pruned"})
	e.add(benchRow{Scenario: "memory", Figure: "live heap per instance: + snapshot, no payload cached", Value: per(withSnap.HeapAlloc, empty.HeapAlloc), Unit: "B",
		Target: "≤ 2048 B", Met: benchBool(per(withSnap.HeapAlloc, empty.HeapAlloc) <= target)})
	e.add(benchRow{Scenario: "memory", Figure: "live heap per instance: + full payload cached", Value: per(withPayload.HeapAlloc, empty.HeapAlloc), Unit: "B",
		Target: "≤ 2048 B", Met: benchBool(per(withPayload.HeapAlloc, empty.HeapAlloc) <= target),
		Note: fmt.Sprintf("after one gzip JSON full fetch: its per-app gzip pieces and the chunks joined from them (%.0f B/instance on the wire; %.0f B/instance plain JSON, not cached)", float64(len(gz))/n, float64(len(raw))/n)})
	e.add(benchRow{Scenario: "memory", Figure: "RSS per instance: + snapshot, no payload cached", Value: per(withSnap.RSS, empty.RSS), Unit: "B",
		Note: "VmRSS of the server after GC and FreeOSMemory, minus the empty node's"})
	e.add(benchRow{Scenario: "memory", Figure: "RSS per instance: + full payload cached", Value: per(withPayload.RSS, empty.RSS), Unit: "B",
		Note: fmt.Sprintf("server RSS %.0f MiB in all (empty node %.0f MiB), live heap %.0f MiB", float64(withPayload.RSS)/(1<<20), float64(empty.RSS)/(1<<20), float64(withPayload.HeapAlloc)/(1<<20))})
	return nil
}

// benchSize labels a registry size: 10k, 100k, 2500.
func benchSize(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

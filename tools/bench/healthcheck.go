package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- server-side health checks ----
//
// What probing costs the node that probes (muster.health-check.*): two
// nodes hold the same 10k instances, one probing them all every interval
// (over HTTP, then in a second pair by TCP connect), the other not probing; the difference in their CPU over the
// same window is the probing's. The instances' health endpoints are 16
// plain HTTP servers on 127.0.0.1 in the bench process (all instances
// register ipAddr 127.0.0.1: tests and benchmarks reach loopback only, and
// muster.health-check.allowed-cidrs=127.0.0.0/8 allows it). Target: under
// 2 % of one core at 10k instances and a 10 s interval. Beside it, in the
// same window, a control (below) runs the same cycles with no Muster code,
// and the probe's cost is reported as a ratio to it.

const (
	benchHCInstances = 10_000
	benchHCBackends  = 16
	benchHCApps      = 200 // 50 instances each, as the fleet
)

// benchHCServe starts the health endpoints; stop closes them, and conns
// counts the connections they accepted (the node's probes and the
// control's cycles alike).
func benchHCServe() (ports []int, conns *atomic.Int64, stop func(), err error) {
	conns = new(atomic.Int64)
	var srvs []*http.Server
	stop = func() {
		for _, s := range srvs {
			_ = s.Close()
		}
	}
	for range benchHCBackends {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		ln := benchCountingListener{tl, conns}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"UP"}`))
		}), ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() { _ = srv.Serve(ln) }()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, conns, stop, nil
}

// benchCountingListener counts the connections it accepts.
type benchCountingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l benchCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// benchHCPort is the backend of instance i: its place within its app
// (i / benchHCApps), so that each app's 50 instances are spread over all
// the backends. A node probes app by app (the snapshot's order) and the
// control round robin: both keep all 16 backends busy at once. (With i
// mod 16, an app's instances would all sit on 2 backends, and the node's
// 64 probes at a time would queue on 2 listeners while the control's
// spread over 16.)
func benchHCPort(ports []int, i int) int { return ports[(i/benchHCApps)%len(ports)] }

// benchHCBody is instance i with its health endpoint on port; mode tcp
// registers it without a healthCheckUrl, so it is probed by a connect.
// Nothing renews it: its lease says 5-minute renewals, so that it stays
// registered, and this node's (ClientLive: renewed within two renewal
// intervals, the nodes run without gossip) for a window of any --rounds,
// not for 60 s only.
func benchHCBody(i int, port int, mode string) []byte {
	url := fmt.Sprintf(`"healthCheckUrl":"http://127.0.0.1:%d/actuator/health",`, port)
	if mode == "tcp" {
		url = ""
	}
	return fmt.Appendf(nil, `{"instance":{"instanceId":"hc-%d","hostName":"localhost","app":"HC-%03d","ipAddr":"127.0.0.1","status":"UP",`+
		`"port":{"$":%d,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":300,"durationInSecs":900},%s"vipAddress":"hc-%03d"}}`,
		i, i%benchHCApps, port, url, i%benchHCApps)
}

// healthCheckBench is the healthcheck scenario (bench --only healthcheck): its methods share
// the run's environment, benchEnv, and its helpers.
type healthCheckBench struct{ *benchEnv }

func (e healthCheckBench) run() error {
	for _, mode := range []string{"http", "tcp"} {
		if err := e.healthCheckMode(mode); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

// healthCheckMode measures one mode (http or tcp).
func (e healthCheckBench) healthCheckMode(mode string) error {
	// The window is rounds intervals: --rounds (default 3, quick 2), at
	// least 2.
	interval, rounds := 10*time.Second, max(e.rounds, 2)
	if e.quick {
		interval = 2 * time.Second
	}
	n := benchHCInstances
	if e.smoke {
		n = 200 // the interval and rounds stay: the interval is at least the probe timeout, and one round's window can miss a jittered round
	}
	ports, conns, stop, err := benchHCServe()
	if err != nil {
		return err
	}
	defer stop()
	common := []string{"--set", "muster.health-check.interval-ms=" + strconv.Itoa(int(interval.Milliseconds())),
		"--set", "muster.health-check.allowed-cidrs=127.0.0.0/8", "--set", "muster.health-check.apps=*"}
	probing, err := e.startChild("hc-probing-"+mode, "muster", append(common, "--set", "muster.health-check.enabled=true")...)
	if err != nil {
		return err
	}
	defer probing.stop()
	idle, err := e.startChild("hc-idle-"+mode, "muster", append(common, "--set", "muster.health-check.enabled=false")...)
	if err != nil {
		return err
	}
	defer idle.stop()
	// Two control processes, A and B, doing the same: A is the ceiling,
	// B ÷ A (an A/A comparison) shows how far two identical measurements
	// of the same window land apart.
	var controls [2]*benchChild
	for k, name := range []string{"hc-control-", "hc-control-b-"} {
		c, err := e.startChild(name+mode, "bare")
		if err != nil {
			return err
		}
		defer c.stop()
		controls[k] = c
	}
	for _, c := range []*benchChild{probing, idle} {
		res, err := e.load(c, loadgen.Config{Total: uint64(n), Next: func(w int, seq uint64) loadgen.Request {
			i := int(seq)
			return loadgen.Request{Method: http.MethodPost, Path: fmt.Sprintf("/eureka/apps/HC-%03d", i%benchHCApps),
				Header: benchJSONBodyHeaders, Body: benchHCBody(i, benchHCPort(ports, i), mode)}
		}})
		if err != nil {
			return err
		}
		if res.NotOK() > 0 {
			return fmt.Errorf("registering the health-check fleet: %d failed (%v)", res.NotOK(), res.FirstErr)
		}
	}

	okName := `muster_health_check_probes_total{mode="` + mode + `",result="ok"}`
	failName := `muster_health_check_probes_total{mode="` + mode + `",result="fail"}`
	// The first round runs one interval after the node opened: wait for a
	// whole round, then measure over whole rounds.
	deadline := time.Now().Add(4*interval + 30*time.Second)
	for probing.metric(okName) < float64(n) {
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			return fmt.Errorf("no whole health-check round within %s (%v probes ok)", 4*interval, probing.metric(okName))
		}
		time.Sleep(200 * time.Millisecond)
	}
	ok0, fail0 := probing.metric(okName), probing.metric(failName)
	user0, sys0 := procCPUSplit(probing.PID)
	cpuP0, cpuI0, t0 := probing.cpu(), idle.cpu(), time.Now()
	var profiled <-chan error
	if e.profileDir != "" {
		profiled = probing.profile(time.Duration(rounds)*interval, filepath.Join(e.profileDir, "healthcheck-"+mode+".cpu.pprof"))
	}
	windowEnd := time.After(time.Duration(rounds) * interval)
	// The control, in the same window and at the same interval: a round
	// of the node has just ended, and each control round runs in the gap
	// after one of the node's, one round of n cycles in each gap as the
	// node probes each instance once an interval (not all back to back:
	// a burst after an idle interval is what the node's rounds are). The
	// node's rounds are told by the backends' accepted connections (less
	// the control's), not by asking the node, which would cost it CPU in
	// the window. A and B take turns (A first in even rounds, B first in
	// odd ones).
	c0 := conns.Load()
	ctlCycles := int64(0)
	var ctls [2]benchDialResult
	for r := range rounds {
		if r > 0 {
			waitUntil := time.Now().Add(interval + interval/2)
			for conns.Load()-c0-ctlCycles < int64(r*n) && time.Now().Before(waitUntil) && e.ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // the round's last probes close
		}
		for k := range 2 {
			k = (k + r) % 2
			res, err := controls[k].dialCycles(mode, n, ports, "/actuator/health")
			if err != nil {
				return err
			}
			ctls[k].add(res)
			ctlCycles += int64(res.OK + res.Failed)
		}
	}
	ctl := ctls[0]
	select {
	case <-windowEnd:
	case <-e.ctx.Done():
		return e.ctx.Err()
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			e.logf("   profile of the probing node: %v", err)
		}
	}
	cpuP, cpuI, window := probing.cpu()-cpuP0, idle.cpu()-cpuI0, time.Since(t0)
	user1, sys1 := procCPUSplit(probing.PID)
	probes, fails := probing.metric(okName)-ok0, probing.metric(failName)-fail0
	if probes+fails == 0 {
		return fmt.Errorf("no probes in the %s window", window.Round(time.Second))
	}
	// Per probe, from the probes counted (the rounds in the window are
	// whole or not, jitter decides); the share of a core is what one
	// probe of each instance per interval costs.
	cost := max(cpuP-cpuI, 0)
	perProbe := cost.Seconds() / (probes + fails) * 1e6 // µs
	core := 100 * perProbe * float64(n) / 1e6 / interval.Seconds()
	roundsSeen := (probes + fails) / float64(n)
	what := fmt.Sprintf("%s instances, %s interval", benchSize(n), interval)
	ctlPer := ctl.CPUSeconds / float64(ctl.OK) * 1e6 // µs
	cycle := "connect within the probe timeout, close with a reset"
	if mode == "http" {
		cycle = "connect within the probe timeout, the probe's GET, status line read under the same deadline, close with a reset"
	}
	e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": control, bare cycle CPU", Value: ctlPer, Unit: "µs",
		Note: fmt.Sprintf("%d bare cycles (%s; net.Dialer, no Muster code) to the same %d backends at concurrency %d in %.1fs, in the same window, one round after each of the node's, in their own process: %.2fs CPU (user %.2fs, system %.2fs; getrusage RUSAGE_SELF)",
			ctl.OK, cycle, len(ports), benchHCConcurrency, ctl.Seconds, ctl.CPUSeconds, ctl.UserSec, ctl.SystemSec)})
	ctlBPer := ctls[1].CPUSeconds / float64(ctls[1].OK) * 1e6
	e.addCompared("healthcheck", mode+": A/A, second control's bare cycle CPU", ctlBPer, ctlPer, "µs", "", nil,
		fmt.Sprintf("a second control process doing the very same cycles in the same window, turn about with the first: ratio = B ÷ A, the noise of one such comparison (user %.2fs, system %.2fs)",
			ctls[1].UserSec, ctls[1].SystemSec))
	e.addCompared("healthcheck", mode+": probing CPU per instance per interval", perProbe, ctlPer, "µs", "", nil,
		fmt.Sprintf("%s: %.1f rounds in %s; probing node %.2fs CPU (user %.2fs, system %.2fs), idle twin %.2fs, both getrusage RUSAGE_SELF of their own process; ceiling = the control's bare cycle, ratio = Muster ÷ control; on loopback the kernel's work for both ends of each connection counts in both",
			what, roundsSeen, window.Round(time.Second), cpuP.Seconds(), (user1-user0).Seconds(), (sys1-sys0).Seconds(), cpuI.Seconds()))
	atTarget := 100 * perProbe * benchHCInstances / 1e6 / 10 // at the target's 10 s
	e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": probing CPU, share of one core", Value: core, Unit: "%",
		Target: "< 2 % at 10k and 10 s", Met: benchBool(atTarget < 2), Note: what + fmt.Sprintf(" (%.2f %% at 10 s)", atTarget)})
	ctlAt := 100 * ctlPer * benchHCInstances / 1e6 / 10
	e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": control, share of one core", Value: ctlAt, Unit: "%",
		Target: "< 2 % at 10k and 10 s", Met: benchBool(ctlAt < 2),
		Note: "the bare cycles alone at 10k and 10 s: when this misses the target, so must any prober on this machine's loopback"})
	if fails > 0 {
		e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": failed probes", Value: fails, Target: "0", Met: benchBool(false),
			Note: "the endpoints always answer 200: a failure is the prober's or the machine's"})
	}
	return nil
}

// procCPUSplit is the user and system CPU time of process pid.
func procCPUSplit(pid int) (user, system time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u) * (time.Second / 100), time.Duration(st) * (time.Second / 100)
}

// ---- the control: the same cycles with no Muster code ----
//
// The control runs in its own child process (`bench ceiling`, control
// endpoint /dialcycles), so its CPU, like the probing node's, is
// getrusage(RUSAGE_SELF) of one process that does nothing else: the same
// number of cycles against the same backends at the same concurrency
// (muster.health-check.max-concurrent's default, 64), each what a probe
// must do and nothing of Muster's: a net.Dialer connect to the address
// (no keep-alive) bounded by the probe timeout (timeout-ms's default, 2 s:
// Dialer.Timeout), and for HTTP the very request a probe writes (the same
// headers) and its status line read under a connection deadline at the
// same timeout, then a close with a reset as a probe's. What a probe costs
// beyond that is Muster's; what the control costs is the machine's (on
// loopback, the kernel's work for both ends of each connection). Until
// 2026-12-06 the control had no timeout at all (no deadline context, no
// poller deadlines) and sent a shorter request: it did less than a probe
// must.

// benchHCConcurrency is max-concurrent's default, the control's too.
const benchHCConcurrency = 64

// benchHCTimeout is muster.health-check.timeout-ms's default, the
// control's too: each cycle is bounded by it as a probe is.
const benchHCTimeout = 2 * time.Second

// benchHCUserAgent is the probe's User-Agent: the control sends the very
// request a probe sends.
const benchHCUserAgent = "muster-health-check"

// benchDialResult is what /dialcycles answers.
type benchDialResult struct {
	OK         int     `json:"ok"`
	Failed     int     `json:"failed"`
	CPUSeconds float64 `json:"cpuSeconds"`
	UserSec    float64 `json:"userSeconds"`
	SystemSec  float64 `json:"systemSeconds"`
	Seconds    float64 `json:"seconds"`
	FirstErr   string  `json:"firstErr,omitempty"`
}

// add sums r into d.
func (d *benchDialResult) add(r benchDialResult) {
	d.OK += r.OK
	d.Failed += r.Failed
	d.CPUSeconds += r.CPUSeconds
	d.UserSec += r.UserSec
	d.SystemSec += r.SystemSec
	d.Seconds += r.Seconds
}

// benchDialCycles serves POST /dialcycles?mode=http|tcp&n=N&conc=C&ports=P1,P2,…&path=/x[&timeoutMs=T]
// on a ceiling child: n cycles to 127.0.0.1 (cycle i to port i mod
// len(ports)), at most conc at once, each bounded by timeoutMs (default
// benchHCTimeout); it answers a benchDialResult with the CPU (RUSAGE_SELF)
// this process spent meanwhile.
func benchDialCycles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode, path := q.Get("mode"), q.Get("path")
	n, _ := strconv.Atoi(q.Get("n"))
	conc, _ := strconv.Atoi(q.Get("conc"))
	timeout := benchHCTimeout
	if t := q.Get("timeoutMs"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms < 1 {
			http.Error(w, "bad timeoutMs", http.StatusBadRequest)
			return
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	var addrs []netip.AddrPort
	for p := range strings.SplitSeq(q.Get("ports"), ",") {
		if port, err := strconv.Atoi(p); err == nil && port > 0 && port < 65536 {
			addrs = append(addrs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))) // loopback only
		}
	}
	if (mode != "http" && mode != "tcp") || n < 1 || conc < 1 || len(addrs) == 0 || !strings.HasPrefix(path, "/") {
		http.Error(w, "want mode=http|tcp, n>0, conc>0, ports, path", http.StatusBadRequest)
		return
	}
	// The request a probe writes (healthcheck/probe.go's httpGet), byte
	// for byte.
	reqs := make([][]byte, len(addrs))
	for i, a := range addrs {
		reqs[i] = []byte("GET " + path + " HTTP/1.1\r\nHost: " + a.String() + "\r\nUser-Agent: " + benchHCUserAgent +
			"\r\nAccept: */*\r\nConnection: close\r\n\r\n")
	}
	var next, okN, failN atomic.Int64
	var firstErr atomic.Value
	u0, s0 := benchRusage()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{KeepAlive: -1, Timeout: timeout}
			var buf [4 << 10]byte // a probe reads up to 4 KiB
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				err := benchDialCycle(&d, addrs[i%len(addrs)], mode, reqs[i%len(addrs)], buf[:])
				if err != nil {
					failN.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				okN.Add(1)
			}
		}()
	}
	wg.Wait()
	u1, s1 := benchRusage()
	res := benchDialResult{OK: int(okN.Load()), Failed: int(failN.Load()), UserSec: (u1 - u0).Seconds(), SystemSec: (s1 - s0).Seconds(),
		CPUSeconds: (u1 - u0 + s1 - s0).Seconds(), Seconds: time.Since(t0).Seconds()}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstErr = s
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// benchRusage is this process's user and system CPU time
// (getrusage RUSAGE_SELF, as proccontrol.CPU, split).
func benchRusage() (user, system time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// benchDialCycle is one bare cycle: connect within d.Timeout, (HTTP: set
// the connection's deadline to the same timeout from the cycle's start,
// write req, read up to the status line's end and check it is a 200),
// close with a reset.
func benchDialCycle(d *net.Dialer, addr netip.AddrPort, mode string, req, buf []byte) error {
	start := time.Now()
	c, err := d.DialTCP(context.Background(), "tcp", netip.AddrPort{}, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetLinger(0)
	if mode == "tcp" {
		return nil
	}
	_ = c.SetDeadline(start.Add(d.Timeout))
	if _, err := c.Write(req); err != nil {
		return err
	}
	n := 0
	for bytes.IndexByte(buf[:n], '\n') < 0 {
		if n == len(buf) {
			return errors.New("no status line")
		}
		m, err := c.Read(buf[n:])
		n += m
		if err != nil && bytes.IndexByte(buf[:n], '\n') < 0 {
			return err
		}
	}
	if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("answer %q", buf[:min(n, 32)])
	}
	return nil
}

// dialCycles asks a ceiling child for n control cycles.
func (c *benchChild) dialCycles(mode string, n int, ports []int, path string) (benchDialResult, error) {
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	var res benchDialResult
	b, err := c.ctl("POST", fmt.Sprintf("/dialcycles?mode=%s&n=%d&conc=%d&ports=%s&path=%s&timeoutMs=%d", mode, n, benchHCConcurrency, strings.Join(ps, ","), path, benchHCTimeout.Milliseconds()), nil)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, err
	}
	if res.Failed > 0 {
		return res, fmt.Errorf("control: %d of %d cycles failed (%s)", res.Failed, n, res.FirstErr)
	}
	return res, nil
}

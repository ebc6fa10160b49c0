package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// 2 % of one core at 10k instances and a 10 s interval.

const (
	benchHCInstances = 10_000
	benchHCBackends  = 16
	benchHCApps      = 200 // 50 instances each, as the fleet
)

// benchHCServe starts the health endpoints; stop closes them.
func benchHCServe() (ports []int, stop func(), err error) {
	var srvs []*http.Server
	stop = func() {
		for _, s := range srvs {
			_ = s.Close()
		}
	}
	for range benchHCBackends {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"UP"}`))
		}), ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() { _ = srv.Serve(ln) }()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, stop, nil
}

// benchHCBody is instance i with its health endpoint on port; mode tcp
// registers it without a healthCheckUrl, so it is probed by a connect.
func benchHCBody(i int, port int, mode string) []byte {
	url := fmt.Sprintf(`"healthCheckUrl":"http://127.0.0.1:%d/actuator/health",`, port)
	if mode == "tcp" {
		url = ""
	}
	return fmt.Appendf(nil, `{"instance":{"instanceId":"hc-%d","hostName":"localhost","app":"HC-%03d","ipAddr":"127.0.0.1","status":"UP",`+
		`"port":{"$":%d,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},%s"vipAddress":"hc-%03d"}}`,
		i, i%benchHCApps, port, url, i%benchHCApps)
}

func (e *benchEnv) healthCheck() error {
	for _, mode := range []string{"http", "tcp"} {
		if err := e.healthCheckMode(mode); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

// healthCheckMode measures one mode (http or tcp).
func (e *benchEnv) healthCheckMode(mode string) error {
	interval, rounds := 10*time.Second, 3
	if e.quick {
		interval, rounds = 2*time.Second, 2
	}
	ports, stop, err := benchHCServe()
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
	for _, c := range []*benchChild{probing, idle} {
		res, err := e.load(c, loadgen.Config{Total: benchHCInstances, Next: func(w int, seq uint64) loadgen.Request {
			i := int(seq)
			return loadgen.Request{Method: http.MethodPost, Path: fmt.Sprintf("/eureka/apps/HC-%03d", i%benchHCApps),
				Header: benchJSONBodyHeaders, Body: benchHCBody(i, ports[i%len(ports)], mode)}
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
	for probing.metric(okName) < benchHCInstances {
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
	select {
	case <-time.After(time.Duration(rounds) * interval):
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
	core := 100 * perProbe * benchHCInstances / 1e6 / interval.Seconds()
	roundsSeen := (probes + fails) / benchHCInstances
	what := fmt.Sprintf("%dk instances, %s interval", benchHCInstances/1000, interval)
	e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": probing CPU per instance per interval", Value: perProbe, Unit: "µs",
		Note: fmt.Sprintf("%s: %.1f rounds in %s; probing node %.2fs CPU (user %.2fs, system %.2fs), idle twin %.2fs; on loopback the kernel's work for both ends of each connection counts here",
			what, roundsSeen, window.Round(time.Second), cpuP.Seconds(), (user1 - user0).Seconds(), (sys1 - sys0).Seconds(), cpuI.Seconds())})
	atTarget := 100 * perProbe * benchHCInstances / 1e6 / 10 // at the target's 10 s
	e.add(benchRow{Scenario: "healthcheck", Figure: mode + ": probing CPU, share of one core", Value: core, Unit: "%",
		Target: "< 2 % at 10k and 10 s", Met: benchBool(atTarget < 2), Note: what + fmt.Sprintf(" (%.2f %% at 10 s)", atTarget)})
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

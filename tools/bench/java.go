package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/interop/interoptest"
	"github.com/muster-registry/muster/tools/loadgen"
)

// The java scenario: the Spring Cloud Netflix Eureka Server 5.0 (the app
// of interop/spring/eureka-server: Spring Boot 4.0, Spring Cloud 2025.1,
// eureka-core 2.0 on Jersey 3, built by Maven through interoptest.Build) and
// a Muster node side by side, the same fleet on each, driven by the same
// load generator in alternating rounds. Its rows put Muster in the value
// column and the Spring server in the ceiling column, so a ratio is
// Muster ÷ Spring: above 1 is better for rates, below 1 for bytes, memory
// and delays.

// benchJavaN is the fleet of the java scenario.
const benchJavaN = 10_000

// benchSpringSource is the Spring Cloud Eureka Server app, relative to the
// repository root.
const benchSpringSource = "interop/spring/eureka-server"

// benchSpringCacheBound is how long after the registrations the Spring
// server's cached full fetch can miss some of them: its read-only response
// cache is refreshed every 30 s (response-cache-update-interval-ms) from a
// read-write cache whose entries expire 180 s after they were loaded
// (response-cache-auto-expiration-in-seconds), and an entry loaded while
// the registrations were still arriving can hold the registry as it was
// then until it expires (a Guava LoadingCache does not drop a value being
// loaded when it is invalidated). After this, both caches have been
// reloaded from the whole registry (one quick run on a loaded machine
// saw the whole fleet 209 s after the registrations), with a margin.
const benchSpringCacheBound = 180*time.Second + 30*time.Second + 30*time.Second

// benchSameFleet is the rule of a side-by-side bytes or rate row: both
// servers' answers held exactly the fleet (held[0] Muster's, held[1] the
// Spring server's), or the row compares nothing and says why.
func benchSameFleet(held [2]int, fleet int) (bool, string) {
	if held[0] == fleet && held[1] == fleet {
		return true, ""
	}
	return false, fmt.Sprintf("not measured: not the same fleet (the full fetch held %d instances at Muster and %d at the Spring server, of %d)", held[0], held[1], fleet)
}

// addSideBySide adds a compared row when both sides held the same fleet,
// and a row that says it was not measured, and why, when they did not.
func (e javaBench) addSideBySide(scenario, figure string, muster, spring float64, unit, note string, held [2]int, fleet int) {
	if ok, why := benchSameFleet(held, fleet); !ok {
		e.add(benchRow{Scenario: scenario, Figure: figure, NotMeasured: true, Unit: unit, Note: why})
		return
	}
	e.addCompared(scenario, figure, muster, spring, unit, "", nil, note)
}

// benchSpringJVM is the JVM a team would give its Eureka server: a 1 GiB
// heap cap (what -XX:MaxRAMPercentage=75 gives in a container of about
// 1.4 GiB), the JVM's default collector (G1 on two cores) and its full
// tiered JIT; nothing else tuned.
var benchSpringJVM = []string{"-Xmx1g"}

// benchSpringJar builds the Spring server app (once per source content,
// into the interop cache) and returns its jar, or why it cannot be had.
func benchSpringJar(log io.Writer) (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", &interoptest.Unavailable{Reason: "no java on PATH (scripts/test.sh installs a JDK as root)"}
	}
	root, err := interoptest.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := interoptest.Build(filepath.Join(root, benchSpringSource), log)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "target", "eureka-server.jar"), nil
}

// startJava starts a Spring Eureka server on a free port and waits until
// GET /eureka/apps answers.
func (e javaBench) startJava(jar, name string, props ...string) (*benchChild, error) {
	port, err := benchFreePort()
	if err != nil {
		return nil, err
	}
	return e.startJavaAt(jar, name, port, benchSpringJVM, props...)
}

func benchFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startJavaAt is startJava on a given port with the given JVM options.
// props are Spring properties (--key=value) after the defaults of the
// app's application.properties (standalone, no self-registration).
func (e javaBench) startJavaAt(jar, name string, port int, jvm []string, props ...string) (*benchChild, error) {
	args := append([]string{"-Djava.io.tmpdir=" + e.tmpDir}, jvm...)
	args = append(args, "-jar", jar,
		"--server.port="+strconv.Itoa(port), "--server.address=127.0.0.1",
		"--eureka.instance.hostname=127.0.0.1",
		// Peers share the host name 127.0.0.1: without its own URL the
		// server would take every peer for itself.
		"--eureka.server.my-url=http://127.0.0.1:"+strconv.Itoa(port)+"/eureka/")
	args = append(args, props...)
	cmd := exec.Command("java", args...)
	logPath := filepath.Join(e.tmpDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	c := &benchChild{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}),
		Ready: proccontrol.Ready{Mode: "java", PID: cmd.Process.Pid, API: "127.0.0.1:" + strconv.Itoa(port)}}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	e.children = append(e.children, c)
	// Ready once its own Tomcat says it listens on the port (on a shared
	// machine another process may have taken the port since it was
	// found free, and answer instead) and GET /eureka/apps answers.
	listening := []byte("Tomcat started on port " + strconv.Itoa(port) + " ")
	deadline := time.Now().Add(120 * time.Second)
	for {
		logged, _ := os.ReadFile(logPath)
		if bytes.Contains(logged, listening) {
			code, _, err := c.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...)
			if err == nil && code == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("Spring Eureka server %s exited before it was ready (log: %s)%s", name, logPath, benchTail(logPath))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("Spring Eureka server %s not ready after 120 s (log: %s)", name, logPath)
		}
	}
}

// procCPU is the user+system CPU time of process pid (Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// procRSS is VmRSS of process pid in bytes.
func procRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// javaLiveHeap is the JVM's live heap: GC.class_histogram runs a full GC
// first and ends with the total of live objects.
func javaLiveHeap(pid int) (uint64, error) {
	out, err := exec.Command("jcmd", strconv.Itoa(pid), "GC.class_histogram").Output()
	if err != nil {
		return 0, fmt.Errorf("jcmd GC.class_histogram: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 3 || f[0] != "Total" {
		return 0, fmt.Errorf("jcmd GC.class_histogram: last line %q", lines[len(lines)-1])
	}
	return strconv.ParseUint(f[2], 10, 64)
}

// javaVisibility changes instance i's status to OUT_OF_SERVICE and polls
// the full registry (gzip JSON, as the Java client fetches it) until the
// change shows; it then removes the override.
func javaVisibility(ctx context.Context, c *benchChild, i int) (d time.Duration, polls int, err error) {
	id := benchInstanceID(i)
	code, _, err := c.api("PUT", benchStatusPath(i, "OUT_OF_SERVICE"), nil)
	if err != nil || code != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: override of %s: %d %v", c.name, id, code, err)
	}
	t0 := time.Now()
	defer c.api("DELETE", "/eureka/apps/"+benchAppName(i)+"/"+id+"/status", nil)
	marker := []byte(`"instanceId":"` + id + `"`)
	for time.Since(t0) < 90*time.Second && ctx.Err() == nil {
		polls++
		code, gz, err := c.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...)
		if err != nil || code != http.StatusOK {
			return 0, polls, fmt.Errorf("%s: GET /eureka/apps: %d %v", c.name, code, err)
		}
		raw, err := benchGunzip(gz)
		if err != nil {
			return 0, polls, err
		}
		if at := bytes.Index(raw, marker); at >= 0 {
			rest := raw[at:]
			if st := bytes.Index(rest, []byte(`"status":"`)); st >= 0 && bytes.HasPrefix(rest[st+len(`"status":"`):], []byte("OUT_OF_SERVICE")) {
				return time.Since(t0), polls, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, polls, fmt.Errorf("%s: the override of %s was not visible in the full fetch after 90 s", c.name, id)
}

// javaChurn changes 1 % of the fleet's statuses a second on c (DOWN and
// back UP, alternately) until the returned func is called.
func (e javaBench) javaChurn(c *benchChild, n int) func() {
	f := benchFleetOf(n)
	var mu sync.Mutex
	flips := make([]bool, n)
	const churners = 4
	rate := float64(n) / 100
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = loadgen.Run(ctx, loadgen.Config{Addr: c.API, Client: e.client, Concurrency: churners,
			Duration: time.Hour, Interval: time.Duration(float64(churners) / rate * float64(time.Second)),
			Next: func(w int, seq uint64) loadgen.Request {
				i := int(benchMix(seq+uint64(w)<<40) % uint64(n))
				mu.Lock()
				flips[i] = !flips[i]
				down := flips[i]
				mu.Unlock()
				if down {
					return loadgen.Request{Method: http.MethodPut, Path: f.down[i], Header: benchClientHeaders}
				}
				return loadgen.Request{Method: http.MethodPut, Path: f.up[i], Header: benchClientHeaders}
			}})
	}()
	return func() { cancel(); <-done }
}

// javaBench is the java scenario (bench --only java): its methods share
// the run's environment, benchEnv, and its helpers.
type javaBench struct{ *benchEnv }

func (e javaBench) run() error {
	const sc = "java"
	jar, err := benchSpringJar(e.log)
	var unavailable *interoptest.Unavailable
	if errors.As(err, &unavailable) {
		e.add(benchRow{Scenario: sc, Figure: "skipped", Note: "the Spring Cloud Eureka Server: " + err.Error()})
		e.logf("   skipped: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	n := benchPick(e.smoke, benchJavaN, e.fleetN)
	// Both keep changes in the delta for 10 s (Eureka's default is 180 s),
	// so that the fleet's registrations leave it before the delta is
	// measured; both read the delta's changes under the same churn.
	retention := []string{"--eureka.server.retention-time-in-m-s-in-delta-queue=10000", "--eureka.server.delta-retention-timer-interval-in-ms=2000"}
	java, err := e.startJava(jar, "spring-eureka", retention...)
	if err != nil {
		return err
	}
	// Without its own registration, as the Spring server runs (its
	// application.properties: eureka.client.register-with-eureka=false):
	// both hold the very same fleet, nothing else.
	mu, err := e.startChild("java-muster", "muster",
		"--set", "eureka.server.retention-time-in-m-s-in-delta-queue=10000",
		"--set", "eureka.server.delta-retention-timer-interval-in-ms=2000",
		"--set", "eureka.client.register-with-eureka=false")
	if err != nil {
		return err
	}
	javaNote := "ceiling = the Spring Cloud Eureka Server 5.0.3 (Spring Boot 4.0.7, eureka-core 2.0.6, Jersey 3, Tomcat; -Xmx1g, default G1 and JIT, its defaults but a 10 s delta retention), registering first cold; neither registers itself: both hold the fleet alone"
	javaEmpty, heapErr := javaLiveHeap(java.PID)
	musterEmpty, err := mu.mem(true)
	if err != nil {
		return err
	}

	// Registration: the same 10k instances, 64 connections, Muster first.
	var rates [2]float64
	for k, c := range []*benchChild{mu, java} {
		res, err := e.registerFleet(c, 0, n)
		if err != nil {
			return err
		}
		rates[k] = res.RPS()
	}
	registered := time.Now()
	e.addCompared(sc, fmt.Sprintf("registrations/s (%s, 64 conns)", benchSize(n)), rates[0], rates[1], "req/s", "", nil, javaNote)

	// Heartbeats, closed loop, after warming the JVM's JIT with the same
	// requests and full fetches (the comparison's own warm-up is short).
	f := benchFleetOf(n)
	hb := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(n)], Header: benchClientHeaders}
	}}
	jit := 20 * time.Second
	if e.quick {
		jit = 6 * time.Second
	}
	for _, warm := range []loadgen.Config{hb, {Next: func(int, uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: benchFetchHeaders}
	}}} {
		warm.Duration = jit / 2
		if _, err := e.load(java, warm); err != nil {
			return err
		}
	}
	m, j, err := e.compare(mu, java, hb, nil)
	if err != nil {
		return err
	}
	e.addCompared(sc, fmt.Sprintf("heartbeats/s (%s, 64 conns)", benchSize(n)), m.res.RPS(), j.res.RPS(), "req/s", "", nil, roundRatios(m, j))
	e.addCompared(sc, "server CPU per heartbeat", m.cpuPerReq(), j.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process, closed loop")
	if bad := m.res.NotOK() + j.res.NotOK(); bad > 0 {
		e.add(benchRow{Scenario: sc, Figure: "failed heartbeats", Value: float64(bad), Note: fmt.Sprintf("Muster %v, Spring %v", m.res.Status, j.res.Status)})
	}
	// The same at a fixed rate both servers keep up with: what a heartbeat
	// costs a server that is idle between requests, as in production.
	const fixedRate, fixedConns = 2000, 16
	paced := hb
	paced.Concurrency, paced.Interval = fixedConns, time.Second*fixedConns/fixedRate
	mf, jf, err := e.compare(mu, java, paced, nil)
	if err != nil {
		return err
	}
	e.addCompared(sc, fmt.Sprintf("server CPU per heartbeat at %d/s", fixedRate), mf.cpuPerReq(), jf.cpuPerReq(), "µs", "", nil,
		fmt.Sprintf("user+system CPU of the server process, %d conns paced to %d heartbeats/s in all (served %.0f/s and %.0f/s)", fixedConns, fixedRate, mf.res.RPS(), jf.res.RPS()))

	// Full fetches, gzip JSON and XML, the Spring server with its
	// defaults (the read-only cache on), measured once both full fetches
	// hold exactly the fleet: at most benchSpringCacheBound after the
	// registrations (see there), else the rows are not measured.
	fleetBy := registered.Add(benchSpringCacheBound)
	for _, format := range []struct {
		name  string
		req   loadgen.Request
		pairs []string
	}{
		{"gzip JSON", loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: benchFetchHeaders}, benchFetchHeaderPairs},
		{"gzip XML", loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: benchFetchXMLHeaders}, benchFetchXMLHeaderPairs},
	} {
		var sizes, held [2]int
		waited := time.Now()
		for k, c := range []*benchChild{mu, java} {
			// Polled every second: each poll is a full fetch and its gunzip.
			_ = benchPoll(e.ctx, fleetBy, time.Second, func() bool {
				code, body, err := c.api("GET", "/eureka/apps", nil, format.pairs...)
				if err != nil || code != http.StatusOK {
					return false
				}
				raw, err := benchGunzip(body)
				if err != nil {
					return false
				}
				sizes[k], held[k] = len(body), benchCountInstances(raw)
				return held[k] == n
			})
		}
		rate, cpu, bytesRow := "full fetches ("+format.name+", "+benchSize(n)+")/s", "server CPU per full fetch ("+format.name+")", "bytes per full fetch ("+format.name+")"
		if same, _ := benchSameFleet(held, n); !same {
			for _, row := range []struct{ figure, unit string }{{rate, "req/s"}, {cpu, "µs"}, {bytesRow, "B"}} {
				e.addSideBySide(sc, row.figure, 0, 0, row.unit, "", held, n)
			}
			e.logf("   %s full fetches not measured: waited until %.0f s after the registrations", format.name, time.Since(registered).Seconds())
			continue
		}
		fleetNote := fmt.Sprintf("both full fetches held exactly the %d instances (the Spring server's read-only cache on, as by default; waited %.1f s for it, %.0f s after the registrations)",
			n, time.Since(waited).Seconds(), time.Since(registered).Seconds())
		req := format.req
		m, j, err := e.compare(mu, java, loadgen.Config{Next: func(int, uint64) loadgen.Request { return req }}, nil)
		if err != nil {
			return err
		}
		e.addSideBySide(sc, rate, m.res.RPS(), j.res.RPS(), "req/s", roundRatios(m, j)+"; "+fleetNote, held, n)
		e.addSideBySide(sc, cpu, m.cpuPerReq(), j.cpuPerReq(), "µs", "", held, n)
		e.addSideBySide(sc, bytesRow, float64(sizes[0]), float64(sizes[1]), "B", "", held, n)
	}

	// Memory once the registrations have left both deltas and both hold
	// what serving full fetches leaves cached (the Spring server: the JSON
	// and XML payloads, plain and gzip, in its response cache; Muster: its
	// gzip pieces): the state of a server its clients fetch from.
	time.Sleep(time.Until(registered.Add(13 * time.Second))) // 10 s retention, 2 s timer
	if heapErr == nil {
		javaFull, err := javaLiveHeap(java.PID)
		if err != nil {
			return err
		}
		musterFull, err := mu.mem(true)
		if err != nil {
			return err
		}
		per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
		e.addCompared(sc, "live heap per instance after a full GC", per(musterFull.HeapAlloc, musterEmpty.HeapAlloc), per(javaFull, javaEmpty), "B", "", nil,
			"with gzip JSON and XML full fetches cached; Go: HeapAlloc after GC; JVM: jcmd GC.class_histogram total (a full GC); each minus its empty server's")
	} else {
		e.add(benchRow{Scenario: sc, Figure: "live heap per instance after a full GC", Note: heapErr.Error()})
	}

	// Deltas under churn of 1 % of the fleet a second on both servers.
	stops := []func(){e.javaChurn(mu, n), e.javaChurn(java, n)}
	time.Sleep(12 * time.Second) // a full delta retention of churn
	var deltaSizes, deltaInstances [2]int
	for k, c := range []*benchChild{mu, java} {
		code, gz, err := c.api("GET", "/eureka/apps/delta", nil, benchFetchHeaderPairs...)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%s: GET /eureka/apps/delta: %d %v", c.name, code, err)
		}
		raw, err := benchGunzip(gz)
		if err != nil {
			return err
		}
		deltaSizes[k], deltaInstances[k] = len(gz), max(bytes.Count(raw, []byte(`"instanceId"`)), 1)
	}
	delta := loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps/delta", Header: benchFetchHeaders}
	m, j, err = e.compare(mu, java, loadgen.Config{Next: func(int, uint64) loadgen.Request { return delta }}, nil)
	for _, stop := range stops {
		stop()
	}
	if err != nil {
		return err
	}
	e.addCompared(sc, "delta fetches (gzip JSON, 1 %/s churn)/s", m.res.RPS(), j.res.RPS(), "req/s", "", nil, roundRatios(m, j))
	e.addCompared(sc, "bytes per delta fetch (gzip JSON)", float64(deltaSizes[0]), float64(deltaSizes[1]), "B", "", nil,
		fmt.Sprintf("~10 s of 1 %%/s churn: %d and %d changed instances (the Spring server's delta is up to 30 s old: read-only cache)", deltaInstances[0], deltaInstances[1]))
	e.addCompared(sc, "delta bytes per changed instance (gzip JSON)", float64(deltaSizes[0])/float64(deltaInstances[0]), float64(deltaSizes[1])/float64(deltaInstances[1]), "B", "", nil, "")
	e.addCompared(sc, "resident memory (10k, after the fetches)", float64(procRSS(mu.PID))/(1<<20), float64(procRSS(java.PID))/(1<<20), "MiB", "", nil, "VmRSS")

	// A change's visibility in the full fetch: Spring with its defaults
	// (a read-only cache refreshed every 30 s).
	samples := 3
	if e.quick {
		samples = 2
	}
	// firstPoll counts the changes seen by the first fetch after them.
	firstPoll := map[*benchChild]int{}
	visible := func(c *benchChild, from int) ([]time.Duration, error) {
		var ds []time.Duration
		for s := range samples {
			d, polls, err := javaVisibility(e.ctx, c, from+s*benchPerApp*7)
			if err != nil {
				return nil, err
			}
			if polls == 1 {
				firstPoll[c]++
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds, nil
	}
	mv, err := visible(mu, 13)
	if err != nil {
		return err
	}
	jv, err := visible(java, 13)
	if err != nil {
		return err
	}
	e.addCompared(sc, "change → visible in the full fetch, median", ms(mv[len(mv)/2]), ms(jv[len(jv)/2]), "ms", "", nil,
		fmt.Sprintf("Spring with its defaults (read-only cache, 30 s); max Muster %.0f ms, Spring %.0f ms; seen by the first fetch after the change: Muster %d, Spring %d of %d (polls: a gzip JSON full fetch and gunzip, then 100 ms)",
			ms(mv[len(mv)-1]), ms(jv[len(jv)-1]), firstPoll[mu], firstPoll[java], samples))
	java.stop()

	// The same with the Spring server's read-only cache off (it then reads
	// through its read-write cache, invalidated on every change).
	java2, err := e.startJava(jar, "spring-eureka-nocache", append(retention, "--eureka.server.use-read-only-response-cache=false")...)
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(java2, 0, n); err != nil {
		return err
	}
	firstPoll0 := firstPoll[mu]
	jv2, err := visible(java2, 29)
	if err != nil {
		return err
	}
	mv2, err := visible(mu, 29)
	if err != nil {
		return err
	}
	e.addCompared(sc, "change → visible in the full fetch, median (Spring cache off)", ms(mv2[len(mv2)/2]), ms(jv2[len(jv2)/2]), "ms", "", nil,
		fmt.Sprintf("--eureka.server.use-read-only-response-cache=false; max Muster %.0f ms, Spring %.0f ms; seen by the first fetch: Muster %d, Spring %d of %d",
			ms(mv2[len(mv2)-1]), ms(jv2[len(jv2)-1]), firstPoll[mu]-firstPoll0, firstPoll[java2], samples))
	java2.stop()
	return e.javaPropagation(jar)
}

// javaPropagation times a registration on one server until the other
// answers it (GET /apps/APP/ID, which neither caches): two Spring servers
// as each other's static peers against two clustered Muster nodes.
func (e javaBench) javaPropagation(jar string) error {
	const sc = "java"
	samples := 20
	if e.quick {
		samples = 8
	}
	pa, err := benchFreePort()
	if err != nil {
		return err
	}
	pb, err := benchFreePort()
	if err != nil {
		return err
	}
	peer := func(p int) []string {
		return []string{"--eureka.client.service-url.defaultZone=http://127.0.0.1:" + strconv.Itoa(p) + "/eureka/"}
	}
	small := []string{"-Xmx256m"}
	ja, err := e.startJavaAt(jar, "spring-peer-a", pa, small, peer(pb)...)
	if err != nil {
		return err
	}
	jb, err := e.startJavaAt(jar, "spring-peer-b", pb, small, peer(pa)...)
	if err != nil {
		return err
	}
	ma, err := e.startChild("java-prop-a", "muster", "--cluster")
	if err != nil {
		return err
	}
	mb, err := e.startChild("java-prop-b", "muster", "--cluster", "--join", ma.Gossip)
	if err != nil {
		return err
	}
	if err := benchWait(e.ctx, 30*time.Second, "two Muster nodes to see each other", func() bool {
		for _, nd := range []*benchChild{ma, mb} {
			if st, err := nd.status(); err != nil || st.Peers != 1 || !st.Opened {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	run := func(a, b *benchChild, from int) ([]time.Duration, error) {
		var ds []time.Duration
		for s := range samples {
			i := from + s
			code, body, err := a.api("POST", "/eureka/apps/"+benchAppName(i), benchRegisterBody(i), "Content-Type", "application/json")
			if err != nil || code != http.StatusNoContent {
				return nil, fmt.Errorf("%s: register %d: %d %v %s", a.name, i, code, err, body)
			}
			t0 := time.Now()
			for {
				code, _, err := b.api("GET", "/eureka/apps/"+benchAppName(i)+"/"+benchInstanceID(i), nil, "Accept", "application/json")
				if err == nil && code == http.StatusOK {
					ds = append(ds, time.Since(t0))
					break
				}
				if time.Since(t0) > 30*time.Second {
					return nil, fmt.Errorf("%s: instance %d registered on %s not there after 30 s (%d %v)", b.name, i, a.name, code, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // not one batch for all
		}
		slices.Sort(ds)
		return ds, nil
	}
	md, err := run(ma, mb, 2*benchJavaN)
	if err != nil {
		return err
	}
	jd, err := run(ja, jb, 2*benchJavaN)
	if err != nil {
		return err
	}
	e.addCompared(sc, "register on one peer → on the other, median", ms(md[len(md)/2]), ms(jd[len(jd)/2]), "ms", "", nil,
		fmt.Sprintf("2 Muster nodes (gossip cluster) against 2 Spring servers as static peers; max Muster %.0f ms, Spring %.0f ms of %d; polled every 10 ms",
			ms(md[len(md)-1]), ms(jd[len(jd)-1]), samples))
	ja.stop()
	jb.stop()
	return nil
}

// stopJava ends a Spring server child: SIGTERM, then SIGKILL after 10 s.
func (c *benchChild) stopJava() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// benchCountInstances counts the instances of a full fetch's plain JSON
// or XML.
func benchCountInstances(raw []byte) int {
	return max(bytes.Count(raw, []byte(`"instanceId"`)), bytes.Count(raw, []byte("<instanceId>")))
}

// benchPoll calls cond until it is true (true), every interval, and
// false once deadline has passed (cond is called at least once).
func benchPoll(ctx context.Context, deadline time.Time, every time.Duration, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	return true
}

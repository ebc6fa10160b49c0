package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- 7. A million instances (on demand: --million or --only million) ----
//
// One node is filled with the Spring-like fleet from cold, then measured
// the way the 100k node is: live heap with the payloads cached, the first
// full fetch after one change, heartbeats against the ceiling (and against
// a 10k node in the same rounds), and a second node copying the whole
// registry from it through syncUp (replication.Syncer and
// HTTPTransport.FetchRegistry, over loopback HTTP). It takes several
// minutes and ~3 GB for the two nodes, so a normal run leaves it out.

// benchMillionN is the size of the million scenario (--million-size).
const benchMillionN = 1_000_000

func benchMillionLabel(n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return benchSize(n)
}

// benchMillionLimit raises muster.max-instances (1,000,000 by default)
// above the fleet: each node registers itself too, so a fleet of exactly
// the default would have its last registration refused with 503.
func benchMillionLimit(n int) string {
	return fmt.Sprintf("muster.max-instances=%d", max(n+16, 1_000_000))
}

// benchRun is one side of an alternation: load cfg against target (or
// drive runs it), CPU summed over the processes in cpuOf (target alone when
// empty).
type benchRun struct {
	target *benchChild
	cpuOf  []*benchChild
	cfg    loadgen.Config
	drive  func(loadgen.Config) (loadgen.Result, error)
}

func (r benchRun) cpu() time.Duration {
	procs := r.cpuOf
	if len(procs) == 0 {
		procs = []*benchChild{r.target}
	}
	var t time.Duration
	for _, c := range procs {
		t += c.cpu()
	}
	return t
}

// alternate is compare for any number of sides: a warm-up of each, then
// e.rounds rounds, each starting one side later than the round before, so
// drift on a noisy machine hits all of them alike.
func (e *benchEnv) alternate(runs []benchRun) ([]benchSide, error) {
	sides := make([]benchSide, len(runs))
	one := func(i int, d time.Duration) (loadgen.Result, time.Duration, error) {
		cfg := runs[i].cfg
		cfg.Duration = d
		cpu0 := runs[i].cpu()
		var res loadgen.Result
		var err error
		if runs[i].drive != nil {
			res, err = runs[i].drive(cfg)
		} else {
			res, err = e.load(runs[i].target, cfg)
		}
		return res, runs[i].cpu() - cpu0, err
	}
	for i := range runs {
		if _, _, err := one(i, e.warmup); err != nil {
			return nil, err
		}
	}
	for r := 0; r < e.rounds; r++ {
		for k := range runs {
			i := (r + k) % len(runs)
			res, cpu, err := one(i, e.dur)
			if err != nil {
				return nil, err
			}
			sides[i].add(res, cpu)
		}
	}
	return sides, nil
}

// alternateAtLeast is alternate with roundsAtLeast(n) rounds: for
// comparisons whose differences are a few percent of figures that noise
// moves as much.
func (e *benchEnv) alternateAtLeast(n int, runs []benchRun) ([]benchSide, error) {
	saved := e.rounds
	e.rounds = e.roundsAtLeast(n)
	defer func() { e.rounds = saved }()
	return e.alternate(runs)
}

// roundsAtLeast is the run's rounds, at least n but for --smoke, which
// only checks that a scenario runs.
func (e *benchEnv) roundsAtLeast(n int) int {
	if e.smoke {
		return e.rounds
	}
	return max(e.rounds, n)
}

// millionBench is the million scenario (bench --only million): its methods share
// the run's environment, benchEnv, and its helpers.
type millionBench struct{ *benchEnv }

func (e millionBench) run() error {
	n := e.millionN
	label := benchMillionLabel(n)
	const sc = "million"

	// 1. Registration from cold. Bodies are made as they are sent (a
	// million of them would take 1.1 GB in this process).
	mu, err := e.startChild("million-muster", "muster", "--set", benchMillionLimit(n),
		"--set", "eureka.server.retention-time-in-m-s-in-delta-queue=3000",
		"--set", "eureka.server.delta-retention-timer-interval-in-ms=500")
	if err != nil {
		return err
	}
	empty, err := mu.mem(true)
	if err != nil {
		return err
	}
	regPaths := make([]string, n/benchPerApp+1)
	for a := range regPaths {
		regPaths[a] = "/eureka/apps/" + benchAppName(a*benchPerApp)
	}
	cpu0 := mu.cpu()
	res, err := e.load(mu, loadgen.Config{Total: uint64(n), Next: func(w int, seq uint64) loadgen.Request {
		i := int(seq)
		return loadgen.Request{Method: http.MethodPost, Path: regPaths[i/benchPerApp], Header: benchJSONBodyHeaders, Body: benchRegisterBody(i)}
	}})
	if err != nil {
		return err
	}
	regCPU := mu.cpu() - cpu0
	// The eviction run that forgets the fleet's arrivals comes two renewal
	// windows (2 × 60 s) after the last, within one eviction interval
	// (60 s); see millionWarm.
	settled := time.Now().Add(benchPick(e.smoke, 3*time.Minute+5*time.Second, 0))
	if res.NotOK() > 0 {
		return fmt.Errorf("registering %d instances: %d failed (statuses %v, first error %v)", n, res.NotOK(), res.Status, res.FirstErr)
	}
	if st, err := mu.status(); err != nil || st.Fleet != n {
		return fmt.Errorf("after registering %d: %+v %v (want a fleet of %d)", n, st, err, n)
	}
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("registration of %s instances from cold, 64 conns", label), Value: res.Elapsed.Seconds(), Unit: "s",
		Note: fmt.Sprintf("%.0f registrations/s, p99 %.1f ms; server CPU %.1f µs per registration (bodies made by the load generator as it sends)",
			res.RPS(), ms(res.Latency.Quantile(0.99)), float64(regCPU.Microseconds())/float64(n))})
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("registrations from cold (%s)/s", label), Value: res.RPS(), Unit: "req/s",
		Note: "compare: the registration row at 10k"})
	time.Sleep(4 * time.Second) // retention 3 s + a pruning run, as the 100k node

	cycle, err := e.millionMemory(mu, empty, n, label)
	if err != nil {
		return err
	}
	if err := e.millionFirstFetch(mu, label); err != nil {
		return err
	}
	if err := e.millionHeartbeat(mu, n, label, cycle, settled); err != nil {
		return err
	}
	return e.millionSync(mu, n, label)
}

// benchGCCycle is what one full collection of the big node's live heap
// cost, idle (millionMemory), for the heartbeat row to spread over renewals.
type benchGCCycle struct {
	cpu  time.Duration
	heap uint64 // live heap it marked, bytes
}

// millionMemory: live heap per instance, registry and snapshot, then with
// the gzip JSON full payload cached (the figure with a target, as at 100k),
// then with the gzip XML one too; and what one full collection of that heap
// costs.
func (e millionBench) millionMemory(mu *benchChild, empty proccontrol.Mem, n int, label string) (benchGCCycle, error) {
	const sc = "million"
	per := func(v, base uint64) float64 { return (float64(v) - float64(base)) / float64(n) }
	if _, err := mu.ctl("GET", "/snapshot", nil); err != nil {
		return benchGCCycle{}, err
	}
	withSnap, err := mu.mem(true)
	if err != nil {
		return benchGCCycle{}, err
	}
	code, gz, err := mu.api("GET", "/eureka/apps", nil, benchFetchHeaderPairs...)
	if err != nil || code != 200 {
		return benchGCCycle{}, fmt.Errorf("GET /eureka/apps: %d %v", code, err)
	}
	withJSON, err := mu.mem(true)
	if err != nil {
		return benchGCCycle{}, err
	}
	code, gzXML, err := mu.api("GET", "/eureka/apps", nil, benchFetchXMLHeaderPairs...)
	if err != nil || code != 200 {
		return benchGCCycle{}, fmt.Errorf("GET /eureka/apps (XML): %d %v", code, err)
	}
	withBoth, err := mu.mem(true)
	if err != nil {
		return benchGCCycle{}, err
	}
	if e.profileDir != "" {
		path := filepath.Join(e.profileDir, "million-"+label+".heap.pprof")
		if err := mu.heapProfile(path); err != nil {
			return benchGCCycle{}, err
		}
		e.logf("   heap profile of the %s node with both payloads cached: %s", label, path)
	}
	// What one collection of this heap costs, idle: /mem runs two
	// back-to-back (nothing allocated between them, so each marks the
	// whole live heap). Under heartbeats a cycle comes once the heap has
	// grown by as much again (GOGC=100), so this over the renewals that
	// take gives the GC's share of a renewal without the noise of the
	// runtime's own estimate (which counts a mark worker's time on a P
	// even while the OS runs the load generator instead).
	cpu0 := mu.cpu()
	if _, err := mu.mem(false); err != nil {
		return benchGCCycle{}, err
	}
	cycle := benchGCCycle{cpu: (mu.cpu() - cpu0) / 2, heap: withBoth.HeapAlloc}
	// Issue 43's light collector: a cycle of a million instances in at
	// most a second of CPU, and the heap an instance no larger than
	// before (1,515 B with the JSON payload cached).
	gcTarget := time.Duration(n) * time.Microsecond
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("CPU of one full GC cycle, idle (%s)", label), Value: float64(cycle.cpu.Microseconds()) / 1e3, Unit: "ms",
		Target: fmt.Sprintf("≤ %.0f ms", float64(gcTarget.Milliseconds())), Met: benchBool(cycle.cpu <= gcTarget),
		Note: fmt.Sprintf("two forced collections of the %.0f MB live heap, halved; %.2f µs per instance", float64(withBoth.HeapAlloc)/1e6, float64(cycle.cpu.Nanoseconds())/1e3/float64(n))})
	const target = 1515
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("live heap per instance (%s): registry + snapshot", label), Value: per(withSnap.HeapAlloc, empty.HeapAlloc), Unit: "B",
		Note: "Spring-like instances (3–5 metadata entries), delta queue pruned"})
	v := per(withJSON.HeapAlloc, empty.HeapAlloc)
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("live heap per instance (%s): + gzip JSON payload cached", label), Value: v, Unit: "B",
		Target: fmt.Sprintf("≤ %d B", target), Met: benchBool(v <= target),
		Note: fmt.Sprintf("after one gzip JSON full fetch (%.0f MB, %.0f B/instance on the wire)", float64(len(gz))/1e6, float64(len(gz))/float64(n))})
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("live heap per instance (%s): + gzip XML payload cached too", label), Value: per(withBoth.HeapAlloc, empty.HeapAlloc), Unit: "B",
		Note: fmt.Sprintf("gzip XML %.0f MB; RSS %.0f MiB in all, %.0f B/instance over the empty node's", float64(len(gzXML))/1e6,
			float64(withBoth.RSS)/(1<<20), per(withBoth.RSS, empty.RSS))})
	return cycle, nil
}

// millionFirstFetch times the first full GET after one status change, JSON
// and XML, from the client: it includes sending the whole response, which
// the same GET unchanged costs too.
func (e millionBench) millionFirstFetch(mu *benchChild, label string) error {
	const sc = "million"
	reps := 5
	if e.quick {
		reps = 3
	}
	var profDone <-chan error
	if e.profileDir != "" {
		profDone = mu.profile(10*time.Second, filepath.Join(e.profileDir, "million-rebuild-"+label+".cpu.pprof"))
		time.Sleep(100 * time.Millisecond)
	}
	k := 0
	for _, format := range []struct {
		name, header string
		pairs        []string
	}{{"gzip JSON", benchFetchHeaders, benchFetchHeaderPairs}, {"gzip XML", benchFetchXMLHeaders, benchFetchXMLHeaderPairs}} {
		req := loadgen.Request{Method: http.MethodGet, Path: "/eureka/apps", Header: format.header}
		ttfbCached, ttfbRebuild, err := timeAroundChanges(mu, reps, &k, func() (time.Duration, error) { return benchFirstByte(mu, format.pairs) })
		if err != nil {
			return err
		}
		cached, rebuild, err := timeAroundChanges(mu, reps, &k, func() (time.Duration, error) { return e.timeOne(mu, req) })
		if err != nil {
			return err
		}
		med := rebuild[len(rebuild)/2]
		e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("first %s GET after one change (%s), median", format.name, label), Value: ms(med), Unit: "ms",
			Target: "≤ 50 ms", Met: benchBool(med <= 50*time.Millisecond),
			Note: fmt.Sprintf("same GET unchanged: %.1f ms; max after a change %.1f ms of %d", ms(cached[len(cached)/2]), ms(rebuild[len(rebuild)-1]), reps)})
		e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("  its first byte after one change (%s), median", label), Value: ms(ttfbRebuild[len(ttfbRebuild)/2]), Unit: "ms",
			Note: fmt.Sprintf("the server's share: the new snapshot and payload before the answer starts; unchanged %.1f ms; max after a change %.1f ms",
				ms(ttfbCached[len(ttfbCached)/2]), ms(ttfbRebuild[len(ttfbRebuild)-1]))})
	}
	if k%2 == 1 {
		if err := benchToggle(mu, k); err != nil {
			return err
		}
	}
	if profDone != nil {
		return <-profDone
	}
	return nil
}

// millionHeartbeat drives heartbeats over all the instances of the big
// node, a 10k node and the ceiling in the same rounds.
func (e millionBench) millionHeartbeat(mu *benchChild, n int, label string, cycle benchGCCycle, settled time.Time) error {
	const sc = "million"
	small := e.fleetN
	bare, err := e.startChild("million-bare", "bare")
	if err != nil {
		return err
	}
	s, err := e.startChild("million-10k", "muster")
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(s, 0, small); err != nil {
		return err
	}
	hb := make([]string, n)
	for i := range hb {
		hb[i] = benchHeartbeatPath(i)
	}
	f := benchFleetOf(small)
	bigCfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: hb[benchMix(seq)%uint64(n)], Header: benchClientHeaders}
	}}
	smallCfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[benchMix(seq)%uint64(small)], Header: benchClientHeaders}
	}}
	// The control: the same bare route in a process that holds a settled
	// registry of the same n instances it never touches. What it loses
	// against the plain bare route is what the heap alone costs a Go
	// server on this machine (marking it, allocating beside it).
	held, err := e.startChildWait("million-bare-held", "bare", 5*time.Minute, "--hold", strconv.Itoa(n))
	if err != nil {
		return err
	}
	warm, err := e.millionWarm(mu, bigCfg, settled)
	if err != nil {
		return err
	}
	heldWarm := bigCfg
	heldWarm.Duration = 10 * time.Second
	if _, err := e.load(held, heldWarm); err != nil {
		return err
	}
	smallGC0, err := s.gc()
	if err != nil {
		return err
	}
	bigGC0, err := mu.gc()
	if err != nil {
		return err
	}
	sides, err := e.alternate([]benchRun{{target: mu, cfg: bigCfg}, {target: s, cfg: smallCfg}, {target: bare, cfg: smallCfg}, {target: held, cfg: bigCfg}})
	if err != nil {
		return err
	}
	big, sm, b, hs := sides[0], sides[1], sides[2], sides[3]
	smallGC1, err := s.gc()
	if err != nil {
		return err
	}
	bigGC1, err := mu.gc()
	if err != nil {
		return err
	}
	// Heap allocated per renewal: what sets how often each node collects
	// (the control requests between the readings are a handful).
	allocPer := func(g0, g1 proccontrol.GC, requests uint64) float64 {
		return float64(g1.AllocBytes-g0.AllocBytes) / float64(max(requests, 1))
	}
	// The 10k node collects many times a round; its GC CPU per renewal is
	// read over the rounds (its warm-up requests are few next to them).
	smallGCPer := (smallGC1.CPUSeconds - smallGC0.CPUSeconds) * 1e6 / float64(max(sm.res.Requests, 1))
	for _, side := range sides[:2] {
		if bad := side.res.NotOK(); bad > 0 {
			return fmt.Errorf("heartbeats: %d failed (statuses %v, first error %v)", bad, side.res.Status, side.res.FirstErr)
		}
	}
	if err := e.profileDuring(mu, "million-heartbeat-"+label, bigCfg); err != nil {
		return err
	}
	bigRatio, smallRatio := big.res.RPS()/b.res.RPS(), sm.res.RPS()/b.res.RPS()
	bigAlloc := allocPer(bigGC0, bigGC1, big.res.Requests)
	// The idle cycle's CPU spread over the renewals between two cycles
	// (the heap grows by its live size, GOGC=100, at bigAlloc a renewal).
	cycleShare := ""
	if cycle.cpu > 0 && bigAlloc > 0 {
		per := float64(cycle.cpu.Nanoseconds()) / 1e3 / (float64(cycle.heap) / bigAlloc)
		cycleShare = fmt.Sprintf("; an idle GC cycle's CPU over the renewals between two cycles: %.1f µs per renewal", per)
	}
	e.addCompared(sc, fmt.Sprintf("renewals (%s instances, 64 conns)/s", label), big.res.RPS(), b.res.RPS(), "req/s", "", nil,
		fmt.Sprintf("random instances of the %s; %s", label, roundRatios(big, b)))
	e.addCompared(sc, "renewals (10k instances, same rounds)/s", sm.res.RPS(), b.res.RPS(), "req/s", "", nil, roundRatios(sm, b))
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("heartbeat ratio at %s ÷ ratio at 10k", label), Value: bigRatio / smallRatio, Unit: "×",
		Note: fmt.Sprintf("for information (judged against a ceiling of the same size, below): %.2f against %.2f of the same-run ceiling; server CPU per renewal %.1f µs at %s, %.1f µs at 10k; %s; GC CPU per renewal %.1f µs at 10k over the rounds; heap allocated per renewal %.0f B at %s, %.0f B at 10k%s",
			bigRatio, smallRatio, big.cpuPerReq(), label, sm.cpuPerReq(), warm, smallGCPer,
			bigAlloc, label, allocPer(smallGC0, smallGC1, sm.res.Requests), cycleShare)})
	e.addCompared(sc, fmt.Sprintf("bare route holding a %s registry it never touches/s", label), hs.res.RPS(), b.res.RPS(), "req/s", "", nil,
		fmt.Sprintf("the heap alone: the bare route in a process that holds a settled registry of the %s (%.1f µs CPU per request against %.1f); %s",
			label, hs.cpuPerReq(), b.cpuPerReq(), roundRatios(hs, b)))
	// The same comparison with a ceiling of the same size: Muster at 1M
	// against the bare route that holds 1M, beside Muster at 10k against
	// the plain one. What is left is what Muster's own code loses at 1M.
	sizedRatio := big.res.RPS() / hs.res.RPS()
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("heartbeat ratio at %s against a ceiling of that size ÷ ratio at 10k", label), Value: sizedRatio / smallRatio, Unit: "×",
		Target: "≥ 0.9 (judged row)", Met: benchBool(sizedRatio/smallRatio >= 0.9),
		Note: fmt.Sprintf("the control of the 1M row: %.2f of the bare route holding the same %s against %.2f of the plain one at 10k, same rounds", sizedRatio, label, smallRatio)})
	held.stop()
	bare.stop()
	s.stop()
	return nil
}

// millionWarm drives heartbeats at the big node until it has settled and
// its runtime has run a GC cycle of its own after that, and says what
// that cycle cost.
//
// Settled: the registry keeps the arrivals of the last two renewal
// windows (self-preservation's allowance for new leases). They were a
// map of a million lease pointers right after the fleet registered, ~22 %
// more for every GC cycle to mark, until the eviction run after two
// windows forgot them; they are now per-slice counts and an id on each
// lease, which cost a cycle nothing (BenchmarkRegistry_GC, fresh against
// settled), but the warm-up still waits for that run (settled is when it
// has surely come), so the rows compare with the earlier runs'.
//
// The memory figures returned the node's free memory to the OS, so right
// after them every page the heap grows into is faulted in afresh (~10 %
// of the CPU under heartbeats at 1M on the machine this was written on).
// A node that has run for a while keeps those pages and pays a GC cycle
// instead each time its heap doubles, which at 1M is once in several
// hundred thousand renewals: rarer than a round. Measuring after one
// natural cycle, and reporting the cycle's cost per renewal beside the
// rounds, shows the steady state rather than the aftermath of the
// measurement.
func (e millionBench) millionWarm(mu *benchChild, cfg loadgen.Config, settled time.Time) (string, error) {
	most := benchPick(e.smoke, 7*time.Minute, 3*time.Second)
	t0 := time.Now()
	var renewals, sinceSettled uint64
	var gc0 proccontrol.GC
	var cpu0 time.Duration
	isSettled := false
	step := cfg
	step.Duration = benchPick(e.smoke, 5*time.Second, time.Second)
	for time.Since(t0) < most {
		if !isSettled && !time.Now().Before(settled) {
			g, err := mu.gc()
			if err != nil {
				return "", err
			}
			gc0, cpu0, isSettled = g, mu.cpu(), true
		}
		res, err := e.load(mu, step)
		if err != nil {
			return "", err
		}
		if bad := res.NotOK(); bad > 0 {
			return "", fmt.Errorf("warm-up heartbeats: %d failed (statuses %v, first error %v)", bad, res.Status, res.FirstErr)
		}
		renewals += res.Requests
		if !isSettled {
			continue
		}
		sinceSettled += res.Requests
		gc, err := mu.gc()
		if err != nil {
			return "", err
		}
		if gc.Automatic > gc0.Automatic {
			cpu := mu.cpu() - cpu0
			return fmt.Sprintf("warmed with %d renewals over %.0f s, until its arrivals were forgotten and then its first GC cycle (%d cycles in the last %d renewals, %.1f s of GC CPU by the runtime's estimate, %.1f s of CPU in all)",
				renewals, time.Since(t0).Seconds(), gc.Automatic-gc0.Automatic, sinceSettled,
				gc.CPUSeconds-gc0.CPUSeconds, cpu.Seconds()), nil
		}
	}
	return fmt.Sprintf("no GC cycle in %d renewals over %.0f s of warm-up", renewals, time.Since(t0).Seconds()), nil
}

// millionSync starts a second node whose static peer is the big one: it
// copies the registry through syncUp before it opens, as a node joining a
// cluster does.
func (e millionBench) millionSync(mu *benchChild, n int, label string) error {
	const sc = "million"
	src, err := mu.status()
	if err != nil {
		return err
	}
	cpu0 := mu.cpu()
	t0 := time.Now()
	args := []string{"--set", benchMillionLimit(n), "--set", "eureka.client.service-url.defaultZone=http://" + mu.API + "/eureka/"}
	if e.profileDir != "" {
		args = append(args, "--start-profile", filepath.Join(e.profileDir, "million-sync-"+label+".cpu.pprof"))
	}
	b, err := e.startChildWait("million-sync", "muster", 10*time.Minute, args...)
	if err != nil {
		return err
	}
	wall := time.Since(t0)
	srcCPU := mu.cpu() - cpu0
	st, err := b.status()
	if err != nil {
		return err
	}
	dstCPU := b.cpu()
	mem, err := b.mem(true)
	if err != nil {
		return err
	}
	// The copy is the source's whole registry: the fleet and the source's
	// own registration.
	met := st.SyncInstances == src.Instances && st.Fleet == n
	e.add(benchRow{Scenario: sc, Figure: fmt.Sprintf("syncUp copy of %s instances to a new node", label), Value: st.SyncSeconds, Unit: "s",
		Target: fmt.Sprintf("all %s copied", label), Met: benchBool(met),
		Note: fmt.Sprintf("%d copied (%.0f/s; the fleet and the source's own registration), fleet %d on the new node; start to ready %.1f s; CPU: new node %.1f s, source %.1f s; new node's heap %.0f B/instance",
			st.SyncInstances, float64(st.SyncInstances)/max(st.SyncSeconds, 1e-9), st.Fleet, wall.Seconds(), dstCPU.Seconds(), srcCPU.Seconds(),
			float64(mem.HeapAlloc)/float64(n))})
	b.stop()
	return nil
}

// benchFirstByte times a GET /eureka/apps until the answer's headers
// arrive (the payload is assembled before they are written), then reads
// the rest.
func benchFirstByte(c *benchChild, header []string) (time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+c.API+"/eureka/apps", nil)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	t0 := time.Now()
	resp, err := benchCtl.Do(req)
	if err != nil {
		return 0, err
	}
	d := time.Since(t0)
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /eureka/apps: %d", resp.StatusCode)
	}
	return d, nil
}

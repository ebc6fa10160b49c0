// Command checker is a Jepsen-style checker for Muster (issue 42, item 5).
// It runs a real three-node cluster of the muster binary, each node in its
// own network namespace on a bridge, drives a fleet of renewing clients and
// a writer of random operations (register, cancel, status override and its
// removal, metadata) through random nodes, records every operation with its
// invoke and acknowledge times and every node's GET /eureka/apps every
// 200 ms, injects faults from a seeded schedule (a node cut off, split
// brain, one-way partition, ring, kill -9 with and without a data dir,
// SIGSTOP, adding and removing a fourth node), heals them, and checks the
// history: no acknowledged registration lost, no acknowledged cancel
// resurrected, every node equal to the last acknowledged write of each
// piece after the heal, convergence and staleness quantiles,
// self-preservation safety, and the watch stream complete and in order.
//
// It needs root (ip netns, veth, a bridge, nft). Run it through
// scripts/checker.sh, which builds the binaries:
//
//	scripts/checker.sh -seed 7 -faults 5 -runs 3
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

type options struct {
	bin      string
	dir      string
	faults   int
	fleet    int
	writers  int
	settle   time.Duration
	converge time.Duration
	// set are extra key=value settings for every node (-set, repeated),
	// e.g. muster.log.level=debug to see where each copy came from.
	set []string
}

// run is one seeded run.
type run struct {
	seed     int64
	opt      options
	dir      string
	h        *history
	net      *netw
	nodes    [5]*node // 1..4
	insts    []*inst
	watchers []*watcher
	faults   []*Fault

	splitMu sync.Mutex
	split   map[int]bool

	gate   sync.Mutex // the writer holds it for each operation
	epochs []*epoch
}

// epoch is the state checked after a heal, the writer paused: every node's
// registry once they agree (or the wait ran out) and each client's state.
type epoch struct {
	label       string
	heal        time.Duration
	at          time.Duration // when the reads were taken
	conv        time.Duration // heal → every node identical; -1: not within the wait
	reads       map[int]map[string]View
	registered  map[string]bool
	cancelledAt map[string]time.Duration
}

// settleEpoch pauses the writer, waits for n1..n3 to agree and records
// the epoch; the caller holds r.gate.
func (r *run) settleEpoch(label string, heal time.Duration, wait time.Duration) *epoch {
	conv := r.waitConverged(wait)
	if conv >= 0 {
		conv -= heal
	}
	ep := &epoch{label: label, heal: heal, registered: map[string]bool{}, cancelledAt: map[string]time.Duration{}}
	ep.conv = conv
	ep.reads = r.finalReads()
	ep.at = r.h.now()
	for _, i := range r.insts {
		i.mu.Lock()
		ep.registered[i.key()] = i.registered
		ep.cancelledAt[i.key()] = i.cancelledAt
		i.mu.Unlock()
	}
	r.epochs = append(r.epochs, ep)
	what := "converged in " + durOr(ep.conv)
	if conv < 0 {
		what = fmt.Sprintf("NOT converged within %v", wait)
	}
	r.h.event("checked", nil, label+": "+what)
	return ep
}

func (r *run) setSplit(m map[int]bool) {
	r.splitMu.Lock()
	r.split = m
	r.splitMu.Unlock()
}

func (r *run) splitSide() map[int]bool {
	r.splitMu.Lock()
	defer r.splitMu.Unlock()
	if r.split == nil {
		return nil
	}
	// The side of a node: true for the minority; n4 is never in a split.
	return r.split
}

var (
	activeMu  sync.Mutex
	activeRun *run
)

func main() {
	seed := flag.Int64("seed", 1, "seed of the first run (the fault schedule, nodes and operations)")
	runs := flag.Int("runs", 1, "runs, with seeds seed, seed+1, …")
	var opt options
	flag.StringVar(&opt.bin, "muster", "", "the muster binary (go build -o FILE ./cmd/muster)")
	flag.StringVar(&opt.dir, "dir", "/tmp/mchk", "directory for the nodes' logs and data dirs (one subdirectory per seed)")
	flag.IntVar(&opt.faults, "faults", 5, "faults per run")
	flag.IntVar(&opt.fleet, "fleet", 24, "renewing fleet instances")
	flag.IntVar(&opt.writers, "writers", 8, "instances the writer operates on")
	flag.DurationVar(&opt.settle, "settle", 5*time.Second, "time the writer writes after each heal (once the nodes agree) before the next fault")
	flag.DurationVar(&opt.converge, "converge", 60*time.Second, "longest wait for the final convergence")
	flag.Func("set", "extra key=value setting for every node (repeatable), e.g. muster.log.level=debug", func(v string) error {
		opt.set = append(opt.set, v)
		return nil
	})
	flag.Parse()
	if opt.bin == "" {
		fmt.Fprintln(os.Stderr, "checker: -muster FILE is required")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "checker: needs root (network namespaces, nft)")
		os.Exit(2)
	}
	// One checker at a time on a machine: the namespaces have fixed names.
	lock, err := os.OpenFile("/run/mchk.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker: another checker runs on this machine (/run/mchk.lock):", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "checker: interrupted, cleaning up")
		activeMu.Lock()
		if r := activeRun; r != nil {
			r.teardown()
		}
		cleanupNet(4)
		os.Exit(130)
	}()

	failed := 0
	var summaries []string
	for k := 0; k < *runs; k++ {
		s := *seed + int64(k)
		ok, summary := runSeed(s, opt)
		summaries = append(summaries, summary)
		if !ok {
			failed++
		}
	}
	fmt.Println("\n== summary")
	for _, s := range summaries {
		fmt.Println(s)
	}
	// The plain closing line CI reads: runs that passed every check.
	fmt.Printf("checker: %d passed, %d failed\n", *runs-failed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func runSeed(seed int64, opt options) (bool, string) {
	fmt.Printf("\n== seed %d\n", seed)
	dir := filepath.Join(opt.dir, fmt.Sprintf("seed-%d", seed))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Println("ERROR:", err)
		return false, fmt.Sprintf("seed %d: ERROR %v", seed, err)
	}
	r := &run{seed: seed, opt: opt, dir: dir}
	activeMu.Lock()
	activeRun = r
	activeMu.Unlock()
	defer func() {
		activeMu.Lock()
		r.teardown()
		activeRun = nil
		activeMu.Unlock()
	}()
	res, err := r.execute()
	if err != nil {
		fmt.Println("ERROR:", err)
		return false, fmt.Sprintf("seed %d: ERROR %v", seed, err)
	}
	return res.ok(), res.summary(seed)
}

func (r *run) teardown() {
	for _, n := range r.nodes {
		if n != nil {
			n.stop(false, 0)
		}
	}
	if r.net != nil {
		cleanupNet(4)
		r.net = nil
	}
}

func (r *run) execute() (*results, error) {
	rng := rand.New(rand.NewSource(r.seed))
	r.faults = schedule(rng, r.opt.faults)
	fmt.Println("schedule:")
	for _, f := range r.faults {
		fmt.Println("  -", f)
	}
	var err error
	if r.net, err = setupNet(4); err != nil {
		return nil, err
	}
	for i := 1; i <= 4; i++ {
		r.nodes[i] = &node{i: i, bin: r.opt.bin, dir: r.dir, extra: r.opt.set}
	}
	r.h = newHistory()
	for i := 1; i <= 3; i++ {
		if err := r.nodes[i].start(); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= 3; i++ {
		if err := r.nodes[i].waitServing(60 * time.Second); err != nil {
			return nil, err
		}
	}
	r.h.event("start", nil, "n1, n2, n3 serve reads")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	goRun := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	for n := 1; n <= 4; n++ {
		goRun(func() { r.reader(ctx, n) })
	}
	for n := 1; n <= 3; n++ {
		w := &watcher{r: r, n: n}
		r.watchers = append(r.watchers, w)
		goRun(func() { w.loop(ctx) })
	}
	// The fleet registers through random nodes and renews.
	for k := 0; k < r.opt.fleet; k++ {
		r.insts = append(r.insts, &inst{app: fmt.Sprintf("CHKF%d", k%4), id: fmt.Sprintf("f-%02d", k), fleet: true, meta: "fleet"})
	}
	for k := 0; k < r.opt.writers; k++ {
		r.insts = append(r.insts, &inst{app: watchApp, id: fmt.Sprintf("w-%d", k)})
	}
	for _, i := range r.insts {
		if i.fleet {
			i.mu.Lock()
			i.node = 1 + rng.Intn(3)
			if o := r.register(i, i.node, "fleet"); o.Out == OK {
				i.registered = true
			}
			i.registered = true // renews (and registers again on a 404) anyway
			i.mu.Unlock()
		}
		hr := rand.New(rand.NewSource(rng.Int63()))
		goRun(func() { r.heartbeatLoop(ctx, i, hr) })
	}
	wctx, stopWriter := context.WithCancel(ctx)
	wrng := rand.New(rand.NewSource(rng.Int63()))
	writerDone := make(chan struct{})
	go func() { r.writer(wctx, wrng); close(writerDone) }()

	time.Sleep(5 * time.Second)
	for _, f := range r.faults {
		if err := r.applyFault(f); err != nil {
			stopWriter()
			return nil, err
		}
		time.Sleep(f.Dur)
		if err := r.healFault(f); err != nil {
			stopWriter()
			return nil, err
		}
		// Pause the writer until the nodes agree, and check that state.
		r.gate.Lock()
		r.settleEpoch("after "+f.Kind, f.End, 30*time.Second)
		r.gate.Unlock()
		time.Sleep(r.opt.settle)
	}
	// Final heal: everything up, no rules; the writer stops, the fleet
	// keeps renewing; wait for every node to serve the same.
	_ = r.net.healAll()
	for i := 1; i <= 3; i++ {
		if !r.nodes[i].running() {
			_ = r.nodes[i].start()
		}
	}
	stopWriter()
	<-writerDone
	quiet := r.h.now()
	r.settleEpoch("final", quiet, r.opt.converge)
	// A little more history after convergence, for the checks.
	time.Sleep(3 * time.Second)
	watchFinal := r.watchFinal(10 * time.Second)
	stop()
	wg.Wait()
	r.dumpHistory()
	return r.check(quiet, watchFinal), nil
}

// dumpHistory writes the whole history to history.json in the run's
// directory, for a closer look at a violation.
func (r *run) dumpHistory() {
	f, err := os.Create(filepath.Join(r.dir, "history.json"))
	if err != nil {
		fmt.Println("history.json:", err)
		return
	}
	defer f.Close()
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	type epochOut struct {
		Label string
		Heal  time.Duration
		At    time.Duration
		Conv  time.Duration
	}
	var eps []epochOut
	for _, e := range r.epochs {
		eps = append(eps, epochOut{e.label, e.heal, e.at, e.conv})
	}
	var evs []string
	for _, e := range r.h.events {
		evs = append(evs, fmt.Sprintf("%.3fs %s: %s", e.At.Seconds(), e.Kind, e.What))
	}
	_ = json.NewEncoder(f).Encode(map[string]any{
		"seed": r.seed, "events": evs, "epochs": eps, "ops": r.h.ops, "reads": r.h.reads,
	})
}

// waitConverged polls n1..n3 until three reads in a row of each are
// identical on every node; it returns when the first of them was taken
// (history time), or -1 if they never were within timeout.
func (r *run) waitConverged(timeout time.Duration) time.Duration {
	start := r.h.now()
	var first time.Duration = -1
	streak := 0
	for r.h.now()-start < timeout {
		rs := r.finalReads()
		same := len(rs) == 3 && equalViews(rs[1], rs[2]) && equalViews(rs[1], rs[3])
		if same {
			if streak == 0 {
				first = r.h.now()
			}
			streak++
			if streak >= 3 {
				return first
			}
		} else {
			streak, first = 0, -1
		}
		time.Sleep(300 * time.Millisecond)
	}
	return -1
}

// finalReads reads n1..n3 once each (missing where a read failed).
func (r *run) finalReads() map[int]map[string]View {
	out := map[int]map[string]View{}
	c := httpc
	for n := 1; n <= 3; n++ {
		rd, err := r.readOnce(c, n)
		if err == nil {
			out[n] = rd.Insts
		}
	}
	return out
}

func equalViews(a, b map[string]View) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

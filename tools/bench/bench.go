// Command bench measures Muster: performance figures of a real node, each
// measured in the same run next to the best this machine can do (a bare
// echo server driven by the same load generator, alternating with the node
// under test). Speed is reported, never asserted.
//
//	go run ./tools/bench [--quick | --smoke] [--only heartbeat,fetch,...] [--java] [--million] [--out FILE]
//
// --smoke runs every scenario (million included; java with --java) at a
// tiny size, one short round each, and fails when a scenario fails: a
// check that each scenario's code still runs, for CI, not a measurement.
//
// The node under test is package node, the assembly `muster serve` runs,
// started by this binary re-run as `bench node` in a child process; the
// ceiling is this binary run as `bench ceiling`. Neither shares a process
// with the load generator, and the server binary links no bench code.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/node"
	"github.com/muster-registry/muster/tools/loadgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) > 0 && args[0] == "ceiling":
		err = ceilingCmd(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "node":
		err = nodeCmd(args[1:], stdout, stderr)
	default:
		err = benchCmd(args, stdout, stderr)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// benchScenarios are the scenarios of the bench, in report order.
var benchScenarios = []string{"heartbeat", "fetch", "delta", "registration", "propagation", "replcpu", "antientropy", "watch", "memory", "million", "java", "dashboard", "abuse", "dns", "xds", "healthcheck", "micro"}

// benchOnDemand are left out of a run unless asked for (--only or their
// own flag): they take long, need a lot of memory, or start a JVM.
var benchOnDemand = []string{"million", "java"}

// benchCmd runs the scenarios and prints and saves the report.
func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "smaller sizes and shorter runs (the whole run takes a few minutes)")
	smoke := fs.Bool("smoke", false, "every scenario (million included, java with --java) at a tiny size and one short round, about a minute: checks that each runs, measures nothing; exits non-zero when one fails or has failed requests")
	only := fs.String("only", "", "comma-separated scenarios to run: "+strings.Join(benchScenarios, ","))
	out := fs.String("out", "bench-results.json", "where to write the results as JSON (empty: nowhere)")
	conc := fs.Int("concurrency", 64, "connections of the load generator")
	client := fs.String("client", "raw", "load generator client: raw (minimal HTTP/1.1, least CPU) or std (net/http)")
	rounds := fs.Int("rounds", 0, "measurement rounds per comparison, alternating server and ceiling (0: 3, quick 2)")
	dur := fs.Duration("duration", 0, "length of one measurement round (0: 5s, quick 1.5s)")
	warmup := fs.Duration("warmup", 0, "warm-up before each comparison, per server (0: 2s, quick 0.5s)")
	profileDir := fs.String("profile", "", "directory to save CPU profiles of the server under heartbeat and fetch load")
	verbose := fs.Bool("v", false, "show the servers' logs")
	fetchSizes := fs.String("fetch-sizes", "10000,100000", "registry sizes of the full-fetch scenario")
	million := fs.Bool("million", false, "also run the million scenario (a 1M-instance node: several minutes, ~3 GB)")
	withJava := fs.Bool("java", false, "also run the java scenario (the Spring Cloud Eureka Server of interop/spring/eureka-server, built by Maven, side by side; skipped without java or Maven Central)")
	millionN := fs.Int("million-size", benchMillionN, "registry size of the million scenario")
	var sets stringList
	fs.Var(&sets, "set", "key=value for the muster servers under test (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	lc, err := loadgen.ParseClient(*client)
	if err != nil {
		return err
	}
	selected := map[string]bool{}
	if *only == "" {
		for _, s := range benchScenarios {
			// A smoke run leaves out only the JVM (the million scenario
			// is a size like any other there).
			selected[s] = !slices.Contains(benchOnDemand, s) || *smoke && s == "million"
		}
	} else {
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(benchScenarios, s) {
				return fmt.Errorf("bench: unknown scenario %q (have %s)", s, strings.Join(benchScenarios, ", "))
			}
			selected[s] = true
		}
	}

	if *million {
		selected["million"] = true
	}
	if *withJava {
		selected["java"] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "muster-bench-")
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	e := &benchEnv{
		ctx: ctx, quick: *quick || *smoke, smoke: *smoke, conc: *conc, client: lc, sets: sets, verbose: *verbose,
		tmpDir: tmp, profileDir: *profileDir, log: stderr,
		rounds: 3, dur: 5 * time.Second, warmup: 2 * time.Second, millionN: *millionN,
		fleetN: benchFleetN, bigN: benchBigN,
	}
	if e.quick {
		e.rounds, e.dur, e.warmup = 2, 1500*time.Millisecond, 500*time.Millisecond
	}
	if e.smoke {
		e.rounds, e.dur, e.warmup = 1, 300*time.Millisecond, 100*time.Millisecond
		e.fleetN, e.bigN = benchSmokeFleetN, benchSmokeBigN
		if !set["million-size"] {
			e.millionN = benchSmokeMillionN
		}
		if !set["fetch-sizes"] {
			*fetchSizes = strconv.Itoa(e.bigN)
		}
	}
	if e.millionN < benchPerApp {
		return fmt.Errorf("bench: --million-size %d is too small", e.millionN)
	}
	if *rounds > 0 {
		e.rounds = *rounds
	}
	if *dur > 0 {
		e.dur = *dur
	}
	if *warmup > 0 {
		e.warmup = *warmup
	}
	for _, f := range strings.Split(*fetchSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("bench: bad --fetch-sizes %q", *fetchSizes)
		}
		e.fetchSizes = append(e.fetchSizes, n)
	}
	if e.profileDir != "" {
		if err := os.MkdirAll(e.profileDir, 0o755); err != nil {
			return err
		}
	}
	defer e.stopAll()
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	e.version = benchNodeVersion()

	started := time.Now()
	if e.smoke {
		e.logf("smoke run: every scenario at a tiny size (fleet %d, big registry %d, million %d), 1 round of %s; the figures measure nothing", e.fleetN, e.bigN, e.millionN, e.dur)
	}
	e.logf("bench of %s (node %s): %s, %d cores, %s; client %s, concurrency %d, %d rounds of %s (warm-up %s); logs in %s",
		e.self, e.version, benchCPUModel(), runtime.NumCPU(), runtime.Version(), lc, e.conc, e.rounds, e.dur, e.warmup, tmp)
	// memory runs before fetch: both use the 100k server, and memory must
	// see it before any payload is cached.
	order := []string{"registration", "heartbeat", "memory", "fetch", "dashboard", "delta", "propagation", "replcpu", "antientropy", "watch", "abuse", "dns", "xds", "healthcheck", "micro", "million", "java"}
	var failures []string
	for _, s := range order {
		if !selected[s] || ctx.Err() != nil {
			continue
		}
		t0 := time.Now()
		e.logf("== %s", s)
		rows0 := len(e.rows)
		err := benchRunScenario(e, s)
		if err == nil && e.smoke {
			err = benchFailedRows(e.rows[rows0:])
		}
		if err != nil {
			e.logf("   %s failed: %v", s, err)
			failures = append(failures, s+": "+err.Error())
			e.add(benchRow{Scenario: s, Figure: "FAILED", Note: err.Error()})
		}
		e.logf("   %s took %s", s, time.Since(t0).Round(100*time.Millisecond))
		// fetch and dashboard reuse the 100k node that memory leaves behind.
		e.stopBig(s == "memory" && (selected["fetch"] || selected["dashboard"]) || s == "fetch" && selected["dashboard"])
	}
	e.stopAll()

	rep := benchReport{
		Machine:  benchMachine(e.version),
		Settings: benchSettings{Quick: e.quick, Smoke: e.smoke, Client: lc.String(), Concurrency: e.conc, Rounds: e.rounds, RoundSeconds: e.dur.Seconds(), WarmupSeconds: e.warmup.Seconds(), Sets: sets},
		Started:  started.UTC().Format(time.RFC3339),
		Seconds:  math.Round(time.Since(started).Seconds()*10) / 10,
		Results:  e.sortedRows(),
	}
	benchPrintTable(stdout, rep)
	if *out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nresults written to %s\n", *out)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %d scenario(s) failed: %s", len(failures), strings.Join(failures, "; "))
	}
	_ = os.RemoveAll(tmp)
	return nil
}

// benchNodeVersion is the node package's version, with the commit this
// binary was built from when the build recorded it.
func benchNodeVersion() string {
	v := node.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" && len(st.Value) >= 12 {
				v += " " + st.Value[:12]
			}
		}
	}
	return v
}

// benchRunScenario runs scenario s: each is a type of its own around the
// shared benchEnv (abuseBench, fetchBench, ...) whose run method is the
// scenario.
func benchRunScenario(e *benchEnv, s string) error {
	var sc interface{ run() error }
	switch s {
	case "heartbeat":
		sc = heartbeatBench{e}
	case "fetch":
		sc = fetchBench{e}
	case "delta":
		sc = deltaBench{e}
	case "registration":
		sc = registrationBench{e}
	case "propagation":
		sc = propagationBench{e}
	case "antientropy":
		sc = antiEntropyBench{e}
	case "watch":
		sc = watchBench{e}
	case "memory":
		sc = memoryBench{e}
	case "abuse":
		sc = abuseBench{e}
	case "micro":
		sc = microBench{e}
	case "dns":
		sc = dnsBench{e}
	case "xds":
		sc = xdsBench{e}
	case "healthcheck":
		sc = healthCheckBench{e}
	case "dashboard":
		sc = dashboardBench{e}
	case "million":
		sc = millionBench{e}
	case "replcpu":
		sc = replCPUBench{e}
	case "java":
		sc = javaBench{e}
	default:
		return fmt.Errorf("no scenario %q", s)
	}
	return sc.run()
}

// The scenarios' registry sizes: fleetN (10k) for most, bigN (100k) for
// memory, fetch, dashboard and the second sizes of antientropy and dns;
// --smoke's tiny ones instead.
const (
	benchFleetN        = 10_000
	benchSmokeFleetN   = 500
	benchSmokeBigN     = 2_500 // dashboard's app page is SERVICE-0042
	benchSmokeMillionN = 5_000
)

// benchPick is full, or tiny in a smoke run.
func benchPick[T any](smoke bool, full, tiny T) T {
	if smoke {
		return tiny
	}
	return full
}

// benchFailedRows is an error naming the rows of failed requests, which a
// smoke run counts as the scenario failing.
func benchFailedRows(rows []benchRow) error {
	var bad []string
	for _, r := range rows {
		if strings.HasPrefix(r.Figure, "failed ") || strings.Contains(r.Figure, ": failed ") {
			bad = append(bad, fmt.Sprintf("%s: %s (%s)", r.Figure, benchFormat(r.Value), r.Note))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(bad, "; "))
}

// benchEnv is one bench run: its knobs, its child processes and its rows,
// and the helpers every scenario uses (children, load, comparisons, rows).
// A scenario is a type of its own that embeds it (benchRunScenario).
type benchEnv struct {
	ctx        context.Context
	quick      bool // also set by smoke
	smoke      bool
	fleetN     int // the usual fleet: 10k, smoke 500
	bigN       int // the large registry: 100k, smoke 2500
	rounds     int
	dur        time.Duration
	warmup     time.Duration
	conc       int
	client     loadgen.Client
	self       string // this binary: `bench node` and `bench ceiling` are its children
	version    string // the node package's version
	sets       []string
	verbose    bool
	tmpDir     string
	profileDir string
	log        io.Writer
	fetchSizes []int
	millionN   int

	children []*benchChild
	big      *benchChild     // the 100k-instance node, shared by memory and fetch
	bigEmpty proccontrol.Mem // its memory before it had instances
	rows     []benchRow
}

func (e *benchEnv) logf(format string, args ...any) {
	fmt.Fprintf(e.log, format+"\n", args...)
}

func (e *benchEnv) stopAll() {
	for _, c := range e.children {
		c.stop()
	}
	e.children = nil
	e.big = nil
}

// stopBig stops every child but the shared 100k node when keepBig is set.
func (e *benchEnv) stopBig(keepBig bool) {
	var kept []*benchChild
	for _, c := range e.children {
		if keepBig && c == e.big {
			kept = append(kept, c)
			continue
		}
		c.stop()
	}
	e.children = kept
	if !keepBig {
		e.big = nil
	}
}

// benchRow is one line of the report. Ratio is value ÷ ceiling: for rates
// higher is better, for latencies and costs lower is.
type benchRow struct {
	Scenario string   `json:"scenario"`
	Figure   string   `json:"figure"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit,omitempty"`
	Ceiling  *float64 `json:"ceiling,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Target   string   `json:"target,omitempty"`
	Met      *bool    `json:"met,omitempty"`
	Note     string   `json:"note,omitempty"`
	// NotMeasured: the row has no value, and Note says why (a
	// side-by-side row whose two sides did not hold the same fleet).
	NotMeasured bool `json:"notMeasured,omitempty"`
}

func (e *benchEnv) add(r benchRow) {
	e.rows = append(e.rows, r)
	line := fmt.Sprintf("   %-44s %s %s", r.Figure, benchFormat(r.Value), r.Unit)
	if r.NotMeasured {
		line = fmt.Sprintf("   %-44s %s", r.Figure, r.Note)
	}
	if r.Ceiling != nil {
		line += fmt.Sprintf("  (ceiling %s, ratio %.2f)", benchFormat(*r.Ceiling), *r.Ratio)
	}
	if r.Met != nil {
		line += fmt.Sprintf("  target %s: %s", r.Target, benchYesNo(*r.Met))
	}
	e.logf("%s", line)
}

// addCompared adds a row with a ceiling; the ratio is value ÷ ceiling.
func (e *benchEnv) addCompared(scenario, figure string, value, ceiling float64, unit string, target string, met *bool, note string) {
	ratio := 0.0
	if ceiling != 0 {
		ratio = value / ceiling
	}
	e.add(benchRow{Scenario: scenario, Figure: figure, Value: value, Unit: unit, Ceiling: &ceiling, Ratio: &ratio, Target: target, Met: met, Note: note})
}

func (e *benchEnv) sortedRows() []benchRow {
	rank := map[string]int{}
	for i, s := range benchScenarios {
		rank[s] = i
	}
	rows := slices.Clone(e.rows)
	// "fetch 10k" sorts with fetch.
	rankOf := func(s string) int { return rank[strings.Fields(s + " ")[0]] }
	slices.SortStableFunc(rows, func(a, b benchRow) int { return rankOf(a.Scenario) - rankOf(b.Scenario) })
	return rows
}

func benchBool(b bool) *bool { return &b }

func benchYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// benchFormat prints a figure with three or so significant digits.
func benchFormat(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

type benchReport struct {
	Machine  benchMachineInfo `json:"machine"`
	Settings benchSettings    `json:"settings"`
	Started  string           `json:"started"`
	Seconds  float64          `json:"seconds"`
	Results  []benchRow       `json:"results"`
}

type benchSettings struct {
	Quick         bool     `json:"quick"`
	Smoke         bool     `json:"smoke,omitempty"` // tiny sizes: the figures measure nothing
	Client        string   `json:"client"`
	Concurrency   int      `json:"concurrency"`
	Rounds        int      `json:"rounds"`
	RoundSeconds  float64  `json:"roundSeconds"`
	WarmupSeconds float64  `json:"warmupSeconds"`
	Sets          []string `json:"sets,omitempty"`
}

type benchMachineInfo struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMiB uint64 `json:"memoryMiB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	Muster    string `json:"muster"`
	Date      string `json:"date"`
}

func benchMachine(version string) benchMachineInfo {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return benchMachineInfo{
		CPU: benchCPUModel(), Cores: runtime.NumCPU(), MemoryMiB: benchMemTotal() >> 20,
		Kernel: strings.TrimSpace(string(kernel)), GoVersion: runtime.Version(),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Muster: version,
		Date: time.Now().UTC().Format(time.RFC3339),
	}
}

func benchCPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func benchMemTotal() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb uint64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func benchPrintTable(w io.Writer, rep benchReport) {
	m := rep.Machine
	fmt.Fprintf(w, "\nbench of muster %s (%s) on %s, %d cores, %d MiB, Linux %s, %s, %s; %.0f s",
		m.Muster, benchMode(rep.Settings), m.CPU, m.Cores, m.MemoryMiB, m.Kernel, m.GoVersion, m.Date, rep.Seconds)
	fmt.Fprintf(w, "\nload: %s client, %d connections, %d rounds × %.1f s alternating with the ceiling\n\n",
		rep.Settings.Client, rep.Settings.Concurrency, rep.Settings.Rounds, rep.Settings.RoundSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tfigure\tvalue\tceiling\tratio\ttarget\tmet?\tnote")
	for _, r := range rep.Results {
		ceil, ratio, met := "", "", ""
		if r.Ceiling != nil {
			ceil = benchFormat(*r.Ceiling)
		}
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *r.Ratio)
		}
		if r.Met != nil {
			met = benchYesNo(*r.Met)
		}
		val := strings.TrimSpace(benchFormat(r.Value) + " " + r.Unit)
		switch {
		case r.Figure == "FAILED":
			val = ""
		case r.NotMeasured:
			val = "not measured"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Figure, val, ceil, ratio, r.Target, met, r.Note)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nratio = value ÷ ceiling (for rates higher is better; for latencies and CPU lower is)")
}

func benchMode(s benchSettings) string {
	switch {
	case s.Smoke:
		return "smoke: tiny sizes, the figures measure nothing"
	case s.Quick:
		return "quick"
	}
	return "normal"
}

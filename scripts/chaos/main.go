// Command chaos runs Muster's chaos scenarios against a three-zone
// docker-compose cluster (docker-compose.yml with the short timings of
// scripts/chaos/docker-compose.chaos.yml) and a fleet of 100 simulated
// clients. Each scenario starts a fresh cluster, does its damage, prints
// what it did and the figures it measured, and PASS or FAIL; the command
// exits non-zero if any scenario failed. Run it through scripts/chaos.sh,
// which builds the image first.
//
//	go run ./scripts/chaos [-scenario partition,crash,rolling,deaths,failover,fullrestart,converge,watch] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The fleet of the chaos compose file.
const (
	fleet = 100
	// selfApp is the application the nodes register themselves under
	// (node/selfregister.go: spring.application.name, default "muster",
	// upper-cased), as a Spring Eureka server does by default
	// (eureka.client.register-with-eureka). Every node holds the three
	// nodes' own instances besides the fleet: counts of the fleet leave
	// them out, "every node identical" checks compare them too.
	selfApp = "MUSTER"
	lease   = 6 * time.Second // --lease-duration of the simulated clients
	renew   = time.Second     // --renewal-interval
	evict   = time.Second     // eureka.server.eviction-interval-timer-in-ms
)

var (
	nodes          = []string{"node-a", "node-b", "node-c"}
	clientServices = []string{"clients-a", "clients-b", "clients-c", "clients-d"}
)

type scenario struct {
	name   string
	proves string
	run    func(ctx context.Context, b *bench, r *report) error
}

var scenarios = []scenario{
	{"partition", "a node cut off from the network for three lease durations evicts nothing and says it is in self-preservation; clients fail over; afterwards every node holds the same instances", partition},
	{"crash", "a node killed and restarted while the registry changed syncs before it turns ready, and clients never see an empty registry", crash},
	{"rolling", "restarting all three nodes one at a time loses no instance", rolling},
	{"deaths", "10 % of instances dying are evicted on every node within lease + one eviction interval; 50 % dying turns self-preservation and the EMERGENCY banner on everywhere, evicts nothing, and recovers when they return", deaths},
	{"failover", "with one node down every client keeps renewing through another node", failover},
	{"fullrestart", "stopping all three nodes and starting them again, with and without a data dir, never serves a registry with fewer instances than are alive", fullRestartScenario},
	{"converge", "a node cut off until its queued replication tasks expire and memberlist declares it dead, while both sides register, override, remove overrides, change metadata and cancel, holds the same registry as the others (every client-visible field of every instance) within two anti-entropy intervals of the heal", converge},
	{"watch", "a watcher (client.Watch, blocking fetches) of an app that changes every 300 ms shows exactly its last state while nodes restart one by one, after a crash and during and after a partition: no stuck watcher, no missed final state", watchChaos},
}

func main() {
	only := flag.String("scenario", "all", "comma-separated scenarios to run: partition, crash, rolling, deaths, failover, fullrestart, converge, watch, or all")
	keep := flag.Bool("keep", false, "leave the cluster of the last scenario running")
	project := flag.String("project", "muster-chaos", "docker-compose project name")
	flag.Parse()

	if err := chdirRepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	out := newLogger(os.Stdout)
	b, err := newBench(*project, []string{"docker-compose.yml", "scripts/chaos/docker-compose.chaos.yml"}, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	selected, err := pick(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var reports []*report
	for i, sc := range selected {
		r := newReport(sc.name, out)
		out.printf("\n=== %s: %s\n", sc.name, sc.proves)
		start := time.Now()
		if err := up(ctx, b, r); err != nil {
			r.fail("cluster did not come up: %v", err)
		} else if err := sc.run(ctx, b, r); err != nil {
			r.fail("%v", err)
		}
		r.elapsed = time.Since(start)
		r.print()
		reports = append(reports, r)
		if !(*keep && i == len(selected)-1) {
			if err := b.composeRun(context.Background(), "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
				out.printf("warning: compose down: %v\n", err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}

	failed := 0
	out.printf("\n=== summary\n")
	for _, r := range reports {
		out.printf("%-11s %s  (%s)\n", r.name, r.verdict(), r.elapsed.Round(time.Second))
		if !r.passed() {
			failed++
		}
	}
	if failed > 0 || len(reports) < len(selected) {
		os.Exit(1)
	}
}

func pick(list string) ([]scenario, error) {
	if list == "all" || list == "" {
		return scenarios, nil
	}
	var out []scenario
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, sc := range scenarios {
			if sc.name == strings.TrimSpace(name) {
				out = append(out, sc)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
	}
	return out, nil
}

func chdirRepoRoot() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "docker-compose.yml")); err == nil {
			return os.Chdir(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("docker-compose.yml not found above the working directory")
		}
		dir = parent
	}
}

// up starts a fresh cluster and waits until every node is ready, holds
// the whole fleet, and is past its first renewal window.
func up(ctx context.Context, b *bench, r *report) error {
	_ = b.composeRun(ctx, "down", "-v", "--remove-orphans", "-t", "2")
	if err := b.composeRun(ctx, "up", "-d"); err != nil {
		return err
	}
	if err := b.loadCerts(ctx); err != nil {
		return fmt.Errorf("certificates of the secured cluster: %w", err)
	}
	took, err := waitUntil(ctx, 2*time.Minute, 500*time.Millisecond, func() (bool, string) {
		for _, n := range nodes {
			st, err := b.nodeStatus(ctx, n)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", n, err)
			}
			v, err := b.nodeView(ctx, n)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", n, err)
			}
			if !st.OpenForTraffic || v.fleet() != fleet || v.self() != len(nodes) || st.SelfPreservation.WarmingUp || st.SelfPreservation.Active {
				return false, fmt.Sprintf("%s: open %v, %d fleet instances and %d of %s, warming up %v, self-preservation %v", n,
					st.OpenForTraffic, v.fleet(), v.self(), selfApp, st.SelfPreservation.WarmingUp, st.SelfPreservation.Active)
			}
		}
		return true, ""
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		page, err := b.dashboard(ctx, n)
		if err != nil {
			return fmt.Errorf("%s dashboard: %w", n, err)
		}
		if got := strings.Count(page, ">available<"); got != 2 {
			return fmt.Errorf("%s's dashboard lists %d available replicas, want 2", n, got)
		}
	}
	if err := b.checkSecured(ctx); err != nil {
		return err
	}
	r.step("cluster up: 3 nodes ready, each dashboard lists the other two as available replicas, %d fleet instances and the 3 nodes' own (%s) on each, renewal window complete (%s); secured: auth, TLS with client-auth need, signed replication, encrypted gossip, a caller without a client certificate or credentials refused",
		fleet, selfApp, took.Round(100*time.Millisecond))
	return nil
}

// waitUntil polls cond every interval until it holds, and returns how long
// that took; after timeout it returns an error with cond's last reason.
func waitUntil(ctx context.Context, timeout, every time.Duration, cond func() (bool, string)) (time.Duration, error) {
	start := time.Now()
	last := ""
	for {
		ok, why := cond()
		if ok {
			return time.Since(start), nil
		}
		last = why
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("not after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(every):
		}
	}
}

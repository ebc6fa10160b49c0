package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/tools/simclient"
)

const emergency = "EMERGENCY! EUREKA MAY BE INCORRECTLY CLAIMING INSTANCES ARE UP"

func statuses(ctx context.Context, b *bench, names ...string) (map[string]ops.AdminStatus, error) {
	out := map[string]ops.AdminStatus{}
	for _, n := range names {
		st, err := b.nodeStatus(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[n] = st
	}
	return out, nil
}

func clientStats(ctx context.Context, b *bench, services ...string) (map[string]simclient.Stats, error) {
	out := map[string]simclient.Stats{}
	for _, s := range services {
		st, err := b.clientStats(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		out[s] = st
	}
	return out, nil
}

// converged holds when every listed node has want instances besides the
// nodes' own and the very same view (instance ids, statuses, hashcode; the
// nodes' own instances included).
func converged(ctx context.Context, b *bench, want int, names ...string) (bool, string) {
	var first view
	for i, n := range names {
		v, err := b.nodeView(ctx, n)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", n, err)
		}
		if v.fleet() != want {
			return false, fmt.Sprintf("%s holds %d instances besides the nodes' own, want %d", n, v.fleet(), want)
		}
		if i == 0 {
			first = v
		} else if !v.equal(first) {
			return false, fmt.Sprintf("%s (%s) differs from %s (%s)", n, v.hashcode, names[0], first.hashcode)
		}
	}
	return true, ""
}

// emptyRegistrySeen sums the clients' full fetches that returned nothing.
func emptyRegistrySeen(ctx context.Context, b *bench, r *report) uint64 {
	stats, err := clientStats(ctx, b, clientServices...)
	if err != nil {
		r.fail("client stats: %v", err)
		return 0
	}
	var n uint64
	for _, st := range stats {
		n += st.EmptyRegistrySeen
	}
	return n
}

// partition cuts node-c off the network for longer than three leases.
func partition(ctx context.Context, b *bench, r *report) error {
	before, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	clients0, err := clientStats(ctx, b, clientServices...)
	if err != nil {
		return err
	}
	reconnect, err := b.disconnect(ctx, "node-c")
	if err != nil {
		return err
	}
	cut := time.Now()
	r.step("node-c disconnected from the cluster network")
	reconnected := false
	defer func() {
		if !reconnected {
			_ = reconnect()
		}
	}()

	hold := 3*lease + 7*time.Second
	minInstances := map[string]int{}
	maxEvictions := map[string]uint64{}
	activeAfter := time.Duration(-1)
	for _, n := range nodes {
		minInstances[n] = fleet
	}
	var mu sync.Mutex
	for time.Since(cut) < hold {
		eachNode(nodes, func(n string) {
			st, held, err := b.fleetStatus(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.fail("%s status during the partition: %v", n, err)
				return
			}
			minInstances[n] = min(minInstances[n], held)
			maxEvictions[n] = max(maxEvictions[n], st.Registry.Evictions-before[n].Registry.Evictions)
			if n == "node-c" && st.SelfPreservation.Active && activeAfter < 0 {
				activeAfter = time.Since(cut)
				r.step("node-c reports self-preservation active (renewals %d/min, threshold %d)",
					st.SelfPreservation.RenewsLastMin, st.SelfPreservation.RenewsThreshold)
			}
		})
		time.Sleep(500 * time.Millisecond)
	}
	if err := reconnect(); err != nil {
		return fmt.Errorf("reconnect node-c: %w", err)
	}
	reconnected = true
	cutFor := time.Since(cut)
	r.step("node-c reconnected after %s", cutFor.Round(100*time.Millisecond))

	took, convErr := waitUntil(ctx, time.Minute, 500*time.Millisecond, func() (bool, string) {
		return converged(ctx, b, fleet, nodes...)
	})
	after, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	clients1, err := clientStats(ctx, b, clientServices...)
	if err != nil {
		return err
	}

	r.figure("partition lasted %s (lease %s: %.1f leases)", cutFor.Round(100*time.Millisecond), lease, cutFor.Seconds()/lease.Seconds())
	for _, n := range nodes {
		r.figure("%s: fewest instances seen during the partition %d of %d, evictions %d", n, minInstances[n], fleet,
			after[n].Registry.Evictions-before[n].Registry.Evictions)
	}
	if activeAfter >= 0 {
		r.figure("node-c self-preservation active %s after the cut", activeAfter.Round(100*time.Millisecond))
	}
	var failovers, failed uint64
	for _, s := range clientServices {
		d := clients1[s].Failovers - clients0[s].Failovers
		failovers += d
		failed += clients1[s].RenewalsFailed - clients0[s].RenewalsFailed
		r.figure("%s: %d failovers, %d renewals failed, now on %s", s, d, clients1[s].RenewalsFailed-clients0[s].RenewalsFailed, clients1[s].CurrentServer)
	}
	r.figure("all nodes identical (instances, statuses, hashcode) %s after reconnecting (bound 30s)", took.Round(100*time.Millisecond))

	for _, n := range nodes {
		r.check(minInstances[n] == fleet, "%s kept all %d instances during the partition", n, fleet)
		r.check(after[n].Registry.Evictions == before[n].Registry.Evictions && maxEvictions[n] == 0, "%s evicted nothing", n)
	}
	r.check(activeAfter >= 0, "node-c reported self-preservation active while cut off")
	r.check(clients1["clients-c"].Failovers > clients0["clients-c"].Failovers, "zone-c clients failed over to another node")
	r.check(convErr == nil && took <= 30*time.Second, "nodes converged within 30s of reconnecting (%v)", errString(convErr))
	r.check(emptyRegistrySeen(ctx, b, r) == 0, "no client saw an empty registry")
	return nil
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// crash kills node-b, changes the registry, and starts node-b again.
func crash(ctx context.Context, b *bench, r *report) error {
	before, err := statuses(ctx, b, "node-a", "node-c")
	if err != nil {
		return err
	}
	if err := b.kill(ctx, "node-b"); err != nil {
		return err
	}
	r.step("node-b killed (SIGKILL)")

	// Change the registry while it is away: six new instances, one of them
	// cancelled again, and an operator's OUT_OF_SERVICE on a client.
	for i := 0; i < 6; i++ {
		if code := post(nodeBase+"/eureka/apps/CHAOS", chaosInstance(i)); code != 204 {
			return fmt.Errorf("register chaos-%d on node-a: HTTP %d", i, code)
		}
	}
	if code := do("DELETE", nodeBase+"/eureka/apps/CHAOS/chaos-5"); code != 200 {
		return fmt.Errorf("cancel chaos-5: HTTP %d", code)
	}
	va, err := b.nodeView(ctx, "node-a")
	if err != nil {
		return err
	}
	oos := ""
	for k := range va.instances {
		if strings.Contains(k, "/zb-") {
			oos = k
			break
		}
	}
	app, id, _ := strings.Cut(oos, "/")
	if code := do("PUT", nodeBase+"/eureka/apps/"+app+"/"+id+"/status?value=OUT_OF_SERVICE"); code != 200 {
		return fmt.Errorf("status of %s: HTTP %d", oos, code)
	}
	r.step("registered 6 instances on node-a, cancelled 1, set %s OUT_OF_SERVICE", oos)
	want := fleet + 5
	if _, err := waitUntil(ctx, 20*time.Second, 250*time.Millisecond, func() (bool, string) {
		return converged(ctx, b, want, "node-a", "node-c")
	}); err != nil {
		return fmt.Errorf("node-a and node-c did not agree on the change: %w", err)
	}

	if err := b.start(ctx, "node-b"); err != nil {
		return err
	}
	started := time.Now()
	r.step("node-b started again")
	readyAfter, err := waitUntil(ctx, time.Minute, 100*time.Millisecond, func() (bool, string) {
		return b.ready(ctx, "node-b"), "node-b /readyz not 200"
	})
	if err != nil {
		return err
	}
	vb, errB := b.nodeView(ctx, "node-b")
	va, errA := b.nodeView(ctx, "node-a")
	if errA != nil || errB != nil {
		return fmt.Errorf("views: %v %v", errA, errB)
	}
	r.step("node-b ready %s after start, holding %d instances and %d of %s (%s)", readyAfter.Round(100*time.Millisecond), vb.fleet(), vb.self(), selfApp, vb.hashcode)
	logs, _ := b.logs(ctx, "node-b")
	synced := strings.Contains(logs, "syncUp: registry copied")

	time.Sleep(5 * time.Second) // clients fetch every 2 s: let them look at node-b
	after, err := statuses(ctx, b, "node-a", "node-c")
	if err != nil {
		return err
	}
	empty := emptyRegistrySeen(ctx, b, r)

	r.figure("node-b: ready %s after start, %d instances (besides the nodes' own) at that moment, hashcode %s (node-a %s)",
		readyAfter.Round(100*time.Millisecond), vb.fleet(), vb.hashcode, va.hashcode)
	r.figure("clients' full fetches that came back empty: %d", empty)
	r.check(synced, "node-b copied the registry from a peer (syncUp) before opening")
	r.check(vb.equal(va) && vb.fleet() == want, "node-b held the same %d instances and hashcode as node-a when it turned ready", want)
	r.check(empty == 0, "no client saw an empty registry")
	for _, n := range []string{"node-a", "node-c"} {
		r.check(after[n].Registry.Evictions == before[n].Registry.Evictions, "%s evicted nothing", n)
	}
	_ = started
	return nil
}

func chaosInstance(i int) string {
	return fmt.Sprintf(`{"instance":{"instanceId":"chaos-%d","hostName":"chaos-%d","app":"CHAOS","ipAddr":"10.9.9.%d",
"status":"UP","port":{"$":80,"@enabled":"true"},
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":3600,"durationInSecs":3600}}}`, i, i, i)
}

func post(url, body string) int {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return send(req)
}

func do(method, url string) int {
	req, _ := http.NewRequest(method, url, nil)
	return send(req)
}

func send(req *http.Request) int {
	authorize(req)
	resp, err := clients.Load().write.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// rolling restarts the nodes one at a time, gracefully.
func rolling(ctx context.Context, b *bench, r *report) error {
	for _, n := range nodes {
		others := without(nodes, n)
		if err := b.stop(ctx, n); err != nil {
			return err
		}
		r.step("%s stopped (SIGTERM)", n)
		for i := 0; i < 3; i++ {
			time.Sleep(time.Second)
			for _, o := range others {
				st, held, err := b.fleetStatus(ctx, o)
				if err != nil {
					r.fail("%s status while %s is down: %v", o, n, err)
					continue
				}
				if held != fleet || st.Registry.Evictions != 0 {
					r.fail("%s holds %d fleet instances, evicted %d, while %s is down", o, held, st.Registry.Evictions, n)
				}
			}
		}
		if err := b.start(ctx, n); err != nil {
			return err
		}
		ready, err := waitUntil(ctx, time.Minute, 100*time.Millisecond, func() (bool, string) {
			return b.ready(ctx, n), n + " /readyz not 200"
		})
		if err != nil {
			return err
		}
		_, held, err := b.fleetStatus(ctx, n)
		if err != nil {
			return err
		}
		conv, err := waitUntil(ctx, 30*time.Second, 250*time.Millisecond, func() (bool, string) {
			return converged(ctx, b, fleet, nodes...)
		})
		r.step("%s ready %s after start with %d fleet instances; all nodes identical %s later", n,
			ready.Round(100*time.Millisecond), held, conv.Round(100*time.Millisecond))
		r.figure("%s: ready %s after start, %d of %d instances when ready", n, ready.Round(100*time.Millisecond), held, fleet)
		r.check(err == nil, "after restarting %s every node holds the same %d instances (%v)", n, fleet, errString(err))
		r.check(held == fleet, "%s held all %d instances when it turned ready", n, fleet)
	}
	all, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		r.check(all[n].Registry.Evictions == 0, "%s evicted nothing", n)
	}
	empty := emptyRegistrySeen(ctx, b, r)
	r.figure("clients' full fetches that came back empty: %d", empty)
	r.check(empty == 0, "no client saw an empty registry")
	return nil
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// deaths kills 10 % of the instances, then 50 %.
func deaths(ctx context.Context, b *bench, r *report) error {
	before, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	if err := b.kill(ctx, "clients-d"); err != nil {
		return err
	}
	killed, err := b.diedAt(ctx, "clients-d")
	if err != nil {
		return err
	}
	r.step("clients-d killed: 10 instances (10 %%) die without cancelling")
	if _, err := waitUntil(ctx, 30*time.Second, 250*time.Millisecond, func() (bool, string) {
		for _, n := range nodes {
			v, err := b.nodeView(ctx, n)
			if err != nil {
				return false, err.Error()
			}
			if left := v.countPrefix("zd-"); left > 0 {
				return false, fmt.Sprintf("%s still holds %d of them", n, left)
			}
		}
		return true, ""
	}); err != nil {
		r.fail("the dead instances were not evicted everywhere: %v", err)
	}
	// When each node removed them, from the DELETED entries of its delta,
	// against when the container died: each instance renewed last at most
	// then, so its lease is over lease later, and the next eviction run
	// follows within one interval.
	bound := lease + evict
	const jitter = 500 * time.Millisecond // eviction ticker and replication lag on a busy machine
	for _, n := range nodes {
		at, err := b.deletedAt(ctx, n, "zd-")
		if err != nil {
			return err
		}
		var last time.Time
		for _, t := range at {
			if t.After(last) {
				last = t
			}
		}
		took := last.Sub(killed)
		r.figure("%s evicted the 10 dead instances by %s after they died (bound: lease %s + eviction interval %s = %s, +%s for replication and timer jitter)",
			n, took.Round(10*time.Millisecond), lease, evict, bound, jitter)
		r.check(len(at) == 10 && took <= bound+jitter, "%s evicted all 10 within the bound", n)
	}
	for _, n := range nodes {
		st, held, err := b.fleetStatus(ctx, n)
		if err != nil {
			return err
		}
		r.check(st.Registry.Evictions-before[n].Registry.Evictions == 10 && held == fleet-10,
			"%s evicted exactly the 10 dead instances and holds %d (%d evictions, %d held)", n, fleet-10,
			st.Registry.Evictions-before[n].Registry.Evictions, held)
	}

	if err := b.start(ctx, "clients-d"); err != nil {
		return err
	}
	if _, err := waitUntil(ctx, time.Minute, 500*time.Millisecond, func() (bool, string) {
		for _, n := range nodes {
			st, held, err := b.fleetStatus(ctx, n)
			if err != nil {
				return false, err.Error()
			}
			if held != fleet || st.SelfPreservation.Active {
				return false, fmt.Sprintf("%s: %d fleet instances, self-preservation %v", n, held, st.SelfPreservation.Active)
			}
		}
		return true, ""
	}); err != nil {
		return fmt.Errorf("fleet did not come back: %w", err)
	}
	r.step("clients-d back: %d instances everywhere", fleet)

	base, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	if err := b.kill(ctx, "clients-a", "clients-d"); err != nil {
		return err
	}
	if killed, err = b.diedAt(ctx, "clients-a"); err != nil {
		return err
	}
	r.step("clients-a and clients-d killed: 50 instances (50 %%) die without cancelling")
	var mu sync.Mutex
	banner := map[string]bool{}
	minInstances := map[string]int{}
	for _, n := range nodes {
		minInstances[n] = fleet
	}
	for time.Since(killed) < 3*lease+5*time.Second {
		eachNode(nodes, func(n string) {
			st, held, err := b.fleetStatus(ctx, n)
			if err != nil {
				r.fail("%s status: %v", n, err)
				return
			}
			seen := false
			if st.SelfPreservation.Active {
				page, err := b.dashboard(ctx, n)
				seen = err == nil && strings.Contains(page, emergency)
			}
			mu.Lock()
			minInstances[n] = min(minInstances[n], held)
			banner[n] = banner[n] || seen
			mu.Unlock()
		})
		time.Sleep(500 * time.Millisecond)
	}
	mass, err := statuses(ctx, b, nodes...)
	if err != nil {
		return err
	}
	// The first dead lease can expire lease − renewal interval after the
	// kill (it renewed just before); self-preservation must be on by then.
	deadline := lease - renew
	for _, n := range nodes {
		on, err := b.selfPreservationOnAt(ctx, n, killed)
		after := on.Sub(killed)
		r.figure("%s: self-preservation on %s after the kill (the first dead lease expires ≥ %s after it); fewest instances %d; evictions %d; renewals %d/min vs threshold %d",
			n, after.Round(10*time.Millisecond), deadline, minInstances[n], mass[n].Registry.Evictions-base[n].Registry.Evictions,
			mass[n].SelfPreservation.RenewsLastMin, mass[n].SelfPreservation.RenewsThreshold)
		r.check(err == nil && after < deadline, "%s turned self-preservation on before a dead lease could expire (%v)", n, errString(err))
		r.check(banner[n], "%s's dashboard shows the EMERGENCY banner", n)
		r.check(minInstances[n] == fleet && mass[n].Registry.Evictions == base[n].Registry.Evictions, "%s evicted nothing", n)
	}

	if err := b.start(ctx, "clients-a", "clients-d"); err != nil {
		return err
	}
	r.step("clients-a and clients-d started again")
	took, err := waitUntil(ctx, time.Minute, 500*time.Millisecond, func() (bool, string) {
		for _, n := range nodes {
			st, err := b.nodeStatus(ctx, n)
			if err != nil {
				return false, err.Error()
			}
			if st.SelfPreservation.Active {
				return false, n + " still in self-preservation"
			}
			page, err := b.dashboard(ctx, n)
			if err != nil || strings.Contains(page, emergency) {
				return false, n + " still shows the banner"
			}
		}
		return true, ""
	})
	r.figure("banner gone on every node %s after the instances came back", took.Round(100*time.Millisecond))
	r.check(err == nil, "self-preservation off and the banner gone everywhere once the instances renew again (%v)", errString(err))
	return nil
}

// eachNode runs f for every name at once and waits.
func eachNode(names []string, f func(n string)) {
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(n)
		}()
	}
	wg.Wait()
}

// failover stops node-a and watches every client keep renewing.
func failover(ctx context.Context, b *bench, r *report) error {
	if err := b.stop(ctx, "node-a"); err != nil {
		return err
	}
	r.step("node-a stopped")
	time.Sleep(5 * time.Second)
	s0, err := clientStats(ctx, b, clientServices...)
	if err != nil {
		return err
	}
	window := 15 * time.Second
	end := time.Now().Add(window)
	minInstances := map[string]int{"node-b": fleet, "node-c": fleet}
	for time.Now().Before(end) {
		for _, n := range []string{"node-b", "node-c"} {
			st, held, err := b.fleetStatus(ctx, n)
			if err != nil {
				r.fail("%s: %v", n, err)
				continue
			}
			minInstances[n] = min(minInstances[n], held)
			if st.Registry.Evictions != 0 {
				r.fail("%s evicted %d instances", n, st.Registry.Evictions)
			}
		}
		time.Sleep(time.Second)
	}
	s1, err := clientStats(ctx, b, clientServices...)
	if err != nil {
		return err
	}
	for _, s := range clientServices {
		ok := s1[s].RenewalsOK - s0[s].RenewalsOK
		failed := s1[s].RenewalsFailed - s0[s].RenewalsFailed
		want := uint64(float64(s1[s].Instances) * window.Seconds() / renew.Seconds() * 0.9)
		r.figure("%s (%d instances): %d renewals ok, %d failed in %s, via %s", s, s1[s].Instances, ok, failed, window, s1[s].CurrentServer)
		r.check(ok >= want, "%s kept renewing through another node (%d ≥ %d)", s, ok, want)
	}
	for n, m := range minInstances {
		r.check(m == fleet, "%s kept all %d instances", n, fleet)
	}
	if err := b.start(ctx, "node-a"); err != nil {
		return err
	}
	took, err := waitUntil(ctx, time.Minute, 250*time.Millisecond, func() (bool, string) {
		return converged(ctx, b, fleet, nodes...)
	})
	r.figure("node-a back and all nodes identical %s after its start", took.Round(100*time.Millisecond))
	r.check(err == nil, "node-a rejoined with every instance (%v)", errString(err))
	return nil
}

package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- 8. What replication costs in CPU ----
//
// Receiver: one node, 10k instances (e.fleetN), driven in alternating rounds with
// clients' heartbeats (PUT /eureka/apps/{app}/{id}) and with peers'
// batches of heartbeats (POST /eureka/peerreplication/batch, 250 items as
// replication.EncodeBatch writes them); the node's CPU per heartbeat
// applied. Cluster: three clustered nodes and one standalone node, driven
// in alternating rounds with the same clients' heartbeats at the same
// fixed rate, spread over the three like clients that pick a server at
// random; the whole cluster's CPU against the single node's, and against
// three unclustered nodes with the clients spread over them alike (the
// same layout without replication or gossip).

const (
	benchReplBatch    = 250 // replication's MaxBatchSize
	benchReplHeader   = "Content-Type: application/json\r\nAccept: application/json\r\nX-Netflix-Discovery-Replication: true\r\nUser-Agent: Muster-Replication\r\n"
	benchReplConns    = 2    // two peers, one batch in flight each
	benchClusterRate  = 6000 // client heartbeats/s in the cluster comparison
	benchClusterConns = 48
	// benchClusterRounds is the least number of rounds of the cluster
	// comparison outside --smoke: at --quick's 2 rounds of 1.5 s the
	// clients-on-one-node ratio ranged 1.11–1.32 over eleven runs of the
	// same code.
	benchClusterRounds = 6
	// benchOneProfile is how long the clients-on-one-node layout is
	// profiled: its differences are a few percent of a process's samples.
	benchOneProfile = 15 * time.Second
)

// benchHeartbeatBatches are the batch bodies covering instances [0, n)
// in batches of size items: heartbeats as a peer sends them for its
// clients' renewals.
func benchHeartbeatBatches(n, size int) ([][]byte, error) {
	var bodies [][]byte
	for from := 0; from < n; from += size {
		var b replication.Batch
		for i := from; i < min(from+size, n); i++ {
			in := benchInstance(i)
			b.Tasks = append(b.Tasks, replication.Task{Action: registry.ActionHeartbeat,
				Key: registry.InstanceKey{App: strings.ToUpper(in.App), ID: in.ID()}, Instance: in})
		}
		body, err := replication.EncodeBatch(b)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// replCPUBench is the replcpu scenario (bench --only replcpu): its methods share
// the run's environment, benchEnv, and its helpers.
type replCPUBench struct{ *benchEnv }

func (e replCPUBench) run() error {
	if err := e.replReceiver(); err != nil {
		return err
	}
	return e.replCluster()
}

func (e replCPUBench) replReceiver() error {
	const sc = "replcpu"
	r, err := e.startChild("replcpu-receiver", "muster")
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(r, 0, e.fleetN); err != nil {
		return err
	}
	bodies, err := benchHeartbeatBatches(e.fleetN, benchReplBatch)
	if err != nil {
		return err
	}
	f := benchFleetOf(e.fleetN)
	direct := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(e.fleetN)], Header: benchClientHeaders}
	}}
	batch := loadgen.Config{Concurrency: benchReplConns, Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPost, Path: "/eureka/peerreplication/batch", Header: benchReplHeader, Body: bodies[seq%uint64(len(bodies))]}
	}}
	// A batch answered 200 can still fail items: check them once.
	code, resp, err := r.api("POST", "/eureka/peerreplication/batch", bodies[0], "Content-Type", "application/json", replication.HeaderReplication, "true")
	if err != nil || code != 200 {
		return fmt.Errorf("heartbeat batch: %d %v", code, err)
	}
	if got := strings.Count(string(resp), `"statusCode":200`); got != benchReplBatch {
		return fmt.Errorf("heartbeat batch: %d of %d items answered 200: %.300s", got, benchReplBatch, resp)
	}
	if err := e.profileDuring(r, "replcpu-batch", batch); err != nil {
		return err
	}
	sides, err := e.alternate([]benchRun{{target: r, cfg: direct}, {target: r, cfg: batch}})
	if err != nil {
		return err
	}
	d, b := sides[0], sides[1]
	for _, s := range sides {
		if bad := s.res.NotOK(); bad > 0 {
			return fmt.Errorf("replcpu: %d requests failed (statuses %v, first error %v)", bad, s.res.Status, s.res.FirstErr)
		}
	}
	items := float64(b.res.Requests * benchReplBatch)
	perItem := float64(b.cpu.Nanoseconds()) / 1e3 / items
	perDirect := d.cpuPerReq()
	e.addCompared(sc, "receiver CPU per replicated heartbeat", perItem, perDirect, "µs", "≤ 0.2× a direct heartbeat's",
		benchBool(perItem <= 0.2*perDirect),
		fmt.Sprintf("ceiling = a client's heartbeat on the same node, same rounds; batches of %d items, %.0f items/s applied, %.0f direct heartbeats/s",
			benchReplBatch, items/b.res.Elapsed.Seconds(), d.res.RPS()))
	r.stop()
	return nil
}

// startCluster starts three clustered nodes and waits until each sees the
// other two and has opened.
func (e *benchEnv) startCluster(prefix string) ([]*benchChild, error) {
	a, err := e.startChild(prefix+"-a", "muster", "--cluster")
	if err != nil {
		return nil, err
	}
	b, err := e.startChild(prefix+"-b", "muster", "--cluster", "--join", a.Gossip)
	if err != nil {
		return nil, err
	}
	c, err := e.startChild(prefix+"-c", "muster", "--cluster", "--join", a.Gossip)
	if err != nil {
		return nil, err
	}
	nodes := []*benchChild{a, b, c}
	return nodes, benchWait(e.ctx, 30*time.Second, "three nodes to see two peers each", func() bool {
		for _, nd := range nodes {
			if st, err := nd.status(); err != nil || st.Peers != 2 || !st.Opened {
				return false
			}
		}
		return true
	})
}

// waitInstances waits until every node holds the n instances of the
// fleet (the nodes' own registrations are not the fleet's).
func (e *benchEnv) waitInstances(nodes []*benchChild, n int) error {
	return benchWait(e.ctx, 60*time.Second, fmt.Sprintf("%d fleet instances on every node", n), func() bool {
		for _, nd := range nodes {
			if st, err := nd.status(); err != nil || st.Fleet != n {
				return false
			}
		}
		return true
	})
}

func (e replCPUBench) replCluster() error {
	const sc = "replcpu"
	nodes, err := e.startCluster("replcpu")
	if err != nil {
		return err
	}
	single, err := e.startChild("replcpu-single", "muster")
	if err != nil {
		return err
	}
	if _, err := e.registerFleet(nodes[0], 0, e.fleetN); err != nil {
		return err
	}
	if err := e.waitInstances(nodes, e.fleetN); err != nil {
		return err
	}
	if _, err := e.registerFleet(single, 0, e.fleetN); err != nil {
		return err
	}
	// Three unclustered nodes, each with the whole fleet: the spread
	// layout without replication or gossip, the control that separates
	// what clustering costs from what three half-idle processes on this
	// machine cost anyway.
	var solos []*benchChild
	for i := range 3 {
		s, err := e.startChild(fmt.Sprintf("replcpu-solo-%c", 'a'+i), "muster")
		if err != nil {
			return err
		}
		if _, err := e.registerFleet(s, 0, e.fleetN); err != nil {
			return err
		}
		solos = append(solos, s)
	}
	f := benchFleetOf(e.fleetN)
	interval := time.Duration(float64(benchClusterConns) / benchClusterRate * float64(time.Second))
	hb := func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[benchMix(seq)%uint64(e.fleetN)], Header: benchClientHeaders}
	}
	const items, batches = "muster_replication_items_total", "muster_replication_batches_total"
	var sent, sentBatches float64
	clusterRun := benchRun{target: nodes[0], cpuOf: nodes, cfg: loadgen.Config{Concurrency: benchClusterConns, Interval: interval, Next: hb},
		drive: func(cfg loadgen.Config) (loadgen.Result, error) {
			var v0 [][]float64
			for _, nd := range nodes {
				v, _ := nd.metrics(items, batches)
				v0 = append(v0, v)
			}
			res, err := e.loadSpread(nodes, cfg)
			for i, nd := range nodes {
				v, _ := nd.metrics(items, batches)
				sent += v[0] - v0[i][0]
				sentBatches += v[1] - v0[i][1]
			}
			return res, err
		}}
	if e.profileDir != "" {
		var done []<-chan error
		for i, nd := range nodes[:2] {
			done = append(done, nd.profile(5*time.Second, filepath.Join(e.profileDir, fmt.Sprintf("replcpu-cluster-%c.cpu.pprof", 'a'+i))))
		}
		if _, err := e.loadSpread(nodes, loadgen.Config{Concurrency: benchClusterConns, Interval: interval, Next: hb, Duration: 5500 * time.Millisecond}); err != nil {
			return err
		}
		for _, d := range done {
			if err := <-d; err != nil {
				return err
			}
		}
		e.logf("   CPU profiles of two cluster nodes under spread heartbeats in %s", e.profileDir)
		// The clients-on-one-node layout against its ceiling: what the
		// sender spends beyond a standalone node at the same rate is the
		// diff of their profiles (go tool pprof -diff_base); a receiver is
		// profiled beside the sender. Heap profiles before and after give
		// the allocations per heartbeat (alloc_space, -diff_base heap0).
		one := loadgen.Config{Concurrency: benchClusterConns, Interval: interval, Next: hb, Duration: benchOneProfile + 500*time.Millisecond}
		for _, side := range []struct {
			target   *benchChild
			profiled []*benchChild
			names    []string
		}{
			{nodes[0], nodes[:2], []string{"replcpu-one-sender", "replcpu-one-receiver"}},
			{single, []*benchChild{single}, []string{"replcpu-one-single"}},
		} {
			var done []<-chan error
			for i, nd := range side.profiled {
				if err := nd.heapProfile(filepath.Join(e.profileDir, side.names[i]+".heap0.pprof")); err != nil {
					return err
				}
				done = append(done, nd.profile(benchOneProfile, filepath.Join(e.profileDir, side.names[i]+".cpu.pprof")))
			}
			if _, err := e.load(side.target, one); err != nil {
				return err
			}
			for i, nd := range side.profiled {
				if err := <-done[i]; err != nil {
					return err
				}
				if err := nd.heapProfile(filepath.Join(e.profileDir, side.names[i]+".heap1.pprof")); err != nil {
					return err
				}
			}
		}
		e.logf("   CPU and heap profiles of the clients-on-one-node layout (sender, a receiver, the single node) in %s", e.profileDir)
	}
	// cpus reads each node's CPU time so far.
	cpus := func(nodes []*benchChild) []time.Duration {
		out := make([]time.Duration, len(nodes))
		for i, nd := range nodes {
			out[i] = nd.cpu()
		}
		return out
	}
	// What the nodes cost doing nothing (memberlist, tickers), measured
	// together: part of every figure below, and three times over for the
	// cluster.
	all := append(slices.Clone(nodes), single)
	// Idle is idle: the registrations, the profile's load and the
	// collections they leave behind settle first.
	time.Sleep(benchPick(e.smoke, 2*time.Second, 200*time.Millisecond))
	idle0 := cpus(all)
	quiet := benchPick(e.smoke, 5*time.Second, time.Second)
	var idleProfiles []<-chan error
	if e.profileDir != "" {
		for i, nd := range nodes[:2] {
			idleProfiles = append(idleProfiles, nd.profile(quiet, filepath.Join(e.profileDir, fmt.Sprintf("replcpu-idle-%c.cpu.pprof", 'a'+i))))
		}
	}
	time.Sleep(quiet)
	idle1 := cpus(all)
	for _, d := range idleProfiles {
		if err := <-d; err != nil {
			return err
		}
	}
	var idleCluster time.Duration
	for i := range nodes {
		idleCluster += idle1[i] - idle0[i]
	}
	idleSingle := idle1[3] - idle0[3]
	singleRun := benchRun{target: single, cfg: loadgen.Config{Concurrency: benchClusterConns, Interval: interval, Next: hb}}
	// Clients that all talk to one node (the first URL of their list):
	// the other two only apply batches.
	// Its drive splits the cluster's CPU into the sender's (the node the
	// clients talk to) and the receivers', warm-up included.
	var senderCPU, receiversCPU time.Duration
	var oneReqs uint64
	var oneSent, oneBatches float64
	oneRun := benchRun{target: nodes[0], cpuOf: nodes, cfg: singleRun.cfg,
		drive: func(cfg loadgen.Config) (loadgen.Result, error) {
			v0, _ := nodes[0].metrics(items, batches)
			c0 := cpus(nodes)
			res, err := e.load(nodes[0], cfg)
			c1 := cpus(nodes)
			v1, _ := nodes[0].metrics(items, batches)
			senderCPU += c1[0] - c0[0]
			receiversCPU += c1[1] - c0[1] + c1[2] - c0[2]
			oneReqs += res.Requests
			oneSent += v1[0] - v0[0]
			oneBatches += v1[1] - v0[1]
			return res, err
		}}
	// The single node at a third of the rate, as each node of the spread
	// cluster serves its clients: what a request costs a node that is
	// idle between requests.
	thirdRun := benchRun{target: single, cfg: loadgen.Config{Concurrency: benchClusterConns / 3, Interval: interval, Next: hb}}
	soloRun := benchRun{target: solos[0], cpuOf: solos, cfg: clusterRun.cfg,
		drive: func(cfg loadgen.Config) (loadgen.Result, error) { return e.loadSpread(solos, cfg) }}
	// Their differences are a few µs of ~35 on a shared machine whose
	// noise moves a 3 s side by as much: a quick run takes more rounds.
	sides, err := e.alternateAtLeast(benchClusterRounds, []benchRun{singleRun, clusterRun, oneRun, thirdRun, soloRun})
	if err != nil {
		return err
	}
	s, c, one, third, solo := sides[0], sides[1], sides[2], sides[3], sides[4]
	for _, side := range sides {
		if bad := side.res.NotOK(); bad > 0 {
			return fmt.Errorf("replcpu: %d heartbeats failed (statuses %v, first error %v)", bad, side.res.Status, side.res.FirstErr)
		}
	}
	// Issue 43's targets: ≤ 1.25× a single node's in both layouts. Against
	// one node the spread layout also counts what three
	// idle-between-requests processes cost over one busy one, which no
	// replication can win back (the third-of-the-rate row shows it, and
	// the unclustered row below is its control).
	spreadRatio := c.cpuPerReq() / s.cpuPerReq()
	e.addCompared(sc, "3-node cluster's CPU per client heartbeat", c.cpuPerReq(), s.cpuPerReq(), "µs", "≤ 1.25× a single node's", benchBool(spreadRatio <= 1.25),
		fmt.Sprintf("ceiling = one standalone node, same rounds (%d of %s for each of the five layouts here); %.0f heartbeats/s spread over the three (%.0f/s on the single node); %.0f items/batch between nodes; control: the unclustered row below",
			e.roundsAtLeast(benchClusterRounds), e.dur, c.res.RPS(), s.res.RPS(), sent/max(sentBatches, 1)))
	oneRatio := one.cpuPerReq() / s.cpuPerReq()
	e.addCompared(sc, "3-node cluster's CPU per client heartbeat, clients on one node", one.cpuPerReq(), s.cpuPerReq(), "µs", "≤ 1.25× a single node's", benchBool(oneRatio <= 1.25),
		fmt.Sprintf("the same, every client talking to the first node (%.0f heartbeats/s there), the two others applying its batches (%.0f items/batch); of it the sender %.1f µs, the two receivers %.1f µs together",
			one.res.RPS(), oneSent/max(oneBatches, 1), float64(senderCPU.Nanoseconds())/1e3/float64(max(oneReqs, 1)), float64(receiversCPU.Nanoseconds())/1e3/float64(max(oneReqs, 1))))
	idlePerNode := float64(idleCluster.Microseconds()) / 1e3 / quiet.Seconds() / float64(len(nodes))
	idleOne := float64(idleSingle.Microseconds()) / 1e3 / quiet.Seconds()
	e.addCompared(sc, "idle CPU per cluster node", idlePerNode, idleOne, "ms/s", "≤ 3 ms/s", benchBool(idlePerNode <= 3),
		fmt.Sprintf("nothing to do but gossip, anti-entropy and timers, measured over %s after a %s pause; %.1f ms/s for the three; ceiling = the single node, idle alike", quiet, benchPick(e.smoke, 2*time.Second, 200*time.Millisecond), idlePerNode*float64(len(nodes))))
	e.addCompared(sc, "single node's CPU per client heartbeat at a third of the rate", third.cpuPerReq(), s.cpuPerReq(), "µs", "", nil,
		fmt.Sprintf("%.0f heartbeats/s, what each node of the spread cluster serves; ceiling = the same node at %.0f/s", third.res.RPS(), s.res.RPS()))
	soloRatio := c.cpuPerReq() / solo.cpuPerReq()
	e.addCompared(sc, "3-node cluster's CPU per client heartbeat against three unclustered nodes", c.cpuPerReq(), solo.cpuPerReq(), "µs", "≤ 1.3×", benchBool(soloRatio <= 1.3),
		fmt.Sprintf("the control of the spread layout: ceiling = three standalone nodes with the fleet each, the clients spread over them alike (%.0f heartbeats/s): what replication and gossip add to the spread layout", solo.res.RPS()))
	for _, nd := range append(append(nodes, single), solos[0]) {
		nd.stop()
	}
	oneReceivers := float64(receiversCPU.Nanoseconds()) / 1e3 / float64(max(oneReqs, 1))
	return e.replBareReceivers(solos[1:], max(int(oneSent/max(oneBatches, 1)+0.5), 1), oneReceivers, one.cpuPerReq(), s.cpuPerReq())
}

// replBareReceivers is the control of the clients-on-one-node layout's
// receivers: the bench itself sends batches of size heartbeats, at the
// cluster's rate, to two standalone nodes (Muster's receivers, without a
// cluster's gossip) and, in alternate rounds, to two bare processes that
// read them with the same codec and answer every item 200 with no
// registry. What the bare pair costs per heartbeat is what two receiving
// processes cost on this machine at this batch rate whatever they do with
// the items; the note says what the one-node row would be if the cluster's
// receivers cost that (oneReceivers of one, against single).
func (e replCPUBench) replBareReceivers(muster []*benchChild, size int, oneReceivers, one, single float64) error {
	const sc = "replcpu"
	var bare []*benchChild
	for i := range 2 {
		b, err := e.startChild(fmt.Sprintf("replcpu-bare-receiver-%c", 'a'+i), "bare")
		if err != nil {
			return err
		}
		bare = append(bare, b)
	}
	bodies, err := benchHeartbeatBatches(e.fleetN, size)
	if err != nil {
		return err
	}
	// One connection a receiver, one batch of size every size/rate seconds
	// on it: each receiver gets every heartbeat, as a peer does.
	interval := time.Duration(float64(size) / benchClusterRate * float64(time.Second))
	cfg := loadgen.Config{Concurrency: len(muster), Interval: interval, Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPost, Path: "/eureka/peerreplication/batch", Header: benchReplHeader, Body: bodies[seq%uint64(len(bodies))]}
	}}
	spread := func(to []*benchChild) benchRun {
		return benchRun{target: to[0], cpuOf: to, cfg: cfg,
			drive: func(cfg loadgen.Config) (loadgen.Result, error) { return e.loadSpread(to, cfg) }}
	}
	sides, err := e.alternate([]benchRun{spread(muster), spread(bare)})
	if err != nil {
		return err
	}
	for _, side := range sides {
		if bad := side.res.NotOK(); bad > 0 {
			return fmt.Errorf("replcpu: %d batches failed (statuses %v, first error %v)", bad, side.res.Status, side.res.FirstErr)
		}
	}
	// Per client heartbeat: each is one item to each of the two.
	perHeartbeat := func(s benchSide) float64 {
		return float64(s.cpu.Nanoseconds()) / 1e3 / (float64(s.res.Requests) * float64(size) / float64(len(muster)))
	}
	m, b := perHeartbeat(sides[0]), perHeartbeat(sides[1])
	e.addCompared(sc, "two receivers' CPU per client heartbeat at the cluster's batch rate", m, b, "µs", "", nil,
		fmt.Sprintf("the control of the clients-on-one-node row's receivers (%.1f µs there): the bench sends a batch of %d heartbeats every %d ms (that row's cadence at %d heartbeats/s) to each of two standalone nodes; ceiling = two bare processes that read the same batches with the same codec and answer 200 without a registry, same rounds. With receivers as cheap as the bare ones that row would be %.2f× (now %.2f×)",
			oneReceivers, size, interval.Milliseconds(), benchClusterRate, (one-oneReceivers+b)/single, one/single))
	for _, nd := range append(muster, bare...) {
		nd.stop()
	}
	return nil
}

// loadSpread runs cfg against every node at once, each with its share of
// the connections (and so of the rate), and merges the results.
func (e replCPUBench) loadSpread(nodes []*benchChild, cfg loadgen.Config) (loadgen.Result, error) {
	results := make([]loadgen.Result, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		part := cfg
		part.Concurrency = max(cfg.Concurrency/len(nodes), 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.load(nd, part)
		}()
	}
	wg.Wait()
	var all benchSide
	var elapsed time.Duration
	for i := range nodes {
		if errs[i] != nil {
			return loadgen.Result{}, errs[i]
		}
		all.add(results[i], 0)
		elapsed = max(elapsed, results[i].Elapsed)
	}
	all.res.Elapsed = elapsed // the runs overlap
	return all.res, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- xDS control plane ----
//
// A node with muster.xds.enabled and the 10k fleet, and beside it, in the
// same sitting, two references serving the same assignments: the control,
// a bare go-control-plane server (SnapshotCache and server.NewServer, no
// Muster code, `bench ceiling --xds`, xdsctl.go), and the floor, the least
// a server can do (one encoded response per change written to every
// stream, no xDS library, `bench ceiling --xds floor:ADDR`). At each size,
// N ADS streams to each, each on its own gRPC connection (as separate
// proxyless clients or Envoys have), subscribed to the assignments of one
// fleet app and of a probe app; all three sets stay connected. Then the
// changes, interleaved: one probe instance registered at the node (a POST
// /eureka/apps/XDS-PROBE), timed until every node stream has it, then one
// at the control, then one at the floor (each adds an endpoint), and so on
// (the first of the three rotating), so load on the shared machine falls
// on all three alike: registration → push p50/p99/max over all streams,
// and the server's CPU per pushed change per stream. The live heap and RSS
// the idle streams added, per stream, come first at the largest size. The
// servers run in child processes of their own, so their CPU is theirs
// alone; the clients run in the bench process, on the same two cores: the
// push times include the clients' reading and acknowledging, and the
// bench's own CPU per change per stream is reported too. A client reads
// the probe's assignment off the wire (its name and how many endpoints it
// lists, with protowire) and decodes nothing else, whichever server sends
// what: decoding it whole (structpb metadata, by reflection) was two
// thirds of the bench's CPU, work a real client does on its own machine,
// and on this one it only delayed the streams served after.

const (
	benchXDSFleet = 10_000
	benchXDSProbe = "XDS-PROBE"
)

// xdsBenchClient is one ADS stream that records when the probe app first
// listed k endpoints more than it had when the client connected.
type xdsBenchClient struct {
	conn   *grpc.ClientConn
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	names  []string
	first  chan struct{} // closed on the first response
}

// xdsTarget is one server of the scenario and the probe endpoints it has.
type xdsTarget struct {
	label  string // "node", "control" or "floor"
	child  *benchChild
	addr   string // its xDS address
	probes int    // probe endpoints registered so far
}

// xdsRun is what one run against one target at one size measured.
type xdsRun struct {
	p50, p99, max   time.Duration // over every stream's receipt of every change
	last50, last90  time.Duration // over each change's last receipt
	cpu, clientCPU  time.Duration // over the changes
	heap, rss       float64       // per idle stream (mem runs only)
	goroutines      int
	connected       time.Duration
	responses       float64 // received per change per stream
	changes, stream int
}

// xdsBench is the xds scenario (bench --only xds): its methods share
// the run's environment, benchEnv, and its helpers.
type xdsBench struct{ *benchEnv }

func (e xdsBench) run() error {
	sizes, changes := []int{100, 1000}, 50
	if e.quick {
		sizes, changes = []int{100}, 10
	}
	if e.smoke {
		sizes, changes = []int{10}, 3
	}
	fleet := e.fleetN
	fl := benchSize(fleet)
	muAddr, err := benchFreeAddr()
	if err != nil {
		return err
	}
	ctlAddr, err := benchFreeAddr()
	if err != nil {
		return err
	}
	floorAddr, err := benchFreeAddr()
	if err != nil {
		return err
	}
	mu, err := e.startChild("xds-muster-"+fl, "muster", "--set", "muster.xds.enabled=true", "--set", "muster.xds.addr="+muAddr)
	if err != nil {
		return err
	}
	defer mu.stop()
	ctl, err := e.startChild("xds-control-"+fl, "bare", "--xds", ctlAddr, "--xds-fleet", strconv.Itoa(fleet))
	if err != nil {
		return err
	}
	defer ctl.stop()
	floor, err := e.startChild("xds-floor-"+fl, "bare", "--xds", "floor:"+floorAddr, "--xds-fleet", strconv.Itoa(fleet))
	if err != nil {
		return err
	}
	defer floor.stop()
	t0 := time.Now()
	if _, err := e.registerFleet(mu, 0, fleet); err != nil {
		return err
	}
	e.logf("   registered %d instances in %s", fleet, time.Since(t0).Round(time.Millisecond))
	// The probe app exists before the clients subscribe (one instance).
	if err := e.xdsRegisterProbe(mu, 0); err != nil {
		return err
	}
	targets := []*xdsTarget{{label: "node", child: mu, addr: muAddr, probes: 1}, {label: "control", child: ctl, addr: ctlAddr, probes: 1},
		{label: "floor", child: floor, addr: floorAddr, probes: 1}}
	for si, n := range sizes {
		last := si == len(sizes)-1
		runs, err := e.xdsRuns(targets, n, changes, last)
		if err != nil {
			return fmt.Errorf("%d streams: %w", n, err)
		}
		for i, t := range targets {
			r := runs[i]
			e.logf("   %s, %d streams: p50 %.1f ms, p99 %.1f ms, max %.1f ms; last stream p50 %.1f ms, p90 %.1f ms; server CPU %.1f µs, bench CPU %.1f µs, %.2f responses per change per stream",
				t.label, n, ms(r.p50), ms(r.p99), ms(r.max), ms(r.last50), ms(r.last90), perChangeStream(r.cpu, r), perChangeStream(r.clientCPU, r), r.responses)
		}
		m, c, f := runs[0], runs[1], runs[2]
		note := fmt.Sprintf("%d registrations per server, interleaved node, control, floor, each timed on all %d streams from the POST to the stream's receipt; max %.1f ms (control %.1f, floor %.1f); ceiling = bare go-control-plane SnapshotCache, same clients, same sitting",
			changes, n, ms(m.max), ms(c.max), ms(f.max))
		var target string
		var met *bool
		if n >= 1000 {
			target, met = "≤ 100 ms", benchBool(m.p99 <= 100*time.Millisecond)
		}
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p50 (%d streams, %s instances)", n, fl), ms(m.p50), ms(c.p50), "ms", "", nil, note)
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p99 (%d streams, %s instances)", n, fl), ms(m.p99), ms(c.p99), "ms", target, met, "")
		floorNote := fmt.Sprintf("the same %d streams' clients and registrations against the floor: one encoded response per change written to every stream, no xDS library (xdsctl.go, xdsFloor); floor max %.1f ms",
			n, ms(f.max))
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p50 beside the floor (%d streams)", n), ms(m.p50), ms(f.p50), "ms", "", nil, floorNote)
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p99 beside the floor (%d streams)", n), ms(m.p99), ms(f.p99), "ms", "", nil, "")
		e.addCompared("xds", fmt.Sprintf("registration → last of %d streams p50", n), ms(m.last50), ms(c.last50), "ms", "", nil,
			fmt.Sprintf("over the %d changes, each one's last receipt; floor %.1f ms", changes, ms(f.last50)))
		e.addCompared("xds", fmt.Sprintf("registration → last of %d streams p90", n), ms(m.last90), ms(c.last90), "ms", "", nil,
			fmt.Sprintf("floor %.1f ms; the max is the max above", ms(f.last90)))
		e.addCompared("xds", fmt.Sprintf("server CPU per pushed change per stream (%d streams, %s instances)", n, fl), perChangeStream(m.cpu, m), perChangeStream(c.cpu, c), "µs", "", nil,
			fmt.Sprintf("user+system CPU of the server process over the %d changes (the registrations included) ÷ (changes × streams); %.1f ms per change in all (control %.1f, floor %.1f)",
				changes, float64(m.cpu.Microseconds())/1000/float64(changes), float64(c.cpu.Microseconds())/1000/float64(changes), float64(f.cpu.Microseconds())/1000/float64(changes)))
		e.addCompared("xds", fmt.Sprintf("bench (clients) CPU per change per stream (%d streams)", n), perChangeStream(m.clientCPU, m), perChangeStream(c.clientCPU, c), "µs", "", nil,
			fmt.Sprintf("user+system CPU of the bench process, where the clients read and ACK, from each POST until every stream had it and 20 ms more (floor %.1f µs)", perChangeStream(f.clientCPU, f)))
		if last {
			e.addCompared("xds", "live heap per idle xDS stream", m.heap, c.heap, "B", "", nil,
				fmt.Sprintf("the last %d of %d ADS streams, one gRPC connection each, each subscribed to two assignments the first %d already had; server heap after GC", n-n/2, n, n/2))
			e.addCompared("xds", "RSS per idle xDS stream", m.rss, c.rss, "B", "", nil,
				fmt.Sprintf("VmRSS after GC and FreeOSMemory; %d goroutines in the node with the streams open (control %d)", m.goroutines, c.goroutines))
		}
	}
	return nil
}

func perChangeStream(d time.Duration, r xdsRun) float64 {
	return float64(d.Microseconds()) / float64(r.changes*r.stream)
}

func benchFreeAddr() (string, error) {
	port, err := benchFreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// xdsSide is one target's streams during a run.
type xdsSide struct {
	t         *xdsTarget
	base      int // probe endpoints when the streams connected
	cs        []*xdsBenchClient
	seen      []atomic.Int64 // seen[k]: streams that have had change k
	atMu      sync.Mutex
	at        [][]time.Time      // at[k]: their receipt times
	responses atomic.Int64       // received by all the clients
	lat       *loadgen.Histogram // every stream's receipt
	last      *loadgen.Histogram // each change's last receipt
	r         xdsRun
}

func (s *xdsSide) record(k int, t time.Time) {
	s.atMu.Lock()
	s.at[k] = append(s.at[k], t)
	s.atMu.Unlock()
	s.seen[k].Add(1)
}

// xdsRuns connects clients streams to every target (measuring their
// memory at the node and the control if mem), times changes registrations
// per target, interleaved, and closes the streams.
func (e xdsBench) xdsRuns(targets []*xdsTarget, clients, changes int, mem bool) ([]xdsRun, error) {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	sides := make([]*xdsSide, len(targets))
	defer func() {
		for _, s := range sides {
			if s == nil {
				continue
			}
			for _, c := range s.cs {
				c.conn.Close()
			}
		}
		runtime.GC()
	}()
	for i, t := range targets {
		s := &xdsSide{t: t, base: t.probes, seen: make([]atomic.Int64, changes+1), at: make([][]time.Time, changes+1),
			lat: loadgen.NewHistogram(), last: loadgen.NewHistogram(), r: xdsRun{changes: changes, stream: clients}}
		sides[i] = s
		if err := e.xdsConnect(ctx, s, clients, changes, mem && t.label != "floor"); err != nil {
			return nil, fmt.Errorf("%s: %w", t.label, err)
		}
	}

	var profiled []<-chan error
	if e.profileDir != "" && mem {
		for _, s := range sides {
			path := filepath.Join(e.profileDir, "xds-pushes-"+s.t.label+".cpu.pprof")
			profiled = append(profiled, s.t.child.profile(5*time.Second, path))
			e.logf("   CPU profile of the %s over the first 5 s of pushes: %s", s.t.label, path)
		}
		// The clients' side too: the bench process, where they read and
		// ACK, over the same 5 s (all three servers' changes).
		self := filepath.Join(e.profileDir, "xds-pushes-clients.cpu.pprof")
		if f, err := os.Create(self); err == nil && pprof.StartCPUProfile(f) == nil {
			e.logf("   CPU profile of the bench's clients over the same 5 s: %s", self)
			stop := time.AfterFunc(5*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
			defer func() {
				if stop.Stop() {
					pprof.StopCPUProfile()
					f.Close()
				}
			}()
		}
	}
	cpu0 := make([]time.Duration, len(sides))
	resp0 := make([]int64, len(sides))
	for i, s := range sides {
		cpu0[i], resp0[i] = s.t.child.cpu(), s.responses.Load()
	}
	for k := 1; k <= changes; k++ {
		for j := range sides {
			s := sides[(k+j)%len(sides)]
			self0 := benchSelfCPU()
			if err := e.xdsChange(s, k, clients); err != nil {
				return nil, fmt.Errorf("%s: %w", s.t.label, err)
			}
			// Let the ACKs in before the next server's change.
			time.Sleep(20 * time.Millisecond)
			s.r.clientCPU += benchSelfCPU() - self0
		}
	}
	runs := make([]xdsRun, len(sides))
	for i, s := range sides {
		s.r.cpu = s.t.child.cpu() - cpu0[i]
		s.r.responses = float64(s.responses.Load()-resp0[i]) / float64(changes*clients)
		s.r.p50, s.r.p99, s.r.max = s.lat.Quantile(0.5), s.lat.Quantile(0.99), s.lat.Max()
		s.r.last50, s.r.last90 = s.last.Quantile(0.5), s.last.Quantile(0.9)
		runs[i] = s.r
	}
	for _, p := range profiled {
		if err := <-p; err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// xdsConnect connects clients streams to s's target and measures their
// memory if mem.
func (e xdsBench) xdsConnect(ctx context.Context, s *xdsSide, clients, changes int, mem bool) error {
	t := s.t
	// Two halves subscribed alike: the first warms what every stream
	// shares (assignments marshalled per zone), the second's cost is the
	// streams' own.
	half := max(clients/2, 1)
	connect := func(from, to int) error {
		for i := from; i < to; i++ {
			c, err := xdsBenchDial(ctx, t.addr, i, i%half, s.base, changes, &s.responses, s.record)
			if err != nil {
				return fmt.Errorf("xDS client %d: %w", i, err)
			}
			s.cs = append(s.cs, c)
		}
		for i, c := range s.cs[from:to] {
			select {
			case <-c.first:
			case <-time.After(30 * time.Second):
				return fmt.Errorf("xDS client %d got no first response", from+i)
			case <-e.ctx.Done():
				return e.ctx.Err()
			}
		}
		return nil
	}
	t0 := time.Now()
	if err := connect(0, half); err != nil {
		return err
	}
	var warm proccontrol.Mem
	var err error
	if mem {
		if warm, err = t.child.mem(true); err != nil {
			return err
		}
	}
	if err := connect(half, clients); err != nil {
		return err
	}
	s.r.connected = time.Since(t0)
	e.logf("   %s: %d xDS streams connected and served in %s", t.label, clients, s.r.connected.Round(time.Millisecond))
	if mem {
		idle, err := t.child.mem(true)
		if err != nil {
			return err
		}
		second := float64(clients - half)
		s.r.heap = (float64(idle.HeapAlloc) - float64(warm.HeapAlloc)) / second
		s.r.rss = (float64(idle.RSS) - float64(warm.RSS)) / second
		s.r.goroutines = idle.Goroutines
		if e.profileDir != "" && t.label == "node" {
			path := filepath.Join(e.profileDir, "xds-idle-streams.heap.pprof")
			if err := t.child.heapProfile(path); err != nil {
				return err
			}
			e.logf("   heap profile of the node with %d idle xDS streams: %s", clients, path)
		}
	}
	return nil
}

// xdsChange registers probe k at s's target and waits until all its
// clients streams have it.
func (e xdsBench) xdsChange(s *xdsSide, k, clients int) error {
	t := s.t
	start := time.Now()
	if err := e.xdsRegisterProbe(t.child, t.probes); err != nil {
		return err
	}
	t.probes++
	deadline := time.Now().Add(30 * time.Second)
	for s.seen[k].Load() < int64(clients) {
		if time.Now().After(deadline) {
			return fmt.Errorf("change %d reached %d of %d streams in 30 s", k, s.seen[k].Load(), clients)
		}
		time.Sleep(time.Millisecond)
	}
	s.atMu.Lock()
	var last time.Duration
	for _, at := range s.at[k] {
		s.lat.Record(at.Sub(start))
		last = max(last, at.Sub(start))
	}
	s.atMu.Unlock()
	s.last.Record(last)
	return nil
}

// benchSelfCPU is the bench process's user+system CPU so far.
func benchSelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// xdsRegisterProbe registers probe instance k (10.250.x.y:8080).
func (e xdsBench) xdsRegisterProbe(c *benchChild, k int) error {
	body := fmt.Appendf(nil, `{"instance":{"instanceId":"probe-%d","hostName":"probe-%d","app":%q,"ipAddr":"10.250.%d.%d","status":"UP",`+
		`"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"vipAddress":"xds-probe","metadata":{"zone":"eu-west-1a"}}}`, k, k, benchXDSProbe, k/250, k%250+1)
	code, resp, err := c.api("POST", "/eureka/apps/"+benchXDSProbe, body, "Content-Type", "application/json")
	if err != nil || code != 204 {
		return fmt.Errorf("register probe %d: %d %v %s", k, code, err, resp)
	}
	return nil
}

// xdsBenchDial opens client i's connection and stream, subscribed to the
// probe and to a fleet app, in a zone, both picked by kind, and reads it
// until ctx ends, ACKing every response and calling record(k, now) when the
// probe first has base+k endpoints.
func xdsBenchDial(ctx context.Context, addr string, i, kind, base, changes int, responses *atomic.Int64, record func(k int, t time.Time)) (*xdsBenchClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		conn.Close()
		return nil, err
	}
	probe := "xds-probe"
	fleetApp := benchVIP((kind % (benchXDSFleet / benchPerApp)) * benchPerApp) // kind < streams/2: within the smoke fleet too
	c := &xdsBenchClient{conn: conn, stream: stream, names: []string{probe, fleetApp}, first: make(chan struct{})}
	zone := "eu-west-1" + string(rune('a'+kind%3))
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "bench-" + strconv.Itoa(i), Locality: &corev3.Locality{Zone: zone}},
		TypeUrl: resource.EndpointType, ResourceNames: c.names}); err != nil {
		conn.Close()
		return nil, err
	}
	go func() {
		highest := 0 // changes seen so far
		firstDone := false
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			now := time.Now()
			responses.Add(1)
			for _, r := range resp.GetResources() {
				name, n := xdsCLACount(r.GetValue())
				if name != probe {
					continue
				}
				for k := highest + 1; k <= n-base && k <= changes; k++ {
					record(k, now)
				}
				highest = max(highest, n-base)
			}
			if !firstDone {
				firstDone = true
				close(c.first)
			}
			if err := stream.Send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: c.names,
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
				return
			}
		}
	}()
	return c, nil
}

// xdsCLACount is the cluster_name (field 1) of an encoded
// ClusterLoadAssignment and how many lb_endpoints (field 2 of each of its
// endpoints, field 2) it lists, read off the wire without decoding
// anything else: the bench's clients stand in for clients on machines of
// their own, so they leave out the decoding, whichever server sends what.
func xdsCLACount(b []byte) (name string, endpoints int) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", 0
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == 1 || num == 2) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", 0
			}
			b = b[n:]
			if num == 1 {
				name = string(v)
			} else {
				endpoints += xdsCountField(v, 2)
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", 0
		}
		b = b[n:]
	}
	return name, endpoints
}

// xdsCountField counts the length-delimited fields numbered num in b.
func xdsCountField(b []byte, num protowire.Number) int {
	count := 0
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return count
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(f, typ, b)
		if n < 0 {
			return count
		}
		b = b[n:]
		if f == num && typ == protowire.BytesType {
			count++
		}
	}
	return count
}

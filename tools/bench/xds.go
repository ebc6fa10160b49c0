package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
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
// same sitting, the control: a bare go-control-plane server (SnapshotCache
// and server.NewServer, no Muster code, `bench ceiling --xds`, xdsctl.go)
// serving the same assignments. Against each in turn, at each size, N ADS
// streams, each on its own gRPC connection (as separate proxyless clients
// or Envoys have), subscribed to the assignments of one fleet app and of a
// probe app. Then one probe instance after another is registered with a
// POST /eureka/apps/XDS-PROBE (the node registers it; the control adds an
// endpoint and sets a snapshot) and every stream's receipt of it timed:
// registration → xDS push p50/p99 over all streams, and the server's CPU
// per pushed change per stream. The live heap and RSS the idle streams
// added, per stream, come first at the largest size. The servers run in
// child processes of their own, so their CPU is theirs alone; the clients
// run in the bench process, on the same two cores: the push times include
// the clients' reading and acknowledging, and the bench's own CPU per change
// per stream is reported too. A client decodes only the probe's assignment
// (it finds a resource's name without decoding it), at either server.

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
	label  string // "node" or "control"
	child  *benchChild
	addr   string // its xDS address
	probes int    // probe endpoints registered so far
}

// xdsRun is what one run against one target at one size measured.
type xdsRun struct {
	p50, p99, max   time.Duration
	cpu, clientCPU  time.Duration // over the changes
	heap, rss       float64       // per idle stream (mem runs only)
	goroutines      int
	connected       time.Duration
	responses       float64 // received per change per stream
	changes, stream int
}

func (e *benchEnv) xds() error {
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
	t0 := time.Now()
	if _, err := e.registerFleet(mu, 0, fleet); err != nil {
		return err
	}
	e.logf("   registered %d instances in %s", fleet, time.Since(t0).Round(time.Millisecond))
	// The probe app exists before the clients subscribe (one instance).
	if err := e.xdsRegisterProbe(mu, 0); err != nil {
		return err
	}
	targets := []*xdsTarget{{label: "node", child: mu, addr: muAddr, probes: 1}, {label: "control", child: ctl, addr: ctlAddr, probes: 1}}
	for si, n := range sizes {
		last := si == len(sizes)-1
		var runs [2]xdsRun
		for i, t := range targets {
			e.logf("   %s, %d streams:", t.label, n)
			r, err := e.xdsRun(t, n, changes, last)
			if err != nil {
				return fmt.Errorf("%s, %d streams: %w", t.label, n, err)
			}
			runs[i] = r
			e.logf("   p50 %.1f ms, p99 %.1f ms, max %.1f ms; server CPU %.1f µs, bench CPU %.1f µs, %.2f responses per change per stream",
				ms(r.p50), ms(r.p99), ms(r.max), perChangeStream(r.cpu, r), perChangeStream(r.clientCPU, r), r.responses)
		}
		m, c := runs[0], runs[1]
		note := fmt.Sprintf("%d registrations, one at a time, each timed on all %d streams from the POST to the stream's receipt; max %.1f ms (control %.1f ms); ceiling = bare go-control-plane SnapshotCache, same clients, same sitting",
			changes, n, ms(m.max), ms(c.max))
		var target string
		var met *bool
		if n >= 1000 {
			target, met = "< 1000 ms", benchBool(m.p99 < time.Second)
		}
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p50 (%d streams, %s instances)", n, fl), ms(m.p50), ms(c.p50), "ms", "", nil, note)
		e.addCompared("xds", fmt.Sprintf("registration → xDS push p99 (%d streams, %s instances)", n, fl), ms(m.p99), ms(c.p99), "ms", target, met, "")
		e.addCompared("xds", fmt.Sprintf("server CPU per pushed change per stream (%d streams, %s instances)", n, fl), perChangeStream(m.cpu, m), perChangeStream(c.cpu, c), "µs", "", nil,
			fmt.Sprintf("user+system CPU of the server process over the %d changes (the registrations included) ÷ (changes × streams); %.1f ms per change in all (control %.1f)",
				changes, float64(m.cpu.Microseconds())/1000/float64(changes), float64(c.cpu.Microseconds())/1000/float64(changes)))
		e.addCompared("xds", fmt.Sprintf("bench (clients) CPU per change per stream (%d streams)", n), perChangeStream(m.clientCPU, m), perChangeStream(c.clientCPU, c), "µs", "", nil,
			"user+system CPU of the bench process, where the clients read, decode and ACK, over the same changes")
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

// xdsRun connects clients streams to t, measures their memory if mem, times
// changes registrations, and closes the streams.
func (e *benchEnv) xdsRun(t *xdsTarget, clients, changes int, mem bool) (xdsRun, error) {
	r := xdsRun{changes: changes, stream: clients}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	base := t.probes
	// seen[k] counts the streams that have seen the probe with base+k
	// endpoints; at[k] their receipt times.
	seen := make([]atomic.Int64, changes+1)
	var atMu sync.Mutex
	at := make([][]time.Time, changes+1)
	record := func(k int, t time.Time) {
		atMu.Lock()
		at[k] = append(at[k], t)
		atMu.Unlock()
		seen[k].Add(1)
	}
	var responses atomic.Int64 // received by all the clients
	var cs []*xdsBenchClient
	defer func() {
		for _, c := range cs {
			c.conn.Close()
		}
		runtime.GC()
	}()
	// Two halves subscribed alike: the first warms what every stream
	// shares (assignments marshalled per zone), the second's cost is the
	// streams' own.
	half := clients / 2
	connect := func(from, to int) error {
		for i := from; i < to; i++ {
			c, err := xdsBenchDial(ctx, t.addr, i, i%half, base, changes, &responses, record)
			if err != nil {
				return fmt.Errorf("xDS client %d: %w", i, err)
			}
			cs = append(cs, c)
		}
		for i, c := range cs[from:to] {
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
		return r, err
	}
	var warm proccontrol.Mem
	var err error
	if mem {
		if warm, err = t.child.mem(true); err != nil {
			return r, err
		}
	}
	if err := connect(half, clients); err != nil {
		return r, err
	}
	r.connected = time.Since(t0)
	e.logf("   %d xDS streams connected and served in %s", clients, r.connected.Round(time.Millisecond))
	if mem {
		idle, err := t.child.mem(true)
		if err != nil {
			return r, err
		}
		second := float64(clients - half)
		r.heap = (float64(idle.HeapAlloc) - float64(warm.HeapAlloc)) / second
		r.rss = (float64(idle.RSS) - float64(warm.RSS)) / second
		r.goroutines = idle.Goroutines
		if e.profileDir != "" && t.label == "node" {
			path := filepath.Join(e.profileDir, "xds-idle-streams.heap.pprof")
			if err := t.child.heapProfile(path); err != nil {
				return r, err
			}
			e.logf("   heap profile of the node with %d idle xDS streams: %s", clients, path)
		}
	}

	var profiled <-chan error
	if e.profileDir != "" && mem {
		path := filepath.Join(e.profileDir, "xds-pushes-"+t.label+".cpu.pprof")
		profiled = t.child.profile(5*time.Second, path)
		e.logf("   CPU profile of the %s over the first 5 s of pushes: %s", t.label, path)
	}
	lat := loadgen.NewHistogram()
	cpu0, self0, resp0 := t.child.cpu(), benchSelfCPU(), responses.Load()
	for k := 1; k <= changes; k++ {
		start := time.Now()
		if err := e.xdsRegisterProbe(t.child, t.probes); err != nil {
			return r, err
		}
		t.probes++
		deadline := time.Now().Add(30 * time.Second)
		for seen[k].Load() < int64(clients) {
			if time.Now().After(deadline) {
				return r, fmt.Errorf("change %d reached %d of %d streams in 30 s", k, seen[k].Load(), clients)
			}
			time.Sleep(time.Millisecond)
		}
		atMu.Lock()
		for _, t := range at[k] {
			lat.Record(t.Sub(start))
		}
		atMu.Unlock()
	}
	r.cpu, r.clientCPU = t.child.cpu()-cpu0, benchSelfCPU()-self0
	r.responses = float64(responses.Load()-resp0) / float64(changes*clients)
	if profiled != nil {
		if err := <-profiled; err != nil {
			return r, err
		}
	}
	r.p50, r.p99, r.max = lat.Quantile(0.5), lat.Quantile(0.99), lat.Max()
	return r, nil
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
func (e *benchEnv) xdsRegisterProbe(c *benchChild, k int) error {
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
				if xdsCLAName(r.GetValue()) != probe {
					continue
				}
				var cla endpointv3.ClusterLoadAssignment
				if r.UnmarshalTo(&cla) != nil {
					continue
				}
				n := 0
				for _, l := range cla.GetEndpoints() {
					n += len(l.GetLbEndpoints())
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

// xdsCLAName is the cluster_name (field 1) of an encoded
// ClusterLoadAssignment, found without decoding the rest: the bench's
// clients decode only the probe's assignment, whichever server sends what.
func xdsCLAName(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(v)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

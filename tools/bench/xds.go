package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- xDS control plane ----
//
// A node with muster.xds.enabled and the 10k fleet; benchXDSClients ADS
// streams, each on its own gRPC connection (as separate proxyless clients
// or Envoys have), subscribed to the assignments of one fleet app and of
// a probe app. Then one probe instance after another is registered over
// the Eureka API and every stream's receipt of it timed: registration →
// xDS push p50/p99 over all streams, and the server's CPU per pushed
// change per stream. The live heap and RSS the idle streams added, per
// stream, come first. The clients run in the bench process, on the same
// two cores as the server: the push times include their decoding.

const (
	benchXDSFleet = 10_000
	benchXDSProbe = "XDS-PROBE"
)

// xdsBenchClient is one ADS stream that records when the probe app first
// listed k endpoints.
type xdsBenchClient struct {
	conn   *grpc.ClientConn
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	names  []string
	first  chan struct{} // closed on the first response
}

func (e *benchEnv) xds() error {
	clients, changes := 1000, 50
	if e.quick {
		clients, changes = 100, 10
	}
	port, err := benchFreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	mu, err := e.startChild("xds-muster-10k", "muster", "--set", "muster.xds.enabled=true", "--set", "muster.xds.addr="+addr)
	if err != nil {
		return err
	}
	defer mu.stop()
	t0 := time.Now()
	if _, err := e.registerFleet(mu, 0, benchXDSFleet); err != nil {
		return err
	}
	e.logf("   registered %d instances in %s", benchXDSFleet, time.Since(t0).Round(time.Millisecond))
	// The probe app exists before the clients subscribe (one instance).
	if err := e.xdsRegisterProbe(mu, 0); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	// seen[k] counts the streams that have seen the probe with k+1
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
	var cs []*xdsBenchClient
	defer func() {
		for _, c := range cs {
			c.conn.Close()
		}
	}()
	// Two halves subscribed alike: the first warms what every stream
	// shares (assignments marshalled per zone), the second's cost is the
	// streams' own.
	half := clients / 2
	connect := func(from, to int) error {
		for i := from; i < to; i++ {
			c, err := xdsBenchDial(ctx, addr, i, i%half, changes, record)
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
	t0 = time.Now()
	if err := connect(0, half); err != nil {
		return err
	}
	warm, err := mu.mem(true)
	if err != nil {
		return err
	}
	if err := connect(half, clients); err != nil {
		return err
	}
	e.logf("   %d xDS streams connected and served in %s", clients, time.Since(t0).Round(time.Millisecond))
	idle, err := mu.mem(true)
	if err != nil {
		return err
	}
	second := float64(clients - half)
	if e.profileDir != "" {
		path := filepath.Join(e.profileDir, "xds-idle-streams.heap.pprof")
		if err := mu.heapProfile(path); err != nil {
			return err
		}
		e.logf("   heap profile of the node with %d idle xDS streams: %s", clients, path)
	}
	e.add(benchRow{Scenario: "xds", Figure: "live heap per idle xDS stream", Value: (float64(idle.HeapAlloc) - float64(warm.HeapAlloc)) / second, Unit: "B",
		Note: fmt.Sprintf("the last %d of %d ADS streams, one gRPC connection each, each subscribed to two assignments the first %d already had; server heap after GC", clients-half, clients, half)})
	e.add(benchRow{Scenario: "xds", Figure: "RSS per idle xDS stream", Value: (float64(idle.RSS) - float64(warm.RSS)) / second, Unit: "B",
		Note: fmt.Sprintf("VmRSS after GC and FreeOSMemory; %d goroutines in the server with the streams open", idle.Goroutines)})

	var profiled <-chan error
	if e.profileDir != "" {
		path := filepath.Join(e.profileDir, "xds-pushes.cpu.pprof")
		profiled = mu.profile(5*time.Second, path)
		e.logf("   CPU profile of the node over the first 5 s of pushes: %s", path)
	}
	lat := loadgen.NewHistogram()
	cpu0 := mu.cpu()
	for k := 1; k <= changes; k++ {
		start := time.Now()
		if err := e.xdsRegisterProbe(mu, k); err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for seen[k].Load() < int64(clients) {
			if time.Now().After(deadline) {
				return fmt.Errorf("change %d reached %d of %d streams in 30 s", k, seen[k].Load(), clients)
			}
			time.Sleep(time.Millisecond)
		}
		atMu.Lock()
		for _, t := range at[k] {
			lat.Record(t.Sub(start))
		}
		atMu.Unlock()
	}
	cpu := mu.cpu() - cpu0
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
	}
	note := fmt.Sprintf("%d registrations, one at a time, each timed on all %d streams from the POST to the stream's receipt; max %.1f ms",
		changes, clients, ms(lat.Max()))
	e.add(benchRow{Scenario: "xds", Figure: fmt.Sprintf("registration → xDS push p50 (%d streams, 10k instances)", clients), Value: ms(lat.Quantile(0.5)), Unit: "ms", Note: note})
	e.add(benchRow{Scenario: "xds", Figure: fmt.Sprintf("registration → xDS push p99 (%d streams, 10k instances)", clients), Value: ms(lat.Quantile(0.99)), Unit: "ms",
		Target: "< 1000 ms", Met: benchBool(lat.Quantile(0.99) < time.Second)})
	e.add(benchRow{Scenario: "xds", Figure: "server CPU per pushed change per stream (10k instances)", Value: float64(cpu.Microseconds()) / float64(changes*clients), Unit: "µs",
		Note: fmt.Sprintf("user+system CPU of the server over the %d changes (the registrations included) ÷ (changes × streams); %.1f ms per change in all",
			changes, float64(cpu.Microseconds())/1000/float64(changes))})
	return nil
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
// probe and to a fleet app, in a zone, both picked by kind, and reads it until ctx ends,
// ACKing every response and calling record(k, now) when the probe first
// has k+1 endpoints.
func xdsBenchDial(ctx context.Context, addr string, i, kind, changes int, record func(k int, t time.Time)) (*xdsBenchClient, error) {
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
	fleetApp := benchVIP((kind % (benchXDSFleet / benchPerApp)) * benchPerApp)
	c := &xdsBenchClient{conn: conn, stream: stream, names: []string{probe, fleetApp}, first: make(chan struct{})}
	zone := "eu-west-1" + string(rune('a'+kind%3))
	if err := stream.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "bench-" + strconv.Itoa(i), Locality: &corev3.Locality{Zone: zone}},
		TypeUrl: resource.EndpointType, ResourceNames: c.names}); err != nil {
		conn.Close()
		return nil, err
	}
	go func() {
		highest := 0 // probe endpoints seen so far, minus one
		firstDone := false
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			now := time.Now()
			for _, r := range resp.GetResources() {
				var cla endpointv3.ClusterLoadAssignment
				if r.UnmarshalTo(&cla) != nil || cla.GetClusterName() != probe {
					continue
				}
				n := 0
				for _, l := range cla.GetEndpoints() {
					n += len(l.GetLbEndpoints())
				}
				for k := highest + 1; k < n && k <= changes; k++ {
					record(k, now)
				}
				highest = max(highest, n-1)
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

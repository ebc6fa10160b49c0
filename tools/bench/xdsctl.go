package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/muster-registry/muster/xds"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// xdsControl is the control of the xds scenario (`bench ceiling --xds
// ADDR`): a bare go-control-plane server, as its README builds one, with no
// Muster code: one cache.SnapshotCache (every node under one key) and
// server.NewServer on a grpc.Server with the transport options the node's
// xDS server uses. It serves the assignments of the bench fleet's apps
// (one locality per zone, as the node builds them) and of the probe app;
// each POST of a probe registration to the ceiling adds one endpoint to
// the probe and sets a new snapshot: the registration-equivalent of the
// node, without the registry, its change stream or its per-zone caches.
type xdsControl struct {
	cache cache.SnapshotCache
	grpc  *grpc.Server
	addr  string    // where it serves
	floor *xdsFloor // set: the floor instead (ADDR floor:…)

	// mu guards fleet, probes and version.
	mu      sync.Mutex
	fleet   []types.Resource
	probes  int
	version int
}

// xdsControlHash puts every node under one key: one SetSnapshot a change.
// The cache is made with ads false: in ADS mode a SnapshotCache answers a
// request only when it names every resource of the snapshot (a snapshot per
// node), and these streams each ask for two of 201.
type xdsControlHash struct{}

func (xdsControlHash) ID(*corev3.Node) string { return "all" }

// startXDSControl serves the control on addr with the first fleet
// instances of the bench fleet and one probe endpoint.
// An addr of "floor:ADDR" serves the floor on ADDR instead (xdsFloor).
func startXDSControl(addr string, fleet int) (*xdsControl, error) {
	if a, ok := strings.CutPrefix(addr, "floor:"); ok {
		f, err := startXDSFloor(a, fleet)
		if err != nil {
			return nil, err
		}
		return &xdsControl{floor: f, addr: f.addr}, nil
	}
	x := &xdsControl{cache: cache.NewSnapshotCache(false, xdsControlHash{}, nil), probes: 1}
	for from := 0; from < fleet; from += benchPerApp {
		x.fleet = append(x.fleet, xdsControlFleetCLA(from, min(from+benchPerApp, fleet)))
	}
	if err := x.setLocked(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	x.addr = ln.Addr().String()
	x.grpc = grpc.NewServer(xdsControlServerOptions()...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(x.grpc, xdsserver.NewServer(context.Background(), x.cache, nil))
	go func() { _ = x.grpc.Serve(ln) }()
	return x, nil
}

// register adds one probe endpoint and publishes the snapshot with it.
func (x *xdsControl) register() error {
	if x.floor != nil {
		return x.floor.register()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.probes++
	return x.setLocked()
}

func (x *xdsControl) setLocked() error {
	x.version++
	res := append(append(make([]types.Resource, 0, len(x.fleet)+1), x.fleet...), xdsControlProbeCLA(x.probes))
	snap, err := cache.NewSnapshot(strconv.Itoa(x.version), map[resource.Type][]types.Resource{resource.EndpointType: res})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return x.cache.SetSnapshot(ctx, "all", snap)
}

func (x *xdsControl) stop() {
	if x.floor != nil {
		x.floor.grpc.Stop()
		return
	}
	x.grpc.Stop()
}

// xdsControlServerOptions are the node's gRPC transport options (package
// xds, Server.Start), for the control and the floor.
func xdsControlServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(4 << 20), grpc.SharedWriteBuffer(true), grpc.ReadBufferSize(8 << 10),
		grpc.InitialWindowSize(xds.StreamWindow), grpc.InitialConnWindowSize(xds.StreamWindow)}
}

// xdsControlProbeCLA is the probe app's assignment with probes endpoints.
func xdsControlProbeCLA(probes int) *endpointv3.ClusterLoadAssignment {
	eps := make([]*endpointv3.LbEndpoint, probes)
	for k := range probes {
		id := "probe-" + strconv.Itoa(k)
		eps[k] = xdsControlEndpoint(fmt.Sprintf("10.250.%d.%d", k/250, k%250+1), id, benchXDSProbe, id, map[string]any{"zone": "eu-west-1a"})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: "xds-probe", Endpoints: []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{Zone: "eu-west-1a"}, LoadBalancingWeight: wrapperspb.UInt32(uint32(probes)), LbEndpoints: eps}}}
}

// xdsFloor is the floor of the xds scenario (`bench ceiling --xds
// floor:ADDR`): the least a server can do to push a change to the same
// clients, so the machine's own limit shows beside the node. No xDS
// library: an ADS service on the node's gRPC transport options that, per
// change, marshals one DiscoveryResponse holding the probe's assignment
// (the one resource that changed, as the node sends it) and writes those
// very bytes to every stream (the version is the nonce too, so all get the
// same message). A stream's first response holds what it asked for; the
// requests after it (ACKs) are read and not decoded. It keeps no protocol
// state: what is left of a push's latency is the clients', the transport's
// and the machine's.
type xdsFloor struct {
	discoverygrpc.UnimplementedAggregatedDiscoveryServiceServer
	grpc  *grpc.Server
	addr  string
	fleet map[string][]byte // encoded assignments by name

	// mu guards the rest.
	mu      sync.Mutex
	probes  int
	version int
	probe   []byte       // the probe's assignment, encoded
	push    *xdsFloorRaw // the last change's response, encoded
	streams map[chan struct{}]struct{}
}

// xdsFloorRaw is a message already encoded (sent as is), or one to read
// and drop.
type xdsFloorRaw struct{ b []byte }

// xdsFloorCodec sends xdsFloorRaw as is and drops it on receipt; other
// messages are protobuf as usual.
type xdsFloorCodec struct{}

func (xdsFloorCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*xdsFloorRaw); ok {
		return r.b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (xdsFloorCodec) Unmarshal(b []byte, v any) error {
	if _, ok := v.(*xdsFloorRaw); ok {
		return nil
	}
	return proto.Unmarshal(b, v.(proto.Message))
}

func (xdsFloorCodec) Name() string { return "proto" }

func startXDSFloor(addr string, fleet int) (*xdsFloor, error) {
	f := &xdsFloor{fleet: map[string][]byte{}, streams: map[chan struct{}]struct{}{}}
	for from := 0; from < fleet; from += benchPerApp {
		b, err := proto.Marshal(xdsControlFleetCLA(from, min(from+benchPerApp, fleet)))
		if err != nil {
			return nil, err
		}
		f.fleet[benchVIP(from)] = b
	}
	if err := f.register(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f.addr = ln.Addr().String()
	f.grpc = grpc.NewServer(append(xdsControlServerOptions(), grpc.ForceServerCodec(xdsFloorCodec{}))...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(f.grpc, f)
	go func() { _ = f.grpc.Serve(ln) }()
	return f, nil
}

// register adds one probe endpoint, encodes the response once and wakes
// every stream.
func (f *xdsFloor) register() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes++
	f.version++
	probe, err := proto.Marshal(xdsControlProbeCLA(f.probes))
	if err != nil {
		return err
	}
	v := strconv.Itoa(f.version)
	b, err := proto.Marshal(&discoverygrpc.DiscoveryResponse{VersionInfo: v, Nonce: v, TypeUrl: resource.EndpointType,
		Resources: []*anypb.Any{{TypeUrl: resource.EndpointType, Value: probe}}})
	if err != nil {
		return err
	}
	f.probe, f.push = probe, &xdsFloorRaw{b}
	for w := range f.streams {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	return nil
}

// StreamAggregatedResources answers the first request with what it names,
// then writes each change's response.
func (f *xdsFloor) StreamAggregatedResources(s discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	wake := make(chan struct{}, 1)
	f.mu.Lock()
	f.streams[wake] = struct{}{}
	sent, v := f.push, strconv.Itoa(f.version)
	first := &discoverygrpc.DiscoveryResponse{VersionInfo: v, Nonce: v, TypeUrl: resource.EndpointType}
	for _, n := range req.GetResourceNames() {
		b := f.fleet[n]
		if n == "xds-probe" {
			b = f.probe
		}
		if b != nil {
			first.Resources = append(first.Resources, &anypb.Any{TypeUrl: resource.EndpointType, Value: b})
		}
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.streams, wake)
		f.mu.Unlock()
	}()
	if err := s.Send(first); err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if err := s.RecvMsg(&xdsFloorRaw{}); err != nil {
				ended <- err
				return
			}
		}
	}()
	for {
		select {
		case err := <-ended:
			return err
		case <-wake:
			f.mu.Lock()
			p := f.push
			f.mu.Unlock()
			if p != sent {
				if err := s.SendMsg(p); err != nil {
					return err
				}
				sent = p
			}
		}
	}
}

// xdsControlFleetCLA is the assignment of the fleet app of instances
// [from, to): one locality per zone, as the node builds it.
func xdsControlFleetCLA(from, to int) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: benchVIP(from)}
	byZone := map[int]*endpointv3.LocalityLbEndpoints{}
	for i := from; i < to; i++ {
		z := i % 3
		l := byZone[z]
		if l == nil {
			l = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Zone: "eu-west-1" + string(rune('a'+z))}}
			byZone[z] = l
			cla.Endpoints = append(cla.Endpoints, l)
		}
		md := map[string]any{"management.port": "8081", "version": "1." + strconv.Itoa(int(benchMix(uint64(i/benchPerApp))%20)) + "." + strconv.Itoa(i%7),
			"zone": "eu-west-1" + string(rune('a'+z))}
		if z >= 1 {
			md["git.commit"] = fmt.Sprintf("%07x", benchMix(uint64(i/benchPerApp+i%7))&0xfffffff)
		}
		if z == 2 {
			md["profile"] = "prod"
		}
		l.LbEndpoints = append(l.LbEndpoints, xdsControlEndpoint(benchIP(i), benchHost(i), benchAppName(i), benchInstanceID(i), md))
	}
	for _, l := range cla.Endpoints {
		l.LoadBalancingWeight = wrapperspb.UInt32(uint32(len(l.LbEndpoints)))
	}
	return cla
}

// xdsControlEndpoint is an endpoint with what the node puts in one: the
// host name, and the instance's metadata and identity as filter_metadata,
// so the control pushes as many bytes as the node.
func xdsControlEndpoint(ip, host, app, id string, md map[string]any) *endpointv3.LbEndpoint {
	lb, _ := structpb.NewStruct(md)
	who, _ := structpb.NewStruct(map[string]any{"app": app, "instanceId": id, "hostName": host})
	return &endpointv3.LbEndpoint{
		HealthStatus:        corev3.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(1),
		Metadata:            &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb": lb, "muster": who}},
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Hostname: host, Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Protocol: corev3.SocketAddress_TCP, Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}}}},
	}
}

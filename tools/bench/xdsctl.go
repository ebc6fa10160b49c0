package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
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
	addr  string // where it serves

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
func startXDSControl(addr string, fleet int) (*xdsControl, error) {
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
	x.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(4<<20), grpc.SharedWriteBuffer(true), grpc.ReadBufferSize(8<<10))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(x.grpc, xdsserver.NewServer(context.Background(), x.cache, nil))
	go func() { _ = x.grpc.Serve(ln) }()
	return x, nil
}

// register adds one probe endpoint and publishes the snapshot with it.
func (x *xdsControl) register() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.probes++
	return x.setLocked()
}

func (x *xdsControl) setLocked() error {
	x.version++
	eps := make([]*endpointv3.LbEndpoint, x.probes)
	for k := range x.probes {
		id := "probe-" + strconv.Itoa(k)
		eps[k] = xdsControlEndpoint(fmt.Sprintf("10.250.%d.%d", k/250, k%250+1), id, benchXDSProbe, id, map[string]any{"zone": "eu-west-1a"})
	}
	probe := &endpointv3.ClusterLoadAssignment{ClusterName: "xds-probe", Endpoints: []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{Zone: "eu-west-1a"}, LoadBalancingWeight: wrapperspb.UInt32(uint32(x.probes)), LbEndpoints: eps}}}
	res := append(append(make([]types.Resource, 0, len(x.fleet)+1), x.fleet...), probe)
	snap, err := cache.NewSnapshot(strconv.Itoa(x.version), map[resource.Type][]types.Resource{resource.EndpointType: res})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return x.cache.SetSnapshot(ctx, "all", snap)
}

func (x *xdsControl) stop() { x.grpc.Stop() }

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

package xds

import (
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/report"
)

// MaxEndpointWeight caps metadata.weight: grpc-go rejects a locality whose
// endpoint weights sum past 2^32-1, and 65535 (the DNS SRV range) keeps
// any realistic app far below it.
const MaxEndpointWeight = 65535

// Metadata namespaces of an endpoint's filter_metadata.
const (
	// MetadataLB holds the instance's Eureka metadata as strings, under
	// Envoy's subset load balancer namespace so subsets can match on it.
	MetadataLB = "envoy.lb"
	// MetadataMuster holds who the endpoint is: app, instanceId, hostName.
	MetadataMuster = "muster"
)

// endpoint is one instance as xDS serves it.
type endpoint struct {
	addr   string // IP literal
	port   uint32
	weight uint32
	region string
	zone   string
	lb     *endpointv3.LbEndpoint // zone-independent, shared by every CLA
}

// appPiece is one app's endpoints at one AppView.Version, cached so that a
// change rebuilds only its own app.
type appPiece struct {
	version   uint64
	served    map[string]bool   // ids of the instances served (UP, usable)
	warm      map[string]warmth // the warming ones' ramps at this build
	weights   map[string]Weight // by instance id: what each endpoint is served with
	endpoints []endpoint        // UP, usable, sorted by instance id, duplicates dropped
	vips      []string          // every vipAddress part its instances list
	vipEPs    map[string][]endpoint
	clas      map[string]*endpointv3.ClusterLoadAssignment // by client zone ("" for none)
}

// Name is the xDS name of an app: its lower-cased name.
func Name(app string) string { return strings.ToLower(app) }

// usable reports whether an instance is served and the port it is served
// on. Only UP instances are: DOWN, STARTING and OUT_OF_SERVICE ones (the
// status the registry serves to Eureka clients, overrides applied) are left
// out rather than sent as UNHEALTHY, because Envoy's panic threshold sends
// traffic to UNHEALTHY hosts once fewer than half are healthy, and an
// instance taken OUT_OF_SERVICE must get none. The address must be an IP
// literal (neither grpc-go nor an EDS cluster resolves host names).
func usable(in *registry.Instance) (addr netip.Addr, port int, ok bool) {
	if in.Status != registry.StatusUp {
		return netip.Addr{}, 0, false
	}
	ip, err := netip.ParseAddr(in.IPAddr)
	if err != nil {
		return netip.Addr{}, 0, false
	}
	switch {
	case in.Port.Enabled && in.Port.Number > 0 && in.Port.Number <= 65535:
		port = in.Port.Number
	case in.SecurePort.Enabled && in.SecurePort.Number > 0 && in.SecurePort.Number <= 65535:
		port = in.SecurePort.Number
	default:
		return netip.Addr{}, 0, false
	}
	return ip.Unmap(), port, true
}

// instanceWeight is metadata.weight within 1..MaxEndpointWeight; missing,
// unreadable or 0 is 1 (grpc-go rejects a zero endpoint weight).
func instanceWeight(in *registry.Instance) uint32 {
	if v, ok := in.Metadata.Get("weight"); ok {
		if w, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && w >= 1 {
			return uint32(min(w, MaxEndpointWeight))
		}
	}
	return 1
}

// instanceZone is the EC2 availability zone of an Amazon instance, else
// the "zone" metadata Spring Cloud sets (as the DNS interface reads it).
func instanceZone(in *registry.Instance) string {
	if in.DataCenterInfo.Name == "Amazon" {
		if z, ok := in.DataCenterInfo.Metadata.Get("availability-zone"); ok && z != "" {
			return z
		}
	}
	z, _ := in.Metadata.Get("zone")
	return z
}

// instanceRegion is metadata.region, else for an Amazon instance its
// availability zone without the trailing letter (us-east-1a → us-east-1).
func instanceRegion(in *registry.Instance) string {
	if r, ok := in.Metadata.Get("region"); ok && r != "" {
		return r
	}
	if in.DataCenterInfo.Name == "Amazon" {
		if z, ok := in.DataCenterInfo.Metadata.Get("availability-zone"); ok && len(z) > 1 {
			if last := z[len(z)-1]; last >= 'a' && last <= 'z' {
				return z[:len(z)-1]
			}
		}
	}
	return ""
}

// Weight is an instance's endpoint weight as xDS serves it now.
type Weight = report.XDSWeight

// buildPiece builds app's endpoints; scale multiplies every weight
// (WeightScale while warm-up is on, else 1) and warm gives the warming
// instances' ramps.
func buildPiece(app registry.AppView, scale uint32, served map[string]bool, warm map[string]warmth) *appPiece {
	p := &appPiece{version: app.Version, served: served, warm: warm, clas: map[string]*endpointv3.ClusterLoadAssignment{}}
	var ins []*registry.Instance
	seen := map[string]bool{}
	vipSeen := map[string]bool{}
	for _, iv := range app.Instances {
		in := iv.Instance
		for _, v := range strings.Split(in.VIPAddress, ",") {
			if v = strings.TrimSpace(v); v != "" && !vipSeen[v] {
				vipSeen[v] = true
				p.vips = append(p.vips, v)
			}
		}
		ip, port, ok := usable(in)
		if !ok {
			continue
		}
		key := netip.AddrPortFrom(ip, uint16(port)).String()
		if seen[key] {
			// grpc-go rejects a whole assignment that lists one address
			// twice; the first instance id (sorted) wins.
			continue
		}
		seen[key] = true
		weight := instanceWeight(in) * scale
		if w, ok := warm[in.ID()]; ok {
			weight = max(weight*uint32(w.percent)/100, 1)
		}
		ep := endpoint{addr: ip.String(), port: uint32(port), weight: weight,
			region: instanceRegion(in), zone: instanceZone(in)}
		p.endpoints = append(p.endpoints, ep)
		ins = append(ins, in)
	}
	div := fitWeights(p.endpoints)
	p.weights = make(map[string]Weight, len(ins))
	for i, in := range ins {
		ep := &p.endpoints[i]
		ep.lb = lbEndpoint(in, *ep)
		wt := Weight{Weight: ep.weight, Full: max(instanceWeight(in)*scale/div, 1), Percent: 100}
		if w, ok := warm[in.ID()]; ok {
			wt.Percent, wt.WarmUntil = w.percent, w.until
		}
		p.weights[in.ID()] = wt
		for _, v := range strings.Split(in.VIPAddress, ",") {
			if v = strings.TrimSpace(v); v != "" {
				if p.vipEPs == nil {
					p.vipEPs = map[string][]endpoint{}
				}
				p.vipEPs[v] = append(p.vipEPs[v], *ep)
			}
		}
	}
	sort.Strings(p.vips)
	return p
}

func lbEndpoint(in *registry.Instance, ep endpoint) *endpointv3.LbEndpoint {
	lb := map[string]any{}
	for _, kv := range in.Metadata {
		lb[kv.Key] = kv.Value
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	if len(lb) > 0 {
		if s, err := structpb.NewStruct(lb); err == nil {
			md.FilterMetadata[MetadataLB] = s
		}
	}
	if s, err := structpb.NewStruct(map[string]any{"app": in.App, "instanceId": in.ID(), "hostName": in.HostName}); err == nil {
		md.FilterMetadata[MetadataMuster] = s
	}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address:  socketAddress(ep.addr, ep.port),
			Hostname: in.HostName,
		}},
		HealthStatus:        corev3.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(ep.weight),
		Metadata:            md,
	}
}

func socketAddress(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol: corev3.SocketAddress_TCP, Address: addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// cla is the ClusterLoadAssignment of name over eps for a client in
// clientZone: one locality per (region, zone), weighted by the sum of its
// endpoints' weights. When the client names a zone that has endpoints,
// that zone's localities are priority 0 and every other priority 1, so the
// client stays in its zone while its zone has endpoints (grpc-go and Envoy
// fail over to priority 1 when it has none left).
func cla(name string, eps []endpoint, clientZone string) *endpointv3.ClusterLoadAssignment {
	type key struct{ region, zone string }
	groups := map[key]*endpointv3.LocalityLbEndpoints{}
	var keys []key
	sums := map[key]uint64{}
	local := false
	for _, ep := range eps {
		k := key{ep.region, ep.zone}
		g, ok := groups[k]
		if !ok {
			g = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Region: ep.region, Zone: ep.zone}}
			groups[k] = g
			keys = append(keys, k)
		}
		g.LbEndpoints = append(g.LbEndpoints, ep.lb)
		sums[k] += uint64(ep.weight)
		if clientZone != "" && ep.zone == clientZone {
			local = true
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].region != keys[j].region {
			return keys[i].region < keys[j].region
		}
		return keys[i].zone < keys[j].zone
	})
	out := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	for _, k := range keys {
		g := groups[k]
		g.LoadBalancingWeight = wrapperspb.UInt32(uint32(min(sums[k], math.MaxUint32)))
		if local && k.zone != clientZone {
			g.Priority = 1
		}
		out.Endpoints = append(out.Endpoints, g)
	}
	return out
}

// hasZone tells whether any endpoint is in zone: only then does a
// client of that zone get a CLA of its own.
func hasZone(eps []endpoint, zone string) bool {
	if zone == "" {
		return false
	}
	for _, ep := range eps {
		if ep.zone == zone {
			return true
		}
	}
	return false
}

func (p *appPiece) claFor(name, zone string) *endpointv3.ClusterLoadAssignment {
	if !hasZone(p.endpoints, zone) {
		zone = ""
	}
	if c, ok := p.clas[zone]; ok {
		return c
	}
	c := cla(name, p.endpoints, zone)
	p.clas[zone] = c
	return c
}

// edsCluster is the CDS resource of name: an EDS cluster whose endpoints
// come over the same ADS stream.
func edsCluster(name string, ringHash bool) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   adsSource(),
			ServiceName: name,
		},
		ConnectTimeout: durationpb.New(5 * time.Second),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
	}
	if ringHash {
		ringHashConfig(c)
	}
	return c
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// routerAny is the router filter's typed config, the same for every name.
var routerAny = func() *anypb.Any {
	a, err := anypb.New(&routerv3.Router{})
	if err != nil {
		panic(err) // a well-formed message always marshals
	}
	return a
}()

// apiListener is the LDS resource of name for proxyless gRPC: an
// api_listener whose HttpConnectionManager reads route configuration name
// over ADS and ends in the router filter.
func apiListener(name string) *listenerv3.Listener {
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: name,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: routerAny},
		}},
	}
	a, err := anypb.New(hcm)
	if err != nil {
		panic(err) // a well-formed message always marshals
	}
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: a}}
}

// routeConfig is the RDS resource of name: one virtual host (any
// authority: the configuration serves this one name) with one route to the
// cluster of the same name.
func routeConfig(name string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}},
			}},
		}},
	}
}

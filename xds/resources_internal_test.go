package xds

import (
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func newRegistry(t *testing.T, ins ...*registry.Instance) *registry.Registry {
	t.Helper()
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func at(ip string, port int) registrytest.Option {
	return func(in *registry.Instance) { in.IPAddr, in.Port = ip, registry.Port{Number: port, Enabled: true} }
}

// endpointsOf lists an assignment as "zone/region addr:port w=weight p=priority" lines.
func endpointsOf(c *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range c.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, l.GetLocality().GetRegion()+"/"+l.GetLocality().GetZone()+" "+sa.GetAddress()+":"+itoa(sa.GetPortValue())+
				" w="+itoa(e.GetLoadBalancingWeight().GetValue())+" lw="+itoa(l.GetLoadBalancingWeight().GetValue())+" p="+itoa(l.GetPriority())+
				" "+e.GetHealthStatus().String())
		}
	}
	return out
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// TestMapping: only UP instances are endpoints (HEALTHY); zone and region
// make localities weighted by their endpoints' sum; metadata.weight is the
// endpoint weight (1 when missing or 0, capped); the secure port is used
// when only it is enabled; a duplicate address and a host name in ipAddr
// are left out; metadata goes to filter_metadata.
func TestMapping(t *testing.T) {
	secureOnly := func(in *registry.Instance) {
		in.Port.Enabled = false
		in.SecurePort = registry.Port{Number: 8443, Enabled: true}
	}
	amazon := func(in *registry.Instance) {
		in.DataCenterInfo = registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "Amazon",
			Metadata: registry.NewMetadata(map[string]string{"availability-zone": "us-east-1b", "instance-id": in.InstanceID})}
	}
	reg := newRegistry(t,
		registrytest.NewInstance("ORDERS", "a1", at("10.0.0.1", 8080), registrytest.WithMetadata(map[string]string{"zone": "z1", "region": "r1", "weight": "3", "version": "v2"})),
		registrytest.NewInstance("ORDERS", "a2", at("10.0.0.2", 8080), registrytest.WithMetadata(map[string]string{"zone": "z1", "region": "r1", "weight": "0"})),
		registrytest.NewInstance("ORDERS", "a3", at("10.0.0.3", 8080), registrytest.WithMetadata(map[string]string{"zone": "z2", "weight": "999999"})),
		registrytest.NewInstance("ORDERS", "a4", at("10.0.0.4", 8080), registrytest.WithStatus(registry.StatusDown)),
		registrytest.NewInstance("ORDERS", "a5", at("10.0.0.5", 8080), registrytest.WithStatus(registry.StatusStarting)),
		registrytest.NewInstance("ORDERS", "a6", at("10.0.0.6", 8080), registrytest.WithStatus(registry.StatusOutOfService)),
		registrytest.NewInstance("ORDERS", "a7", at("10.0.0.1", 8080)), // same address as a1
		registrytest.NewInstance("ORDERS", "a8", at("orders-8.internal", 8080)),
		registrytest.NewInstance("ORDERS", "a9", at("10.0.0.9", 8080), secureOnly),
		registrytest.NewInstance("ORDERS", "b1", at("10.0.1.1", 9090), amazon),
	)
	bt := newBuilder("e", DefaultConfig()).update(reg.Snapshot(), time.Now())
	got := endpointsOf(bt.sources["orders"].cla("orders", ""))
	want := []string{
		"/ 10.0.0.9:8443 w=1 lw=1 p=0 HEALTHY",
		"/z2 10.0.0.3:8080 w=65535 lw=65535 p=0 HEALTHY",
		"r1/z1 10.0.0.1:8080 w=3 lw=4 p=0 HEALTHY",
		"r1/z1 10.0.0.2:8080 w=1 lw=4 p=0 HEALTHY",
		"us-east-1/us-east-1b 10.0.1.1:9090 w=1 lw=1 p=0 HEALTHY",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("endpoints:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A client in z1 keeps to z1 (priority 0); the rest is its fallback.
	zoned := endpointsOf(bt.sources["orders"].cla("orders", "z1"))
	for _, line := range zoned {
		if strings.Contains(line, "/z1 ") != strings.HasSuffix(strings.TrimSuffix(line, " HEALTHY"), "p=0") {
			t.Errorf("zone z1 client: %s", line)
		}
	}
	// A client of a zone without endpoints gets the zone-less assignment.
	if other := bt.sources["orders"].cla("orders", "z9"); other != bt.sources["orders"].cla("orders", "") {
		t.Error("zone without endpoints: a variant of its own")
	}
	lb := bt.sources["orders"].cla("orders", "").GetEndpoints()[2].GetLbEndpoints()[0].GetMetadata().GetFilterMetadata()
	if v := lb[MetadataLB].GetFields()["version"].GetStringValue(); v != "v2" {
		t.Errorf("filter_metadata %s: %v", MetadataLB, lb[MetadataLB])
	}
	if v := lb[MetadataMuster].GetFields()["instanceId"].GetStringValue(); v != "a1" {
		t.Errorf("filter_metadata %s: %v", MetadataMuster, lb[MetadataMuster])
	}
}

// TestNames: every app is served under its lower-case name, and a VIP
// that is no app's name under the VIP, with the instances listing it;
// each name is a listener (api_listener, RDS over ADS, router filter), a
// route configuration with one virtual host to the cluster of the same
// name, and an EDS cluster over ADS.
func TestNames(t *testing.T) {
	reg := newRegistry(t,
		registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80), registrytest.WithVIP("orders,shop")),
		registrytest.NewInstance("BILLING", "b1", at("10.0.0.2", 80), registrytest.WithVIP("billing-v2,shop")),
	)
	bt := newBuilder("e", DefaultConfig()).update(reg.Snapshot(), time.Now())
	if got := strings.Join(bt.names, ","); got != "billing,billing-v2,orders,shop" {
		t.Fatalf("names %s", got)
	}
	if got := endpointsOf(bt.sources["shop"].cla("shop", "")); len(got) != 2 {
		t.Errorf("VIP shop: %v", got)
	}
	snap := bt.snapshot("")
	l := snap.GetResources(resource.ListenerType)["shop"].(*listenerv3.Listener)
	var hcm hcmv3.HttpConnectionManager
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if hcm.GetRds().GetRouteConfigName() != "shop" || hcm.GetRds().GetConfigSource().GetAds() == nil ||
		len(hcm.GetHttpFilters()) != 1 || hcm.GetHttpFilters()[0].GetName() != "envoy.filters.http.router" {
		t.Errorf("listener: %v", &hcm)
	}
	rc := snap.GetResources(resource.RouteType)["shop"].(*routev3.RouteConfiguration)
	if vh := rc.GetVirtualHosts(); len(vh) != 1 || vh[0].GetRoutes()[0].GetRoute().GetCluster() != "shop" {
		t.Errorf("route: %v", rc)
	}
	c := snap.GetResources(resource.ClusterType)["shop"].(*clusterv3.Cluster)
	if c.GetType() != clusterv3.Cluster_EDS || c.GetEdsClusterConfig().GetServiceName() != "shop" ||
		c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
		t.Errorf("cluster: %v", c)
	}
	for _, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
		for name, r := range snap.GetResources(typ) {
			if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
				t.Errorf("%s %s: %v", typ, name, err)
			}
		}
	}
}

// TestConsistent: the CDS and EDS resources, as an Envoy subscribing to
// clusters (wildcard) and their endpoints sees them, pass the library's
// consistency check: every EDS cluster's assignment is there, and nothing
// else. Apps without an UP instance still have an (empty) assignment.
func TestConsistent(t *testing.T) {
	reg := newRegistry(t,
		registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)),
		registrytest.NewInstance("ORDERS", "o2", at("10.0.0.2", 80), registrytest.WithStatus(registry.StatusDown)),
		registrytest.NewInstance("BILLING", "b1", at("10.0.0.3", 80), registrytest.WithStatus(registry.StatusOutOfService), registrytest.WithVIP("pay")),
	)
	bt := newBuilder("e", DefaultConfig()).update(reg.Snapshot(), time.Now())
	full := bt.snapshot("")
	envoy, err := cache.NewSnapshot(full.GetVersion(resource.EndpointType), map[resource.Type][]types.Resource{
		resource.ClusterType:  values(full.GetResources(resource.ClusterType)),
		resource.EndpointType: values(full.GetResources(resource.EndpointType)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := envoy.Consistent(); err != nil {
		t.Fatalf("CDS+EDS: %v", err)
	}
	if c := full.GetResources(resource.EndpointType)["billing"].(*endpointv3.ClusterLoadAssignment); len(c.GetEndpoints()) != 0 {
		t.Errorf("billing (no UP instance): %v", c)
	}
}

func values(m map[string]types.Resource) []types.Resource {
	out := make([]types.Resource, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// TestBuilder_reusesUnchangedApps: a change rebuilds its own app only, and
// names' resources (LDS, RDS, CDS) keep their version until the set of
// names changes.
func TestBuilder_reusesUnchangedApps(t *testing.T) {
	reg := newRegistry(t,
		registrytest.NewInstance("ORDERS", "o1", at("10.0.0.1", 80)),
		registrytest.NewInstance("BILLING", "b1", at("10.0.0.2", 80)),
	)
	b := newBuilder("e", DefaultConfig())
	first := b.update(reg.Snapshot(), time.Now())
	billing := first.sources["billing"].piece
	if _, err := reg.Apply(registry.StatusOp("ORDERS", "o1", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	second := b.update(reg.Snapshot(), time.Now())
	if second.sources["billing"].piece != billing {
		t.Error("billing rebuilt for a change of orders")
	}
	if second.namesVersion != first.namesVersion || second.version == first.version {
		t.Errorf("versions: names %s → %s, eds %s → %s", first.namesVersion, second.namesVersion, first.version, second.version)
	}
	if eps := endpointsOf(second.sources["orders"].cla("orders", "")); len(eps) != 0 {
		t.Errorf("orders out of service: %v", eps)
	}
	if _, err := reg.Apply(registry.RegisterOp(registrytest.NewInstance("CART", "c1", at("10.0.0.3", 80)))); err != nil {
		t.Fatal(err)
	}
	if third := b.update(reg.Snapshot(), time.Now()); third.namesVersion == second.namesVersion {
		t.Error("a new app did not change the names' version")
	}
}

// snapshot is everything bt serves to clients in zone as one
// go-control-plane snapshot, for the library's consistency check.
func (bt *built) snapshot(zone string) *cache.Snapshot {
	eds := make([]types.Resource, 0, len(bt.names))
	for _, n := range bt.names {
		eds = append(eds, bt.sources[n].cla(n, zone))
	}
	edsVersion := bt.version
	if zone != "" {
		edsVersion += "/" + zone
	}
	s := &cache.Snapshot{}
	s.Resources[types.Cluster] = cache.NewResources(bt.namesVersion, bt.clusters)
	s.Resources[types.Endpoint] = cache.NewResources(edsVersion, eds)
	s.Resources[types.Listener] = cache.NewResources(bt.namesVersion, bt.listeners)
	s.Resources[types.Route] = cache.NewResources(bt.namesVersion, bt.routes)
	return s
}

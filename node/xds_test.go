package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/muster-registry/muster/internal/keystoretest"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/tlsconfig"
)

// registerOrder registers a gRPC server as an ORDERS instance over the
// Eureka REST API.
func registerOrder(t *testing.T, n *Node, id string, port int, zone string) {
	t.Helper()
	body := fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"localhost","app":"ORDERS","ipAddr":"127.0.0.1","status":"UP",
"port":{"$":%d,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"vipAddress":"orders","metadata":{"zone":%q}}}`, id, port, zone)
	if code := call(t, "POST", n.URL()+"apps/ORDERS", body); code != 204 {
		t.Fatalf("register %s: %d", id, code)
	}
}

// TestXDS_nodeServesAndReports: the assembly of the xDS part: with
// muster.xds.enabled a node's xDS server follows what is registered
// through the Eureka REST API, and its report reaches the dashboard and
// /metrics. (What a real gRPC client does with it, zones included, is
// xds/'s TestServer_grpcClient and TestServer_zonePreference.)
func TestXDS_nodeServesAndReports(t *testing.T) {
	n := startTestNode(t, "xds1", "z1", nil, "muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0")
	waitOpened(t, n)
	watch := adsWatch(t, n.xdsListen(), "orders")
	registerOrder(t, n, "o-a", 7001, "z1")
	waitEndpoints(t, watch, "register", "127.0.0.1:7001")

	clients := n.xdsClientList()
	if len(clients) != 1 || clients[0].Node != "ads-"+n.xdsListen() || !strings.Contains(strings.Join(clients[0].Types, ","), "eds") {
		t.Errorf("xDS clients: %+v", clients)
	}
	if v := metricValue(t, n, "muster_xds_streams"); v != 1 {
		t.Errorf("muster_xds_streams = %v", v)
	}
	// The dashboard's node page lists the client.
	code, page, err := httpGet("http://" + n.Addr() + "/")
	if err != nil || code != 200 || !strings.Contains(page, `id="xds-clients"`) || !strings.Contains(page, "ads-"+n.xdsListen()) {
		t.Errorf("dashboard: %d %v, xDS clients section missing", code, err)
	}
}

// adsWatch opens an ADS stream to addr asking for name's assignment and
// sends every assignment received (as sorted host:port lists) on the
// returned channel, ACKing each.
func adsWatch(t *testing.T, addr, name string) <-chan []string {
	t.Helper()
	ads, ctx := adsClient(t, addr)
	stream, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discovery.DiscoveryRequest{Node: &corev3.Node{Id: "ads-" + addr}, TypeUrl: resource.EndpointType, ResourceNames: []string{name}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	out := make(chan []string, 64)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			found := false
			for _, r := range resp.GetResources() {
				if eps, ok := endpointsOf(r, name); ok {
					found = true
					out <- eps
				}
			}
			if !found {
				out <- nil // the app is gone
			}
			_ = stream.Send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: []string{name},
				VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
		}
	}()
	return out
}

// adsClient is a plaintext ADS client of addr, and the context its
// streams run in until the test ends.
func adsClient(t *testing.T, addr string) (discovery.AggregatedDiscoveryServiceClient, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	return discovery.NewAggregatedDiscoveryServiceClient(conn), ctx
}

// endpointsOf is the sorted host:port list of r, if it is name's
// ClusterLoadAssignment.
func endpointsOf(r *anypb.Any, name string) ([]string, bool) {
	var cla endpointv3.ClusterLoadAssignment
	if r.UnmarshalTo(&cla) != nil || cla.GetClusterName() != name {
		return nil, false
	}
	eps := []string{}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			eps = append(eps, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
		}
	}
	sort.Strings(eps)
	return eps, true
}

// adsDeltaWatch is adsWatch over an incremental (delta) ADS stream: it
// subscribes to name's endpoints and acknowledges every response by its
// nonce, as Envoy with DELTA_GRPC does.
func adsDeltaWatch(t *testing.T, addr, name string) <-chan []string {
	t.Helper()
	ads, ctx := adsClient(t, addr)
	stream, err := ads.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta-" + addr}, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{name}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	out := make(chan []string, 64)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			for _, r := range resp.GetResources() {
				if eps, ok := endpointsOf(r.GetResource(), name); ok {
					out <- eps
				}
			}
			if slices.Contains(resp.GetRemovedResources(), name) {
				out <- nil
			}
			_ = stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: resp.GetNonce()})
		}
	}()
	return out
}

// waitEndpoints reads assignments until one lists want.
func waitEndpoints(t *testing.T, ch <-chan []string, what string, want ...string) {
	t.Helper()
	sort.Strings(want)
	timeout := time.After(15 * time.Second)
	var last []string
	for {
		select {
		case eps := <-ch:
			if strings.Join(eps, ",") == strings.Join(want, ",") {
				return
			}
			last = eps
		case <-timeout:
			t.Fatalf("%s: endpoints %v, want %v", what, last, want)
		}
	}
}

// TestXDS_threeNodes: three nodes, an xDS client on each; a register and
// a cancel made on any node reach the clients of all three.
func TestXDS_threeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	xdsOn := []string{"muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0"}
	n1 := startTestNode(t, "x1", "z1", nil, xdsOn...)
	seed := n1.gossipAddr(t)
	n2 := startTestNode(t, "x2", "z2", []string{seed}, xdsOn...)
	n3 := startTestNode(t, "x3", "z3", []string{seed}, xdsOn...)
	nodes := []*Node{n1, n2, n3}
	waitOpened(t, nodes...)
	testwait.True(t, 15*time.Second, "every node replicates to two peers", func() bool {
		for _, n := range nodes {
			if len(n.Peers()) != 2 {
				return false
			}
		}
		return true
	})
	var watches []<-chan []string
	for _, n := range nodes {
		watches = append(watches, adsWatch(t, n.xdsListen(), "orders"))
	}
	for i, w := range nodes {
		id := "o-" + strconv.Itoa(i)
		registerOrder(t, w, id, 7000+i, "z1")
		for j, ch := range watches {
			waitEndpoints(t, ch, fmt.Sprintf("register on %s, client of %s", w.name, nodes[j].name), "127.0.0.1:"+strconv.Itoa(7000+i))
		}
		// Cancelled on another node than the one it registered with.
		other := nodes[(i+1)%3]
		if code := call(t, "DELETE", other.URL()+"apps/ORDERS/"+id, ""); code != 200 {
			t.Fatalf("cancel on %s: %d", other.name, code)
		}
		for j, ch := range watches {
			waitEndpoints(t, ch, fmt.Sprintf("cancel on %s, client of %s", other.name, nodes[j].name))
		}
	}
}

// adsFirst opens an ADS stream to addr and returns its first answer to an
// EDS request for orders, or the stream's error.
func adsFirst(t *testing.T, addr string, creds credentials.TransportCredentials, md ...string) (*discovery.DiscoveryResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	_ = stream.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "first"}, TypeUrl: resource.EndpointType, ResourceNames: []string{"orders"}})
	return stream.Recv()
}

// TestXDS_nodeSecurity: the xDS port follows the node's security. With
// server.ssl.* (client-auth need) it serves TLS with the node's keystore:
// a client certificate of the trust store is enough to read, a plaintext
// client gets nowhere. With users and no TLS, a stream needs a user's
// Basic credentials.
func TestXDS_nodeSecurity(t *testing.T) {
	dir := t.TempDir()
	tlsNode := startTLSNode(t, "xtls", nil, time.Hour, append(append(keyStoreSets(t, dir), securedSets(testSecret)...),
		"cluster.enabled=false", "muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0")...)
	waitOpened(t, tlsNode)
	ks := keystoretest.Fixtures()
	store, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: ks.Path("client.p12"), Password: keystoretest.StorePassword},
		TrustFile: ks.Path("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adsFirst(t, tlsNode.xdsListen(), credentials.NewTLS(store.ClientConfig("127.0.0.1"))); err != nil {
		t.Errorf("mutual TLS with the client's certificate: %v", err)
	}
	if _, err := adsFirst(t, tlsNode.xdsListen(), insecure.NewCredentials()); err == nil {
		t.Error("plaintext client answered by a TLS node")
	}

	basic := startTestNode(t, "xauth", "z1", nil, append(securedSets(testSecret), "cluster.enabled=false",
		"muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0")...)
	waitOpened(t, basic)
	_, err = adsFirst(t, basic.xdsListen(), insecure.NewCredentials())
	if st, _ := grpcstatus.FromError(err); st.Code() != codes.Unauthenticated {
		t.Errorf("no credentials: %v", err)
	}
	creds := "Basic " + base64.StdEncoding.EncodeToString([]byte("writer:"+testWriterPW))
	if _, err := adsFirst(t, basic.xdsListen(), insecure.NewCredentials(), "authorization", creds); err != nil {
		t.Errorf("a user's Basic credentials: %v", err)
	}
}

// TestXDS_servesNothingWhileReadsAreRefused: a node that could not reach
// its peers opens refusing reads; its xDS server holds a client's request
// meanwhile (no empty answer), and the first answer, once reads open by the
// registry's clock, is the registry with what was registered meanwhile.
func TestXDS_servesNothingWhileReadsAreRefused(t *testing.T) {
	clk := registrytest.NewClock()
	n := startClockedNode(t, clk, "xcold", []string{"127.0.0.1:" + strconv.Itoa(freeGossipPort(t))},
		"cluster.bind-port=0", "eureka.server.registry-sync-retries=1", "muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0")
	waitOpened(t, n)
	if code := readCode(t, n); code != 403 {
		t.Fatalf("GET apps %d after a start without peers, want 403", code)
	}
	watch := adsWatch(t, n.xdsListen(), "orders")
	registerOrder(t, n, "o-1", 7001, "z1")
	// Nothing published, so every watch is held.
	if v := n.xds.Version(); v != "" {
		t.Fatalf("xDS published version %s while reads are refused", v)
	}
	clk.Advance(time.Hour)
	select {
	case eps := <-watch:
		if strings.Join(eps, ",") != "127.0.0.1:7001" {
			t.Fatalf("first answer once reads opened: %v", eps)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer once reads opened")
	}
}

// TestXDS_warmupFromSettings: muster.traffic.apps.<APP>.warmup-seconds
// reaches the node's xDS server: an ORDERS instance registered over the
// Eureka API after the node opened is served warming up, counted in
// /metrics and shown on the console's instance row; the Eureka API serves
// its metadata unchanged. (The ramp itself, on a moved clock and with a
// real grpc-go client, is xds/'s TestServer_warmupThroughGRPC.)
func TestXDS_warmupFromSettings(t *testing.T) {
	n := startTestNode(t, "xdsw", "z1", nil, "muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0",
		"muster.traffic.apps.orders.warmup-seconds=600")
	waitOpened(t, n)
	watch := adsWatch(t, n.xdsListen(), "orders")
	registerOrder(t, n, "o-a", 7001, "z1")
	waitEndpoints(t, watch, "register", "127.0.0.1:7001")
	testwait.For(t, 10*time.Second, "the console shows o-a warming up", func() error {
		code, page, err := httpGet("http://" + n.Addr() + "/console/apps/ORDERS")
		if err != nil || code != 200 || !strings.Contains(page, "xDS weight 10 of 100, warming up until") {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	if v := metricValue(t, n, "muster_xds_warming_endpoints"); v != 1 {
		t.Errorf("muster_xds_warming_endpoints = %v, want 1", v)
	}
	code, body, err := httpGet(n.URL() + "apps/ORDERS/o-a")
	if err != nil || code != 200 || !strings.Contains(body, "<metadata><zone>z1</zone></metadata>") {
		t.Errorf("Eureka API: %d %v %s", code, err, body)
	}
}

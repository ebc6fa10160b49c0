package xds_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/tlsconfig"
	"github.com/muster-registry/muster/xds"
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
		apply(t, reg, registry.RegisterOp(in))
	}
	return reg
}

func apply(t *testing.T, reg *registry.Registry, op registry.Op) {
	t.Helper()
	if _, err := reg.Apply(op); err != nil {
		t.Fatal(err)
	}
}

func instance(app, id, ip string) *registry.Instance {
	return registrytest.NewInstance(app, id, func(in *registry.Instance) { in.IPAddr = ip })
}

func start(t *testing.T, cfg xds.Config, o xds.Options) *xds.Server {
	t.Helper()
	cfg.Enabled, cfg.Addr = true, "127.0.0.1:0"
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 100
	}
	s, err := xds.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// ads is one ADS stream with a receive that gives up after a while.
type ads struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resps  chan *discovery.DiscoveryResponse
	errs   chan error
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func openADS(t *testing.T, conn *grpc.ClientConn, md ...string) *ads {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &ads{t: t, stream: st, resps: make(chan *discovery.DiscoveryResponse, 16), errs: make(chan error, 1)}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				a.errs <- err
				return
			}
			a.resps <- r
		}
	}()
	return a
}

func (a *ads) send(req *discovery.DiscoveryRequest) {
	a.t.Helper()
	// io.EOF: the server ended the stream (a refusal); Recv tells why.
	if err := a.stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		a.t.Fatal(err)
	}
}

func (a *ads) recv() *discovery.DiscoveryResponse {
	a.t.Helper()
	select {
	case r := <-a.resps:
		return r
	case err := <-a.errs:
		a.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		a.t.Fatal("no response")
	}
	return nil
}

func (a *ads) recvErr() error {
	a.t.Helper()
	select {
	case r := <-a.resps:
		a.t.Fatalf("a response (%s) where a refusal was expected", r.GetTypeUrl())
	case err := <-a.errs:
		return err
	case <-time.After(10 * time.Second):
		a.t.Fatal("no refusal")
	}
	return nil
}

// ack acknowledges r, keeping the subscription to names.
func (a *ads) ack(r *discovery.DiscoveryResponse, names ...string) {
	a.send(&discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
}

func edsRequest(zone string, names ...string) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{Node: &corev3.Node{Id: "test", Locality: &corev3.Locality{Zone: zone}},
		TypeUrl: resource.EndpointType, ResourceNames: names}
}

// addrs lists the endpoints of the assignments in r, sorted.
func addrs(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, res := range r.GetResources() {
		var c endpointv3.ClusterLoadAssignment
		if err := res.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		for _, l := range c.GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				out = append(out, c.GetClusterName()+"="+e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestServer_coldStart: before the node opens for traffic a request gets
// no answer at all (not an empty set); once it opens, the first answer is
// the registry as it is.
func TestServer_coldStart(t *testing.T) {
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	opened := make(chan struct{})
	s := start(t, xds.Config{}, xds.Options{Registry: reg, Opened: opened})
	a := openADS(t, dial(t, s.Addr().String()))
	a.send(edsRequest("", "orders"))
	if v := s.Version(); v != "" {
		t.Fatalf("a version (%s) before opening", v)
	}
	apply(t, reg, registry.RegisterOp(instance("ORDERS", "o2", "10.0.0.2")))
	close(opened)
	r := a.recv()
	if got := strings.Join(addrs(t, r), " "); got != "orders=10.0.0.1 orders=10.0.0.2" {
		t.Fatalf("first answer after opening: %s", got)
	}
}

// TestServer_followsTheRegistry: a registered, an OUT_OF_SERVICE and a
// cancelled instance reach an open stream; a new stream gets the current
// state at once.
func TestServer_followsTheRegistry(t *testing.T) {
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg})
	a := openADS(t, dial(t, s.Addr().String()))
	a.send(edsRequest("", "orders"))
	r := a.recv()
	if got := strings.Join(addrs(t, r), " "); got != "orders=10.0.0.1" {
		t.Fatalf("first: %s", got)
	}
	steps := []struct {
		op   registry.Op
		want string
	}{
		{registry.RegisterOp(instance("ORDERS", "o2", "10.0.0.2")), "orders=10.0.0.1 orders=10.0.0.2"},
		{registry.StatusOp("ORDERS", "o1", registry.StatusOutOfService), "orders=10.0.0.2"},
		{registry.StatusOp("ORDERS", "o1", registry.StatusUp), "orders=10.0.0.1 orders=10.0.0.2"},
		{registry.CancelOp("ORDERS", "o2"), "orders=10.0.0.1"},
	}
	for _, st := range steps {
		a.ack(r, "orders")
		apply(t, reg, st.op)
		r = a.recv()
		if got := strings.Join(addrs(t, r), " "); got != st.want {
			t.Fatalf("after %v: %s, want %s", st.op.Kind, got, st.want)
		}
	}
	b := openADS(t, dial(t, s.Addr().String()))
	b.send(edsRequest("", "orders"))
	if got := strings.Join(addrs(t, b.recv()), " "); got != "orders=10.0.0.1" {
		t.Fatalf("a new stream: %s", got)
	}
}

// TestServer_maxStreams: one stream over muster.xds.max-streams is refused
// with RESOURCE_EXHAUSTED and a message naming the key; a slot freed is
// usable again.
func TestServer_maxStreams(t *testing.T) {
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	m := prometheus.NewRegistry()
	s := start(t, xds.Config{MaxStreams: 1}, xds.Options{Registry: reg, Metrics: m})
	conn := dial(t, s.Addr().String())
	a := openADS(t, conn)
	a.send(edsRequest("", "orders"))
	a.recv()
	b := openADS(t, conn)
	err := b.recvErr()
	if st, _ := grpcstatus.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "muster.xds.max-streams (1)") {
		t.Fatalf("second stream: %v", err)
	}
	if n := metricValue(t, m, "muster_xds_streams_refused_total", "max_streams"); n != 1 {
		t.Errorf("refusals counted: %v", n)
	}
	if n := gauge(t, m, "muster_xds_streams"); n != 1 {
		t.Errorf("muster_xds_streams = %v", n)
	}
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	return metricValue(t, g, name, "")
}

// metricValue reads a counter or gauge; label, when given, is the value of
// its one label.
func metricValue(t *testing.T, g prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// TestServer_auth: with users configured a stream needs Basic credentials
// of a reader in its metadata; none, bad ones and a malformed header are
// refused (UNAUTHENTICATED) without saying which part was wrong.
func TestServer_auth(t *testing.T) {
	reader, _ := auth.NewUser("reader", "r-secret-1", auth.RoleRead, nil)
	users, err := auth.NewAuthenticator(reader)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg, Users: users})
	conn := dial(t, s.Addr().String())
	for _, md := range [][]string{nil, {"authorization", basic("reader", "wrong")}, {"authorization", basic("nobody", "r-secret-1")}, {"authorization", "Bearer r-secret-1"}} {
		a := openADS(t, conn, md...)
		a.send(edsRequest("", "orders"))
		err := a.recvErr()
		st, _ := grpcstatus.FromError(err)
		if st.Code() != codes.Unauthenticated || strings.Contains(st.Message(), "r-secret-1") {
			t.Errorf("credentials %v: %v", md, err)
		}
	}
	a := openADS(t, conn, "authorization", basic("reader", "r-secret-1"))
	a.send(edsRequest("", "orders"))
	if got := strings.Join(addrs(t, a.recv()), " "); got != "orders=10.0.0.1" {
		t.Errorf("reader: %s", got)
	}
}

// TestServer_mTLS: over TLS with client-auth want, a client certificate of
// the trust bundle is enough to read; without one the stream needs
// credentials.
func TestServer_mTLS(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey, err := tlsconfig.NewCA(tlsconfig.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey, _ := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "node", IPs: []net.IP{net.ParseIP("127.0.0.1")}, CACert: caCert, CAKey: caKey})
	cliCert, cliKey, _ := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "envoy", CACert: caCert, CAKey: caKey})
	store, err := tlsconfig.Load(tlsconfig.Config{CertFile: write("srv.pem", srvCert), KeyFile: write("srv.key", srvKey),
		TrustFile: write("ca.pem", caCert), ClientAuth: tlsconfig.ClientAuthWant})
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := auth.NewUser("reader", "r-secret-1", auth.RoleRead, nil)
	users, _ := auth.NewAuthenticator(reader)
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg, Users: users, TLS: store.ServerConfig()})

	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := store.ClientConfig("127.0.0.1")
	withCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	a := openADS(t, dial(t, s.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(withCert))))
	a.send(edsRequest("", "orders"))
	if got := strings.Join(addrs(t, a.recv()), " "); got != "orders=10.0.0.1" {
		t.Errorf("client certificate: %s", got)
	}
	noCert := store.ClientConfig("127.0.0.1")
	noCert.GetClientCertificate = nil
	b := openADS(t, dial(t, s.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(noCert))))
	b.send(edsRequest("", "orders"))
	if st, _ := grpcstatus.FromError(b.recvErr()); st.Code() != codes.Unauthenticated {
		t.Errorf("no certificate, no credentials: %v", st)
	}
}

// TestServer_envoyConversation records what an Envoy with a dynamic CDS
// cluster list asks over ADS (CDS wildcard, then EDS for every cluster)
// and checks the answers with the library's consistency check; a NACK is
// counted by type and shown on the client.
func TestServer_envoyConversation(t *testing.T) {
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"), instance("BILLING", "b1", "10.0.0.2"),
		registrytest.NewInstance("CART", "c1", registrytest.WithStatus(registry.StatusDown)))
	m := prometheus.NewRegistry()
	s := start(t, xds.Config{}, xds.Options{Registry: reg, Metrics: m})
	a := openADS(t, dial(t, s.Addr().String()))
	a.send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "envoy-1", Cluster: "edge"}, TypeUrl: resource.ClusterType})
	cds := a.recv()
	var clusters []types.Resource
	var names []string
	for _, r := range cds.GetResources() {
		var c clusterv3.Cluster
		if err := r.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, &c)
		names = append(names, c.GetEdsClusterConfig().GetServiceName())
	}
	a.ack(cds)
	a.send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: names})
	eds := a.recv()
	var clas []types.Resource
	for _, r := range eds.GetResources() {
		var c endpointv3.ClusterLoadAssignment
		if err := r.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		clas = append(clas, proto.Clone(&c).(types.Resource))
	}
	snap, err := cache.NewSnapshot("recorded", map[resource.Type][]types.Resource{resource.ClusterType: clusters, resource.EndpointType: clas})
	if err != nil {
		t.Fatal(err)
	}
	// Three apps, and their VIPs (the fixture's are the upper-case app
	// names, which differ from the lower-case app names).
	if err := snap.Consistent(); err != nil || len(clusters) != 6 {
		t.Fatalf("recorded CDS+EDS (%d clusters): %v", len(clusters), err)
	}
	// The client rejects the assignment: a NACK.
	a.send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: names, ResponseNonce: eds.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "bad endpoint"}})
	testwait.True(t, 10*time.Second, "the NACK counted", func() bool { return metricValue(t, m, "muster_xds_nacks_total", "eds") == 1 })
	cl := s.Clients()
	if len(cl) != 1 || cl[0].Node != "envoy-1" || cl[0].NACKs != 1 || cl[0].LastNACK != "bad endpoint" || strings.Join(cl[0].Types, ",") != "cds,eds" {
		t.Errorf("clients: %+v", cl)
	}
}

// TestServer_incremental: an incremental (delta) ADS stream gets the
// assignment it subscribes to, and the change after.
func TestServer_incremental(t *testing.T) {
	reg := newRegistry(t, instance("ORDERS", "o1", "10.0.0.1"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(dial(t, s.Addr().String())).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta"}, TypeUrl: resource.EndpointType,
		ResourceNamesSubscribe: []string{"orders"}}); err != nil {
		t.Fatal(err)
	}
	read := func() []string {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, res := range r.GetResources() {
			var c endpointv3.ClusterLoadAssignment
			if err := res.GetResource().UnmarshalTo(&c); err != nil {
				t.Fatal(err)
			}
			for _, l := range c.GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
				}
			}
		}
		sort.Strings(out)
		_ = st.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: r.GetNonce()})
		return out
	}
	if got := strings.Join(read(), " "); got != "10.0.0.1" {
		t.Fatalf("first: %s", got)
	}
	apply(t, reg, registry.RegisterOp(instance("ORDERS", "o2", "10.0.0.2")))
	if got := strings.Join(read(), " "); got != "10.0.0.1 10.0.0.2" {
		t.Fatalf("after a register: %s", got)
	}
}

package xds_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcxds "google.golang.org/grpc/xds" // the xds:/// resolver and balancers

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/xds"
)

// orderServer is a real gRPC server that answers health checks with its
// name in the "server" header, so a client can tell which one it reached.
type orderServer struct {
	grpc_health_v1.UnimplementedHealthServer
	name string
	port int
}

func (o *orderServer) Check(ctx context.Context, _ *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("server", o.name))
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func startOrderServer(t *testing.T, name string) *orderServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &orderServer{name: name, port: ln.Addr().(*net.TCPAddr).Port}
	g := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(g, o)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return o
}

// order is a gRPC server as an ORDERS instance of zone.
func order(id string, port int, zone string) *registry.Instance {
	return registrytest.NewInstance("ORDERS", id, func(in *registry.Instance) {
		in.IPAddr, in.HostName, in.VIPAddress = "127.0.0.1", "localhost", "orders"
		in.Port = registry.Port{Number: port, Enabled: true}
		in.Metadata = registry.NewMetadata(map[string]string{"zone": zone})
	})
}

// dialOrders dials xds:///orders through s with a bootstrap of this
// test's own (zone "" names none).
func dialOrders(t *testing.T, s *xds.Server, zone string) *grpc.ClientConn {
	t.Helper()
	locality := ""
	if zone != "" {
		locality = fmt.Sprintf(`,"locality":{"zone":%q}`, zone)
	}
	bootstrap := fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],
"node":{"id":"test-client-%s","cluster":"tests"%s}}`, s.Addr().String(), t.Name(), locality)
	rb, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///orders", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// reached makes calls calls and counts the servers that answered.
func reached(cc *grpc.ClientConn, calls int) (map[string]int, error) {
	seen := map[string]int{}
	hc := grpc_health_v1.NewHealthClient(cc)
	for range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var md metadata.MD
		_, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.Header(&md))
		cancel()
		if err != nil {
			return seen, err
		}
		if v := md.Get("server"); len(v) == 1 {
			seen[v[0]]++
		}
	}
	return seen, nil
}

// waitOnly polls until calls reach only want (a window of 20 calls), and
// reports how long that took.
func waitOnly(t *testing.T, cc *grpc.ClientConn, want ...string) time.Duration {
	t.Helper()
	start := time.Now()
	sort.Strings(want)
	testwait.For(t, 15*time.Second, "calls reach only "+strings.Join(want, ","), func() error {
		seen, err := reached(cc, 20)
		if err != nil {
			return err
		}
		var got []string
		for s := range seen {
			got = append(got, s)
		}
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("reached %v", seen)
		}
		return nil
	})
	return time.Since(start)
}

// TestServer_grpcClient: a real grpc-go client dials xds:///orders through
// the xDS server, spreads calls over two gRPC servers registered as
// ORDERS, stops calling one once it is cancelled or taken OUT_OF_SERVICE,
// and shows in the server's Report. (Moved from node/.)
func TestServer_grpcClient(t *testing.T) {
	a, b := startOrderServer(t, "a"), startOrderServer(t, "b")
	reg := newRegistry(t, order("o-a", a.port, "z1"), order("o-b", b.port, "z1"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg})

	cc := dialOrders(t, s, "")
	waitOnly(t, cc, "a", "b")
	seen, err := reached(cc, 40)
	if err != nil || seen["a"] < 10 || seen["b"] < 10 {
		t.Fatalf("40 calls spread as %v (%v); want round robin over both", seen, err)
	}

	apply(t, reg, registry.CancelOp("ORDERS", "o-a"))
	t.Logf("after the cancel, calls reached only b within %v", waitOnly(t, cc, "b"))

	apply(t, reg, registry.RegisterOp(order("o-a", a.port, "z1")))
	waitOnly(t, cc, "a", "b")
	apply(t, reg, registry.StatusOp("ORDERS", "o-a", registry.StatusOutOfService))
	t.Logf("after OUT_OF_SERVICE, calls reached only b within %v", waitOnly(t, cc, "b"))

	clients := s.Report()
	if len(clients) != 1 || clients[0].Node != "test-client-"+t.Name() || !strings.Contains(strings.Join(clients[0].Types, ","), "eds") {
		t.Errorf("xDS clients: %+v", clients)
	}
}

// TestServer_zonePreference: a client whose bootstrap names zone z2 calls
// only the z2 server while it is there, and the z1 server once it is
// gone. (Moved from node/.)
func TestServer_zonePreference(t *testing.T) {
	a, b := startOrderServer(t, "a"), startOrderServer(t, "b")
	reg := newRegistry(t, order("o-a", a.port, "z1"), order("o-b", b.port, "z2"))
	s := start(t, xds.Config{}, xds.Options{Registry: reg})

	cc := dialOrders(t, s, "z2")
	waitOnly(t, cc, "b")
	if seen, err := reached(cc, 30); err != nil || seen["b"] != 30 {
		t.Fatalf("zone z2 client: %v (%v), want every call on b", seen, err)
	}
	apply(t, reg, registry.CancelOp("ORDERS", "o-b"))
	waitOnly(t, cc, "a")

	plain := dialOrders(t, s, "")
	apply(t, reg, registry.RegisterOp(order("o-b", b.port, "z2")))
	waitOnly(t, plain, "a", "b") // no zone named: both localities
	waitOnly(t, cc, "b")
}

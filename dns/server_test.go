package dns_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func startServer(t *testing.T, cfg dns.Config, nodes dns.Nodes, ins ...*registry.Instance) (*dns.Server, *registry.Registry) {
	t.Helper()
	rcfg := registry.DefaultConfig()
	clk := registrytest.NewClock()
	rcfg.Now = clk.Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Addr = "127.0.0.1:0"
	s, err := dns.New(cfg, dns.Options{Registry: reg, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s, reg
}

func ask(t *testing.T, s *dns.Server, net, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	c := &mdns.Client{Net: net, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, s.Addr().String())
	if err != nil {
		t.Fatalf("%s %s: %v", name, mdns.TypeToString[qtype], err)
	}
	return r
}

func withIP(ip string) registrytest.Option { return func(in *registry.Instance) { in.IPAddr = ip } }

func TestRecords(t *testing.T) {
	nodes := func() []dns.Node {
		return []dns.Node{{Name: "n1", Host: "n1.example", IP: "127.0.0.2", Zone: "z1"}, {Name: "n2", Host: "n2.example", IP: "127.0.0.3", Zone: "z2"}}
	}
	s, reg := startServer(t, dns.DefaultConfig(), nodes,
		registrytest.NewInstance("ORDERS", "o1", withIP("10.0.0.1"), registrytest.WithMetadata(map[string]string{"zone": "z1", "weight": "7"})),
		registrytest.NewInstance("ORDERS", "o2", withIP("10.0.0.2")),
		registrytest.NewInstance("ORDERS", "o3", withIP("10.0.0.3"), registrytest.WithStatus(registry.StatusOutOfService)),
		registrytest.NewInstance("ORDERS", "o4", withIP("fd00::4")),
		registrytest.NewInstance("IDLE", "i1", registrytest.WithStatus(registry.StatusDown)),
	)
	addrs := func(r *mdns.Msg) []string {
		var out []string
		for _, rr := range r.Answer {
			switch rr := rr.(type) {
			case *mdns.A:
				out = append(out, rr.A.String())
			case *mdns.AAAA:
				out = append(out, rr.AAAA.String())
			}
		}
		slices.Sort(out)
		return out
	}
	if got := addrs(ask(t, s, "udp", "OrDeRs.App.Muster.", mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("A: %v", got)
	}
	if got := addrs(ask(t, s, "udp", "orders.app.muster.", mdns.TypeAAAA)); !slices.Equal(got, []string{"fd00::4"}) {
		t.Errorf("AAAA: %v", got)
	}
	if got := addrs(ask(t, s, "udp", "z1.orders.app.muster.", mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("zone A: %v", got)
	}
	if got := addrs(ask(t, s, "tcp", "orders.vip.muster.", mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("vip A: %v", got)
	}
	srv := ask(t, s, "udp", "_orders._tcp.app.muster.", mdns.TypeSRV)
	var srvs []string
	for _, rr := range srv.Answer {
		x := rr.(*mdns.SRV)
		srvs = append(srvs, fmt.Sprintf("%d %d %s", x.Weight, x.Port, x.Target))
	}
	slices.Sort(srvs)
	want := []string{"1 8080 0a000002.addr.muster.", "1 8080 fd000000000000000000000000000004.addr.muster.", "7 8080 0a000001.addr.muster."}
	if !slices.Equal(srvs, want) || len(srv.Extra) != 3 {
		t.Errorf("SRV: %v extra %v", srvs, srv.Extra)
	}
	if got := addrs(ask(t, s, "udp", "0a000001.addr.muster.", mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("target A: %v", got)
	}
	if r := ask(t, s, "udp", "_orders._tls.app.muster.", mdns.TypeSRV); len(r.Answer) != 0 || r.Rcode != mdns.RcodeSuccess {
		t.Errorf("tls SRV with secure ports disabled: %v", r)
	}
	if r := ask(t, s, "udp", "idle.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
		t.Errorf("known app, none UP: %v", r)
	}
	if r := ask(t, s, "udp", "nope.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != mdns.TypeSOA {
		t.Errorf("unknown: %v", r)
	}
	if r := ask(t, s, "udp", "example.com.", mdns.TypeA); r.Rcode != mdns.RcodeRefused {
		t.Errorf("outside domain: %v", r)
	}
	txt := func(name string) string {
		r := ask(t, s, "udp", name, mdns.TypeTXT)
		if len(r.Answer) != 1 {
			return fmt.Sprint(r.Rcode)
		}
		return strings.Join(r.Answer[0].(*mdns.TXT).Txt, "|")
	}
	if got := txt("txt.us-east-1.muster."); got != "z1.muster z2.muster" {
		t.Errorf("region TXT: %q", got)
	}
	if got := txt("txt.z2.muster."); got != "n2.example" {
		t.Errorf("zone TXT: %q", got)
	}
	if got := addrs(ask(t, s, "udp", "n1.node.muster.", mdns.TypeA)); !slices.Equal(got, []string{"127.0.0.2"}) {
		t.Errorf("node A: %v", got)
	}
	// No cache: a cancel is visible to the next query.
	if _, err := reg.Apply(registry.CancelOp("ORDERS", "o2")); err != nil {
		t.Fatal(err)
	}
	if got := addrs(ask(t, s, "udp", "orders.app.muster.", mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("after cancel: %v", got)
	}
}

func TestGoResolver(t *testing.T) {
	s, _ := startServer(t, dns.DefaultConfig(), nil,
		registrytest.NewInstance("ORDERS", "o1", withIP("10.0.0.1")))
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := res.LookupHost(ctx, "orders.app.muster.")
	if err != nil || !slices.Equal(ips, []string{"10.0.0.1"}) {
		t.Fatalf("LookupHost: %v %v", ips, err)
	}
	_, srvs, err := res.LookupSRV(ctx, "orders", "tcp", "app.muster.")
	if err != nil || len(srvs) != 1 || srvs[0].Port != 8080 {
		t.Fatalf("LookupSRV: %v %v", srvs, err)
	}
	if _, err := res.LookupHost(ctx, "nope.app.muster."); err == nil {
		t.Fatal("unknown name resolved")
	}
}

func TestTruncation(t *testing.T) {
	var ins []*registry.Instance
	for i := range 60 {
		ins = append(ins, registrytest.NewInstance("BIG", fmt.Sprint("b", i), withIP(fmt.Sprintf("10.1.0.%d", i+1))))
	}
	cfg := dns.DefaultConfig()
	cfg.MaxAnswers = 50
	s, _ := startServer(t, cfg, nil, ins...)
	udp := ask(t, s, "udp", "big.app.muster.", mdns.TypeA)
	if !udp.Truncated || len(udp.Answer) >= 50 {
		t.Errorf("UDP 512: TC=%v answers=%d", udp.Truncated, len(udp.Answer))
	}
	tcp := ask(t, s, "tcp", "big.app.muster.", mdns.TypeA)
	if tcp.Truncated || len(tcp.Answer) != 50 {
		t.Errorf("TCP: TC=%v answers=%d (max-answers 50)", tcp.Truncated, len(tcp.Answer))
	}
}

func TestAllowedCIDRs(t *testing.T) {
	cfg := dns.DefaultConfig()
	cfg.AllowedCIDRs = []string{"10.9.0.0/16"}
	s, _ := startServer(t, cfg, nil, registrytest.NewInstance("ORDERS", "o1"))
	if r := ask(t, s, "udp", "orders.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeRefused || len(r.Answer) != 0 {
		t.Errorf("loopback outside allowed-cidrs: %v", r)
	}
}

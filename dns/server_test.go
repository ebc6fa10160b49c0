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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func startServer(t *testing.T, cfg dns.Config, nodes dns.Nodes, ins ...*registry.Instance) (*dns.Server, *registry.Registry) {
	t.Helper()
	return startServerOpts(t, cfg, dns.Options{Nodes: nodes}, ins...)
}

// startServerOpts is startServer with the collaborators given (the
// registry is made here).
func startServerOpts(t testing.TB, cfg dns.Config, o dns.Options, ins ...*registry.Instance) (*dns.Server, *registry.Registry) {
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
	o.Registry = reg
	s, err := dns.New(cfg, o)
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
	if got := txt("txt.us-east-1.muster."); got != "z1.muster|z2.muster" {
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

// counter reads one counter of the server's metrics.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// TestServer_rateLimit_realClients: over UDP one source gets its burst and
// then silence (the client times out: nothing to amplify), counted in
// muster_dns_rate_limited_total; TCP from the same source is not limited;
// another source is not affected. The limiter's clock is frozen, so no
// token comes back during the test.
func TestServer_rateLimit_realClients(t *testing.T) {
	cfg := dns.DefaultConfig()
	cfg.RateLimit, cfg.RateBurst = 1, 5
	frozen := time.Unix(1_700_000_000, 0)
	metrics := prometheus.NewRegistry()
	s, _ := startServerOpts(t, cfg, dns.Options{Metrics: metrics, Now: func() time.Time { return frozen }},
		registrytest.NewInstance("ORDERS", "o1", withIP("10.0.0.1")))
	query := func(network, laddr string) error {
		m := new(mdns.Msg)
		m.SetQuestion("orders.app.muster.", mdns.TypeA)
		c := &mdns.Client{Net: network, Timeout: 300 * time.Millisecond}
		if laddr != "" {
			c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(laddr)}, Timeout: time.Second}
		}
		r, _, err := c.Exchange(m, s.Addr().String())
		if err == nil && (r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1) {
			return fmt.Errorf("answer %v", r)
		}
		return err
	}
	answered := 0
	for range 8 {
		if err := query("udp", ""); err == nil {
			answered++
		}
	}
	if answered != 5 {
		t.Errorf("UDP from one source: %d of 8 answered, want the burst of 5", answered)
	}
	if got := counter(t, metrics, "muster_dns_rate_limited_total"); got != 3 {
		t.Errorf("muster_dns_rate_limited_total = %v, want 3", got)
	}
	for i := range 10 {
		if err := query("tcp", ""); err != nil {
			t.Fatalf("TCP query %d from the limited source: %v", i, err)
		}
	}
	if err := query("udp", "127.0.0.2"); err != nil {
		t.Errorf("UDP from another source, limited by the first: %v", err)
	}
}

// TestServer_EDNS0Size: without EDNS0 an answer is cut to 512 bytes on
// the wire (TC); with an offered EDNS0 size it may grow to that size,
// capped at UDPMaxSize; past it TC again, and TCP carries the whole answer.
func TestServer_EDNS0Size(t *testing.T) {
	var ins []*registry.Instance
	for i := range 120 {
		ins = append(ins, registrytest.NewInstance("BIG", fmt.Sprint("b", i), withIP(fmt.Sprintf("10.2.0.%d", i+1))))
	}
	cfg := dns.DefaultConfig()
	cfg.MaxAnswers = 120
	s, _ := startServer(t, cfg, nil, ins...)
	cfg.MaxAnswers = 60 // 60 A records of 16 bytes (compressed): over 512, under 1232
	s60, _ := startServer(t, cfg, nil, ins...)
	// udp sends one query and returns the answer and its datagram's size.
	udp := func(s *dns.Server, edns uint16) (*mdns.Msg, int) {
		t.Helper()
		c, err := net.Dial("udp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := new(mdns.Msg)
		m.SetQuestion("big.app.muster.", mdns.TypeA)
		if edns > 0 {
			m.SetEdns0(edns, false)
		}
		b, _ := m.Pack()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		wire := mustRead(t, c)
		r := new(mdns.Msg)
		if err := r.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		return r, len(wire)
	}
	if r, n := udp(s60, 1232); r.Truncated || len(r.Answer) != 60 || n <= 512 {
		t.Errorf("EDNS0 1232, 60 records: TC=%v answers=%d size=%d, want all in one datagram", r.Truncated, len(r.Answer), n)
	}
	if r, n := udp(s60, 0); !r.Truncated || n > 512 {
		t.Errorf("no EDNS0: TC=%v size=%d, want TC within 512", r.Truncated, n)
	}
	if r, n := udp(s, 4096); !r.Truncated || n > 1232 || n <= 1100 {
		t.Errorf("EDNS0 4096 capped at muster.dns.udp-max-size 1232: TC=%v size=%d", r.Truncated, n)
	}
	if r := ask(t, s, "tcp", "big.app.muster.", mdns.TypeA); r.Truncated || len(r.Answer) != 120 {
		t.Errorf("TCP: TC=%v answers=%d, want all 120", r.Truncated, len(r.Answer))
	}
}

// TestServer_TXTManyNodes: the zone TXT of many nodes with long host names
// is past 255 bytes (one character-string's limit) and past 512: it is
// one record of one string per host, truncated over UDP and whole over TCP.
func TestServer_TXTManyNodes(t *testing.T) {
	var nodes []dns.Node
	for i := range 30 {
		nodes = append(nodes, dns.Node{Name: fmt.Sprint("m", i), Zone: "z1",
			Host: fmt.Sprintf("muster-%d.muster-headless.registry.svc.cluster.local", i), IP: "127.0.0.1"})
	}
	s, _ := startServer(t, dns.DefaultConfig(), func() []dns.Node { return nodes })
	if r := ask(t, s, "udp", "txt.z1.muster.", mdns.TypeTXT); !r.Truncated {
		t.Errorf("UDP: TC=%v size=%d, want truncated", r.Truncated, r.Len())
	}
	r := ask(t, s, "tcp", "txt.z1.muster.", mdns.TypeTXT)
	if len(r.Answer) != 1 {
		t.Fatalf("TCP: %d records, want one: %v", len(r.Answer), r)
	}
	if got := r.Answer[0].(*mdns.TXT).Txt; len(got) != 30 || got[29] != nodes[29].Host {
		t.Errorf("TCP TXT strings: %d, last %q", len(got), got[len(got)-1])
	}
}

// TestServer_garbageDatagrams: bytes that are not DNS, a truncated header
// and a query with two questions leave the server answering.
func TestServer_garbageDatagrams(t *testing.T) {
	s, _ := startServer(t, dns.DefaultConfig(), nil, registrytest.NewInstance("ORDERS", "o1", withIP("10.0.0.1")))
	c, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	two := new(mdns.Msg)
	two.SetQuestion("orders.app.muster.", mdns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	packed, _ := two.Pack()
	for _, b := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {0x12}, make([]byte, 12), packed} {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if r := ask(t, s, "udp", "orders.app.muster.", mdns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("after garbage: %v", r)
	}
	m := new(mdns.Msg)
	if err := m.Unpack(mustRead(t, c)); err != nil {
		t.Fatal(err)
	}
	// The first answer (to the bytes of an HTTP request) is a bare
	// error, no records.
	if m.Rcode == mdns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("first answer to garbage: %v", m)
	}
}

func mustRead(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 65535)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// sample reads one labelled counter (or, for a histogram, its count).
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestServer_metrics: real queries show up by type and response code,
// with truncations, refusals and latencies.
func TestServer_metrics(t *testing.T) {
	var ins []*registry.Instance
	for i := range 60 {
		ins = append(ins, registrytest.NewInstance("ORDERS", fmt.Sprint("o", i), withIP(fmt.Sprintf("10.3.0.%d", i+1))))
	}
	metrics := prometheus.NewRegistry()
	s, _ := startServerOpts(t, dns.DefaultConfig(), dns.Options{Metrics: metrics}, ins...)
	ask(t, s, "udp", "orders.app.muster.", mdns.TypeA) // 60 A records: TC at 512
	ask(t, s, "tcp", "orders.app.muster.", mdns.TypeA)
	ask(t, s, "udp", "_orders._tcp.app.muster.", mdns.TypeSRV)
	ask(t, s, "udp", "nope.app.muster.", mdns.TypeA)
	ask(t, s, "udp", "example.com.", mdns.TypeA)
	ask(t, s, "udp", "orders.app.muster.", mdns.TypeMX)
	// A query is counted after its answer is written: the last one may
	// still be on its way to the counters when its answer arrives.
	testwait.True(t, 5*time.Second, "every query counted", func() bool {
		return sample(t, metrics, "muster_dns_query_duration_seconds", nil) == 6
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"muster_dns_queries_total", map[string]string{"qtype": "A", "rcode": "NOERROR"}, 2},
		{"muster_dns_queries_total", map[string]string{"qtype": "SRV", "rcode": "NOERROR"}, 1},
		{"muster_dns_queries_total", map[string]string{"qtype": "A", "rcode": "NXDOMAIN"}, 1},
		{"muster_dns_queries_total", map[string]string{"qtype": "A", "rcode": "REFUSED"}, 1},
		{"muster_dns_queries_total", map[string]string{"qtype": "other", "rcode": "NOERROR"}, 1},
		{"muster_dns_truncated_total", nil, 2}, // the UDP A and SRV answers
		{"muster_dns_refused_total", map[string]string{"reason": "outside-domain"}, 1},
		{"muster_dns_query_duration_seconds", nil, 6},
	} {
		if got := sample(t, metrics, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestRecords_secureAndZoneForms: _<app>._tls answers the enabled
// securePort only; the zone-scoped SRV form and <svip>.svip / its _tls SRV
// pick their instances.
func TestRecords_secureAndZoneForms(t *testing.T) {
	secure := func(port int) registrytest.Option {
		return func(in *registry.Instance) { in.SecurePort = registry.Port{Number: port, Enabled: true} }
	}
	zone := func(z string) registrytest.Option {
		return registrytest.WithMetadata(map[string]string{"zone": z})
	}
	s, _ := startServer(t, dns.DefaultConfig(), nil,
		registrytest.NewInstance("PAY", "p1", withIP("10.4.0.1"), secure(8443), zone("z1"), registrytest.WithVIP("pay-api")),
		registrytest.NewInstance("PAY", "p2", withIP("10.4.0.2"), zone("z2"), registrytest.WithVIP("pay-api")),
		registrytest.NewInstance("PAY", "p3", withIP("10.4.0.3"), secure(9443), zone("z2"), registrytest.WithVIP("other")),
	)
	srv := func(name string) []string {
		t.Helper()
		var out []string
		for _, rr := range ask(t, s, "udp", name, mdns.TypeSRV).Answer {
			x := rr.(*mdns.SRV)
			out = append(out, fmt.Sprintf("%d %s", x.Port, x.Target))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"_pay._tls.app.muster.", []string{"8443 0a040001.addr.muster.", "9443 0a040003.addr.muster."}},
		{"_pay._tcp.z2.app.muster.", []string{"8080 0a040002.addr.muster.", "8080 0a040003.addr.muster."}},
		{"_pay._tls.z2.app.muster.", []string{"9443 0a040003.addr.muster."}},
		{"_pay-api._tcp.vip.muster.", []string{"8080 0a040001.addr.muster.", "8080 0a040002.addr.muster."}},
		{"_pay-api._tls.svip.muster.", []string{"8443 0a040001.addr.muster."}},
	} {
		if got := srv(c.name); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if r := ask(t, s, "udp", "pay-api.svip.muster.", mdns.TypeA); len(r.Answer) != 2 {
		t.Errorf("svip A: %v", r.Answer)
	}
}

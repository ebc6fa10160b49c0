package main

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/registry"
)

// TestDNSLoad_countsAnswersAgainstTheCeiling: the dns scenario's load
// generator against the ceiling's DNS server: answers counted, none lost,
// latencies recorded.
func TestDNSLoad_countsAnswersAgainstTheCeiling(t *testing.T) {
	addr, err := benchFreeUDPAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := dnsCeilingServe(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	res, err := dnsLoad(context.Background(), addr, 300*time.Millisecond, func(rng *rand.Rand) (string, uint16) {
		if rng.IntN(2) == 0 {
			return "_service-0001._tcp.app.muster.", mdns.TypeSRV
		}
		return "service-0001.app.muster.", mdns.TypeA
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Status[200]+res.Status[206] != res.Requests || res.Errors != 0 || res.Latency.Count() != res.Requests {
		t.Fatalf("requests %d, statuses %v, errors %d (%v), latencies %d", res.Requests, res.Status, res.Errors, res.FirstErr, res.Latency.Count())
	}
}

// TestDNSCeiling_servesTheNodesAnswers: for the same fleet, the ceiling and
// the node's DNS interface answer the A and SRV names of an app with the
// same bytes: same length, header, question and records (the records'
// order, and which SRV pairs fit, are random on both sides).
func TestDNSCeiling_servesTheNodesAnswers(t *testing.T) {
	rcfg := registry.DefaultConfig()
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * benchPerApp {
		if _, err := reg.Apply(registry.RegisterOp(benchInstance(i))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := dns.DefaultConfig()
	cfg.Addr, cfg.RateLimit, cfg.MaxAnswers = "127.0.0.1:0", 0, 1000 // as the scenario runs the node
	node, err := dns.New(cfg, dns.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	addr, err := benchFreeUDPAddr()
	if err != nil {
		t.Fatal(err)
	}
	ceiling, err := dnsCeilingServe(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ceiling.Shutdown()

	for _, q := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{
		{"service-0002.app.muster.", mdns.TypeA, 1232},
		{"service-0002.app.muster.", mdns.TypeA, 0},
		{"_service-0002._tcp.app.muster.", mdns.TypeSRV, 1232},
		{"_service-0000._tcp.app.muster.", mdns.TypeSRV, 0},
	} {
		m := new(mdns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if q.edns > 0 {
			m.SetEdns0(q.edns, false)
		}
		raw := map[string][]byte{}
		msgs := map[string]*mdns.Msg{}
		for side, a := range map[string]string{"node": node.Addr().String(), "ceiling": addr} {
			b := exchangeRaw(t, a, m)
			r := new(mdns.Msg)
			if err := r.Unpack(b); err != nil {
				t.Fatalf("%s %s: %v", side, q.name, err)
			}
			raw[side], msgs[side] = b, r
		}
		n, c := msgs["node"], msgs["ceiling"]
		what := q.name + " " + mdns.TypeToString[q.qtype]
		if len(raw["node"]) != len(raw["ceiling"]) || !slices.Equal(raw["node"][:12], raw["ceiling"][:12]) {
			t.Errorf("%s: node %d bytes header % x, ceiling %d bytes header % x", what, len(raw["node"]), raw["node"][:12], len(raw["ceiling"]), raw["ceiling"][:12])
		}
		if len(n.Answer) == 0 || (q.qtype == mdns.TypeSRV || q.edns == 0) != n.Truncated {
			t.Errorf("%s: %d answers, TC=%v", what, len(n.Answer), n.Truncated)
		}
		if !n.Truncated && !slices.Equal(rrStrings(n.Answer), rrStrings(c.Answer)) {
			t.Errorf("%s: answers differ:\n%v\n%v", what, rrStrings(n.Answer), rrStrings(c.Answer))
		}
		// Every SRV record comes with its target's address.
		for _, r := range []*mdns.Msg{n, c} {
			for i, rr := range r.Answer {
				if srv, ok := rr.(*mdns.SRV); ok && (r.Extra[i].Header().Name != srv.Target || r.Extra[i].Header().Rrtype != mdns.TypeA) {
					t.Errorf("%s: SRV %v with additional %v", what, srv, r.Extra[i])
				}
			}
		}
	}
}

func exchangeRaw(t *testing.T, addr string, m *mdns.Msg) []byte {
	t.Helper()
	q, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 65535)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func rrStrings(rrs []mdns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

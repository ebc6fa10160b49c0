package dns_test

import (
	"fmt"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// BenchmarkServer_query: one UDP client asking for the A or SRV records of
// a 50-instance app in a 10k-instance registry, through the real server
// (the whole path: read, answer, truncate, write). tools/bench's dns
// scenario measures the node's process against a bare server.
func BenchmarkServer_query(b *testing.B) {
	var ins []*registry.Instance
	for i := range 10_000 {
		ins = append(ins, registrytest.NewInstance(fmt.Sprintf("APP-%03d", i/50), fmt.Sprint("i", i),
			withIP(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))))
	}
	cfg := dns.DefaultConfig()
	cfg.RateLimit = 0
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"app-007.app.muster.", mdns.TypeA}, {"_app-007._tcp.app.muster.", mdns.TypeSRV}} {
		b.Run(mdns.TypeToString[q.qtype], func(b *testing.B) {
			s, _ := startServerOpts(b, cfg, dns.Options{}, ins...)
			c, err := mdns.Dial("udp", s.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			c.UDPSize = 1232
			m := new(mdns.Msg)
			m.SetEdns0(1232, false)
			for b.Loop() {
				m.SetQuestion(q.name, q.qtype)
				_ = c.SetDeadline(time.Now().Add(time.Second))
				if err := c.WriteMsg(m); err != nil {
					b.Fatal(err)
				}
				r, err := c.ReadMsg()
				if err != nil || len(r.Answer) == 0 {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}

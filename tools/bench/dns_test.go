package main

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// TestDNSLoad_countsAnswersAgainstTheCeiling: the dns scenario's load
// generator against the ceiling's DNS server: answers counted, none lost,
// latencies recorded; the ceiling's SRV answer carries its target's address.
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
	if res.Requests == 0 || res.Status[200] != res.Requests || res.Errors != 0 || res.Latency.Count() != res.Requests {
		t.Fatalf("requests %d, statuses %v, errors %d (%v), latencies %d", res.Requests, res.Status, res.Errors, res.FirstErr, res.Latency.Count())
	}
	m := new(mdns.Msg)
	m.SetQuestion("_x._tcp.app.muster.", mdns.TypeSRV)
	r, err := mdns.Exchange(m, addr)
	if err != nil || len(r.Answer) != 1 || len(r.Extra) != 1 {
		t.Fatalf("ceiling SRV: %v %v", r, err)
	}
}

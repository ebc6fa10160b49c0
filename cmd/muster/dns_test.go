package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDNSWithDig: a node with defaults plus muster.dns.enabled answers dig
// for an app registered over the Eureka API (A, SRV) and for Eureka's TXT
// server discovery.
func TestDNSWithDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed (Debian bind9-dnsutils; scripts/test.sh installs it)")
	}
	n := startTestNode(t, "dns1", "z1", nil, "muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:24053")
	waitOpened(t, n)
	if code := call(t, "POST", n.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
		t.Fatalf("register: %d", code)
	}
	q := func(args ...string) string {
		out, err := exec.Command(dig, append([]string{"@127.0.0.1", "-p", "24053", "+short", "+tries=1", "+time=2"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dig %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := q("orders.app.muster.", "A"); got != "10.0.0.1" {
		t.Errorf("A: %q", got)
	}
	if got := q("_orders._tcp.app.muster.", "SRV"); got != "0 1 8080 0a000001.addr.muster." {
		t.Errorf("SRV: %q", got)
	}
	if got := q("txt.us-east-1.muster.", "TXT"); got != `"z1.muster"` {
		t.Errorf("region TXT: %q", got)
	}
	if got := q("txt.z1.muster.", "TXT"); got != `"127.0.0.1"` {
		t.Errorf("zone TXT: %q", got)
	}
	if got := q("dns1.node.muster.", "A"); got != "127.0.0.1" {
		t.Errorf("node A: %q", got)
	}
}

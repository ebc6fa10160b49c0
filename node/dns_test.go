package node

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/dns"
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

// TestDNS_allowedCIDRsFollowAuth: an open node lets everyone ask; once
// users are configured only loopback may (DNS carries no credentials),
// unless muster.dns.allowed-cidrs says otherwise, which a real query from
// loopback then meets as REFUSED.
func TestDNS_allowedCIDRsFollowAuth(t *testing.T) {
	open := startTestNode(t, "dnsopen", "z1", nil, "muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")
	if got := open.dnsConfig().AllowedCIDRs; len(got) != 0 {
		t.Errorf("open node: allowed-cidrs %v, want everyone", got)
	}
	secured := startTestNode(t, "dnsauth", "z1", nil, append(securedSets(testSecret), "muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")...)
	if got := secured.dnsConfig().AllowedCIDRs; !slices.Equal(got, dns.LoopbackOnly) {
		t.Errorf("node with users: allowed-cidrs %v, want %v", got, dns.LoopbackOnly)
	}
	narrowed := startTestNode(t, "dnsnarrow", "z1", nil, append(securedSets(testSecret), "muster.dns.enabled=true",
		"muster.dns.addr=127.0.0.1:0", "muster.dns.allowed-cidrs=10.0.0.0/8")...)
	waitOpened(t, secured, narrowed)
	query := func(n *Node) int {
		t.Helper()
		m := new(mdns.Msg)
		m.SetQuestion(n.name+".node.muster.", mdns.TypeA)
		r, _, err := (&mdns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dnsListen())
		if err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		return r.Rcode
	}
	if rc := query(secured); rc != mdns.RcodeSuccess {
		t.Errorf("loopback asking a node with users: %s, want NOERROR", mdns.RcodeToString[rc])
	}
	if rc := query(narrowed); rc != mdns.RcodeRefused {
		t.Errorf("loopback outside muster.dns.allowed-cidrs: %s, want REFUSED", mdns.RcodeToString[rc])
	}
}

package cluster_test

import (
	"net"
	"strings"
	"testing"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
)

func ipNet(cidr string) net.Addr {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

func addrs(cidrs ...string) []net.Addr {
	out := make([]net.Addr, len(cidrs))
	for i, c := range cidrs {
		out[i] = ipNet(c)
	}
	return out
}

// The address gossip advertises on hosts memberlist cannot pick one for
// (documentation addresses: nothing here is ever dialled).
func TestChooseAdvertise(t *testing.T) {
	for _, tc := range []struct {
		name          string
		bind, adv     string
		addrs         []net.Addr
		needed        bool
		want          string
		kind          cluster.AddrKind
		reachableHost bool
	}{
		{"a private IPv4: memberlist's own choice", "0.0.0.0", "", addrs("127.0.0.1/8", "203.0.113.7/24", "10.1.2.3/16"), false, "", 0, false},
		{"carrier-grade NAT space counts as private", "0.0.0.0", "", addrs("100.64.3.4/10"), false, "", 0, false},
		{"public IPv4 only", "0.0.0.0", "", addrs("127.0.0.1/8", "fe80::1/64", "203.0.113.7/24", "2001:db8::5/64"), true, "203.0.113.7", cluster.AddrPublicIPv4, true},
		{"IPv6 only", "0.0.0.0", "", addrs("127.0.0.1/8", "::1/128", "fe80::1/64", "2001:db8::5/64"), true, "2001:db8::5", cluster.AddrIPv6, true},
		{"IPv6 unique local", "::", "", addrs("::1/128", "fd00::9/64"), true, "fd00::9", cluster.AddrIPv6, true},
		{"loopback only", "0.0.0.0", "", addrs("127.0.0.1/8", "::1/128", "fe80::1/64"), true, "127.0.0.1", cluster.AddrLoopback, false},
		{"nothing at all", "0.0.0.0", "", nil, true, "", cluster.AddrUnusable, false},
		{"advertise address given", "0.0.0.0", "192.0.2.1", addrs("127.0.0.1/8"), false, "", 0, false},
		{"bound to one address: memberlist advertises it", "127.0.0.1", "", addrs("127.0.0.1/8"), false, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := cluster.ChooseAdvertise(tc.bind, tc.adv, tc.addrs)
			if ch.Needed != tc.needed || ch.Addr != tc.want || (tc.needed && ch.Kind != tc.kind) {
				t.Fatalf("got %+v, want needed %v, %q (%s)", ch, tc.needed, tc.want, tc.kind)
			}
			if tc.needed && ch.Kind.Reachable() != tc.reachableHost {
				t.Errorf("%s reachable from other hosts: %v", ch.Kind, ch.Kind.Reachable())
			}
		})
	}
}

// A node bound to every interface on a host whose only addresses are
// loopback and link-local (no private IPv4: memberlist alone refuses to
// start) starts, advertises loopback with one warning, and a second node
// joins it there.
func TestCluster_Start_noPrivateIPv4(t *testing.T) {
	var logs testlog.Buffer
	a := mustStart(t, testConfig(t, "a", withLogs(t, &logs), func(c *cluster.Config) {
		c.BindAddr = "0.0.0.0"
		c.InterfaceAddrs = func() ([]net.Addr, error) { return addrs("127.0.0.1/8", "::1/128", "fe80::1/64"), nil }
	}))
	seed := selfAddr(t, a)
	if !strings.HasPrefix(seed, "127.0.0.1:") {
		t.Fatalf("advertised %s, want 127.0.0.1", seed)
	}
	if n := strings.Count(logs.String(), "gossip: the host has no address other hosts can reach"); n != 1 || !hasLine(logs.String(), "advertising loopback", "warn") {
		t.Errorf("want one warning about the advertise address, got %d:\n%s", n, logs.String())
	}
	b := mustStart(t, testConfig(t, "b", withJoin(seed)))
	testwait.For(t, converge, "a and b alive", func() error { return allAlive(a, b) })
}

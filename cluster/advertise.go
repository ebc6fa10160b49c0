package cluster

import (
	"net"
	"strings"
)

// memberlist, bound to every interface (0.0.0.0) with no advertise
// address, advertises the host's private IPv4 address and refuses to
// start without one ("no private IP address found, and explicit IP not
// provided"): a host with only public addresses, only IPv6, or only
// loopback (a sandbox, some clouds' IPv6-only nodes) could not start a
// node where a Spring server starts. The node advertises the best other
// address instead, with one warning (Start), and Choice says which.

// AdvertiseChoice is what gossip advertises when memberlist cannot pick.
type AdvertiseChoice struct {
	// Needed: memberlist would pick (and fail) by itself: no advertise
	// address, bound to every interface, no private IPv4 address.
	Needed bool
	// Addr is the address to advertise instead, "" when the host has none
	// at all; Kind says what it is.
	Addr string
	Kind AddrKind
}

// AddrKind is the sort of an interface address, best first.
type AddrKind int

const (
	AddrPrivateIPv4 AddrKind = iota // RFC 1918, RFC 6598: memberlist's own choice
	AddrPublicIPv4
	AddrIPv6 // global unicast or unique local
	AddrLoopback
	AddrUnusable // link-local, multicast, unspecified
)

func (k AddrKind) String() string {
	switch k {
	case AddrPrivateIPv4:
		return "private IPv4"
	case AddrPublicIPv4:
		return "public IPv4"
	case AddrIPv6:
		return "IPv6"
	case AddrLoopback:
		return "loopback"
	}
	return "unusable"
}

// Reachable tells whether other hosts can reach the address.
func (k AddrKind) Reachable() bool { return k < AddrLoopback }

var sharedAddressSpace = &net.IPNet{IP: net.IPv4(100, 64, 0, 0), Mask: net.CIDRMask(10, 32)} // RFC 6598

func kindOf(ip net.IP) AddrKind {
	switch {
	case ip == nil || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return AddrUnusable
	case ip.IsLoopback():
		return AddrLoopback
	case ip.To4() != nil && (ip.IsPrivate() || sharedAddressSpace.Contains(ip)):
		return AddrPrivateIPv4
	case ip.To4() != nil:
		return AddrPublicIPv4
	case ip.IsGlobalUnicast(): // IPv6, unique local (fc00::/7) included
		return AddrIPv6
	}
	return AddrUnusable
}

// ChooseAdvertise decides, from the host's interface addresses, whether
// gossip needs an address memberlist would not pick, and which: a public
// IPv4 address, else an IPv6 one, else loopback (this host only), each
// the first of its kind in the list.
func ChooseAdvertise(bindAddr, advertiseAddr string, addrs []net.Addr) AdvertiseChoice {
	if advertiseAddr != "" {
		return AdvertiseChoice{}
	}
	if ip := net.ParseIP(bindAddr); ip != nil && !ip.IsUnspecified() {
		return AdvertiseChoice{} // memberlist advertises the bound address
	}
	best, kind := bestAddr(addrs)
	if kind == AddrPrivateIPv4 {
		return AdvertiseChoice{} // memberlist finds one
	}
	return AdvertiseChoice{Needed: true, Addr: best, Kind: kind}
}

// bestAddr is the first address of the best kind in addrs.
func bestAddr(addrs []net.Addr) (string, AddrKind) {
	best, bestKind := "", AddrUnusable
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if k := kindOf(ip); k < bestKind {
			best, bestKind = ip.String(), k
		}
	}
	return best, bestKind
}

// noPrivateIP tells memberlist's refusal to pick an address apart.
func noPrivateIP(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no private IP address found")
}

package healthcheck

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/muster-registry/muster/registry"
)

// MetadataKey is the instance metadata entry that opts an instance in
// ("http", "tcp") or out ("off") whatever Config.Apps says.
const MetadataKey = "muster.health-check"

// Mode is how an instance is probed.
type Mode uint8

// Modes.
const (
	ModeOff Mode = iota
	ModeHTTP
	ModeTCP
)

func (m Mode) String() string {
	switch m {
	case ModeHTTP:
		return "http"
	case ModeTCP:
		return "tcp"
	}
	return "off"
}

// modeOf is how in is probed: its metadata entry first, then Config.Apps
// (HTTP when it advertises a health-check URL, else TCP). A persistent
// instance (registry.IsPersistent) is probed whatever Config.Apps says:
// it sends no heartbeats, so the probes are its only liveness; it opts out
// with the metadata entry like any other.
func (c *Checker) modeOf(in *registry.Instance) Mode {
	if v, ok := in.Metadata.Get(MetadataKey); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "http":
			return ModeHTTP
		case "tcp":
			return ModeTCP
		case "off":
			return ModeOff
		}
	}
	if !c.all && !c.apps[in.App] && !registry.IsPersistent(in) {
		return ModeOff
	}
	if healthURL(in) != "" {
		return ModeHTTP
	}
	return ModeTCP
}

// healthURL is the URL an HTTP probe requests: the secure one when the
// secure port is enabled and one is given.
func healthURL(in *registry.Instance) string {
	if in.SecurePort.Enabled && in.SecureHealthCheckURL != "" {
		return in.SecureHealthCheckURL
	}
	return in.HealthCheckURL
}

// target is where a probe goes. addr is the only address ever dialled.
type target struct {
	mode Mode
	addr netip.AddrPort
	// ModeHTTP: what the request says. The URL's host only names the Host
	// header and the TLS server name; the connection goes to addr.
	https      bool
	host       string // the URL's host name, without port
	hostHeader string // the URL's host[:port], as the Host header
	requestURI string // path and query, escaped
	// refused says why the instance is not probed ("" when it is).
	refused string
}

// The threat model. Anyone who can register an instance chooses its
// ipAddr, hostName and healthCheckUrl; with health checks on, they would
// otherwise choose where every node connects (server-side request
// forgery: the cloud metadata service at 169.254.169.254, the node's own
// admin API, services on loopback, other hosts on the node's network, or a
// port scan read back through the console's probe results). So:
//
//   - only the instance's own registered ipAddr is dialled; a URL whose host
//     is neither that ipAddr nor the instance's hostName is not requested
//     (the instance is flagged, never marked), and a hostName is never
//     resolved: no DNS answer can move the probe elsewhere (no rebinding
//     between check and connect: the checked address is the dialled one);
//   - loopback, link-local (169.254.0.0/16, fe80::/10), unspecified and
//     multicast addresses and the node's own addresses are refused unless
//     AllowedCIDRs lists them; once AllowedCIDRs is set, nothing outside it
//     is dialled; the node's own listeners are refused always;
//   - a URL with user info is refused (the client would send it as
//     credentials); the probe carries no Authorization header, no cookie
//     and no client certificate, ignores proxy settings and follows no
//     redirect (a 3xx fails);
//   - at most MaxConcurrent connections at once, each bounded by Timeout,
//     and at most 4 KiB of an answer is read;
//   - what the console shows of a result is its class (an HTTP status, a
//     timeout, a refused connection), not the answer's body.
//
// Still possible, by design: probing any port of an address that an
// instance may register, which is what a health check is. Limit who may
// register (auth.* roles) and where (AllowedCIDRs) to narrow that.

// targetOf decides where in is probed, or why it is not, before the
// address rules (checkAddr), which the caller applies every round.
func (c *Checker) targetOf(in *registry.Instance, m Mode) target {
	t := target{mode: m}
	ip, err := netip.ParseAddr(strings.TrimSpace(in.IPAddr))
	if err != nil || ip.Zone() != "" {
		t.refused = "ipAddr is not an IP address"
		return t
	}
	ip = ip.Unmap()
	var port int
	switch m {
	case ModeHTTP:
		raw := healthURL(in)
		if raw == "" {
			t.refused = "no healthCheckUrl"
			return t
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.refused = "healthCheckUrl is not an http(s) URL"
			return t
		}
		if u.User != nil {
			t.refused = "healthCheckUrl carries credentials"
			return t
		}
		if !sameHost(u.Hostname(), ip, in.HostName) {
			t.refused = fmt.Sprintf("healthCheckUrl host %s is neither the instance's ipAddr nor its hostName", registry.QuotePrefix(u.Hostname()))
			return t
		}
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
		if p := u.Port(); p != "" {
			if port, err = strconv.Atoi(p); err != nil {
				port = 0
			}
		}
		t.https = u.Scheme == "https"
		t.host, t.hostHeader, t.requestURI = u.Hostname(), u.Host, u.RequestURI()
		if !printable(t.hostHeader) || !printable(t.requestURI) {
			// url.Parse refuses control characters already; the request
			// is written by hand (probe.go), so check again.
			t.refused = "healthCheckUrl is not an http(s) URL"
			return t
		}
	case ModeTCP:
		switch {
		case in.Port.Enabled && in.Port.Number > 0:
			port = in.Port.Number
		case in.SecurePort.Enabled && in.SecurePort.Number > 0:
			port = in.SecurePort.Number
		}
	default:
		t.refused = "not probed"
		return t
	}
	if port < 1 || port > 65535 {
		t.refused = "no valid port"
		return t
	}
	t.addr = netip.AddrPortFrom(ip, uint16(port))
	return t
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// sameHost is true when host names the instance: its ipAddr (as an
// address, so 10.0.0.1 and ::ffff:10.0.0.1 agree) or its hostName.
func sameHost(host string, ip netip.Addr, hostName string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap() == ip
	}
	return hostName != "" && strings.EqualFold(strings.TrimSuffix(host, "."), strings.TrimSuffix(hostName, "."))
}

// ownAddrs are the node's own addresses and listening ports, taken once
// per round.
type ownAddrs struct {
	addrs map[netip.Addr]bool
	ports map[uint16]bool
}

// checkAddr returns why addr may not be dialled, or "".
func (c *Checker) checkAddr(addr netip.AddrPort, own ownAddrs) string {
	ip := addr.Addr()
	self := ip.IsLoopback() || ip.IsUnspecified() || own.addrs[ip]
	if self && own.ports[addr.Port()] {
		return "the node's own listener"
	}
	allowed := false
	for _, p := range c.cfg.AllowedCIDRs {
		if p.Contains(ip) {
			allowed = true
			break
		}
	}
	if len(c.cfg.AllowedCIDRs) > 0 && !allowed {
		return "outside muster.health-check.allowed-cidrs"
	}
	if allowed {
		return ""
	}
	switch {
	case ip.IsLoopback():
		return "loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "link-local address"
	case ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0:
		return "unspecified address"
	case ip.IsMulticast() || ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast or broadcast address"
	case own.addrs[ip]:
		return "the node's own address"
	}
	return ""
}

package dns

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	mdns "github.com/miekg/dns"
)

// Config is the DNS interface's settings (muster.dns.*).
type Config struct {
	Enabled bool
	Addr    string // UDP and TCP listen address
	Domain  string // fully qualified, e.g. "muster."
	Region  string // the region of txt.<region>.<domain>
	TTL     int    // seconds, on every answer and the SOA's minimum
	// AllowedCIDRs are who may ask; empty means everyone. The node sets
	// loopback only when client auth is configured and none are given.
	AllowedCIDRs []string
	MaxAnswers   int // most address or SRV records in one answer
	// UDPMaxSize caps the EDNS0 buffer size a client may offer (512 without EDNS0).
	UDPMaxSize int
	// RateLimit is the responses per second one source address (IPv4 /32,
	// IPv6 /64) gets over UDP, with bursts up to RateBurst; over it queries
	// are dropped. 0 turns the limit off. TCP is not limited (no spoofing).
	RateLimit int
	RateBurst int
}

// DefaultConfig is the DNS interface as a node runs it unless told otherwise.
func DefaultConfig() Config {
	return Config{
		Addr: ":8600", Domain: "muster.", Region: "us-east-1", TTL: 5,
		MaxAnswers: 64, UDPMaxSize: 1232, RateLimit: 200, RateBurst: 400,
	}
}

// Validate reports the first bad setting, by its key.
func (c Config) Validate() error {
	switch {
	case c.Addr == "":
		return errors.New("muster.dns.addr: empty")
	case !mdns.IsFqdn(c.Domain) || len(mdns.SplitDomainName(c.Domain)) == 0:
		return fmt.Errorf("muster.dns.domain %q: must be a fully qualified name such as muster.", c.Domain)
	case c.Region == "" || strings.Contains(c.Region, "."):
		return fmt.Errorf("muster.dns.region %q: must be one label", c.Region)
	case c.TTL < 0 || c.TTL > 86400:
		return fmt.Errorf("muster.dns.ttl-seconds %d: must be 0..86400", c.TTL)
	case c.MaxAnswers < 1:
		return fmt.Errorf("muster.dns.max-answers %d: must be at least 1", c.MaxAnswers)
	case c.UDPMaxSize < 512 || c.UDPMaxSize > 65535:
		return fmt.Errorf("muster.dns.udp-max-size %d: must be 512..65535", c.UDPMaxSize)
	case c.RateLimit < 0 || c.RateBurst < 0 || (c.RateLimit > 0 && c.RateBurst < 1):
		return fmt.Errorf("muster.dns.rate-limit %d / rate-burst %d: must be >= 0, burst >= 1 when limited", c.RateLimit, c.RateBurst)
	}
	_, err := c.prefixes()
	return err
}

func (c Config) prefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.AllowedCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("muster.dns.allowed-cidrs %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// LoopbackOnly is the allowed-cidrs default once client auth is set.
var LoopbackOnly = []string{"127.0.0.0/8", "::1/128"}

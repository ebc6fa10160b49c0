package healthcheck

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Config is muster.health-check.*.
type Config struct {
	// Enabled turns probing on (muster.health-check.enabled, default
	// false). Off, the node probes only persistent instances
	// (registry.IsPersistent: their probes are their only liveness) and
	// writes no other marks.
	Enabled bool
	// Apps are the applications probed without asking (app names, any
	// letter case, or "*" for all; muster.health-check.apps, default
	// none). An instance opts in or out itself with the metadata entry
	// muster.health-check: http, tcp or off.
	Apps []string
	// Interval is the time between two rounds, jittered by ±10 % so the
	// nodes' rounds drift apart (muster.health-check.interval-ms, default
	// 10 s). A round that takes longer delays the next.
	Interval time.Duration
	// Timeout bounds one probe: connect, TLS, request and the first bytes
	// of the answer (muster.health-check.timeout-ms, default 2 s).
	Timeout time.Duration
	// FailuresBeforeDown failed rounds in a row mark an instance DOWN
	// (default 3); SuccessesBeforeUp passed rounds in a row lift the mark
	// (default 2).
	FailuresBeforeDown int
	SuccessesBeforeUp  int
	// MaxConcurrent probes run at once at most (default 64): the bound on
	// the connections a node opens for health checks.
	MaxConcurrent int
	// MaxDownPercent is the guard: when more than this share of an app's
	// instances probed by this node fail in the same round, none of them
	// is marked (default 50; 100 turns the guard off). An app with one
	// probed instance is then never marked: its only failure is 100 %.
	// Persistent instances are outside the guard: marked on their own
	// failures, and not counted for the others.
	MaxDownPercent int
	// AllowedCIDRs lifts the address rules for the networks listed, and
	// once set, only they may be probed (muster.health-check.allowed-cidrs,
	// default none: every address but the forbidden ones).
	AllowedCIDRs []netip.Prefix

	// Now is the clock (nil: time.Now); Rand jitters the interval.
	Now    func() time.Time
	Rand   *rand.Rand
	Logger zerolog.Logger
}

// DefaultConfig is the documented defaults.
func DefaultConfig() Config {
	return Config{
		Interval:           10 * time.Second,
		Timeout:            2 * time.Second,
		FailuresBeforeDown: 3,
		SuccessesBeforeUp:  2,
		MaxConcurrent:      64,
		MaxDownPercent:     50,
	}
}

// Validate reports the first setting out of range, with its value.
func (c Config) Validate() error {
	switch {
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("healthcheck: interval %s is below 100ms", c.Interval)
	case c.Timeout <= 0 || c.Timeout > c.Interval:
		return fmt.Errorf("healthcheck: timeout %s must be positive and at most the interval %s", c.Timeout, c.Interval)
	case c.FailuresBeforeDown < 1:
		return fmt.Errorf("healthcheck: failures-before-down %d must be at least 1", c.FailuresBeforeDown)
	case c.SuccessesBeforeUp < 1:
		return fmt.Errorf("healthcheck: successes-before-up %d must be at least 1", c.SuccessesBeforeUp)
	case c.MaxConcurrent < 1 || c.MaxConcurrent > 4096:
		return fmt.Errorf("healthcheck: max-concurrent %d must be between 1 and 4096", c.MaxConcurrent)
	case c.MaxDownPercent < 0 || c.MaxDownPercent > 100:
		return fmt.Errorf("healthcheck: max-down-percent %d must be between 0 and 100", c.MaxDownPercent)
	}
	for _, a := range c.Apps {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("healthcheck: apps holds an empty name")
		}
	}
	return nil
}

// ParseCIDRs reads muster.health-check.allowed-cidrs: prefixes, or bare
// addresses meaning one address.
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("healthcheck: allowed-cidrs: %q is neither a CIDR nor an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

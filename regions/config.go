package regions

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/muster-registry/muster/internal/redact"
)

// MetadataKey marks every remote instance Muster serves with the name of
// its region, so a client (and Muster itself, fetching from a remote that
// serves it back) can tell a remote copy from a local instance.
const MetadataKey = "muster.region"

// GlobalWhitelist is the whitelist key that applies to every region without
// its own list, as Eureka's remoteRegionAppWhitelist reads it.
const GlobalWhitelist = "global"

// DefaultLocalRegion is eureka.client.region's default.
const DefaultLocalRegion = "us-east-1"

// Config is what the node reads of remote regions. Each field's key is in
// node's settings; the defaults are Spring's EurekaServerConfigBean's.
type Config struct {
	// LocalRegion is this node's own region (eureka.client.region): the
	// name a remote Muster is asked for, and the one a client naming it
	// in regions= gets nothing more for.
	LocalRegion string
	// URLs are the Eureka base URLs of each remote region
	// (eureka.server.remote-region-urls-with-name), tried in order.
	URLs map[string][]string
	// Whitelist lists the apps served of each region (or of every region,
	// under GlobalWhitelist); a region under neither serves every app.
	Whitelist map[string][]string
	// FetchInterval is the time between fetches of a region (30 s).
	FetchInterval time.Duration
	// DisableDelta makes every fetch a full one.
	DisableDelta bool
	// ConnectTimeout and ReadTimeout bound a fetch's connection and its
	// wait for the response.
	ConnectTimeout, ReadTimeout time.Duration
	// TrustStore and its password verify HTTPS remotes ("" means the
	// system roots).
	TrustStore, TrustStorePassword string
	// DisableTransparentFallback serves only local apps to a plain
	// request (Eureka's default serves remote apps unknown locally).
	DisableTransparentFallback bool
	// RequireAll answers a regions= request naming a region with no data
	// with 403, as Eureka does; false serves the local data and names the
	// missing regions in a header.
	RequireAll bool
	// MaxStaleness drops a region's data that has not been refreshed for
	// that long; 0 keeps it forever, as Eureka does.
	MaxStaleness time.Duration
}

// DefaultConfig is Spring's defaults: no remote region.
func DefaultConfig() Config {
	return Config{
		LocalRegion:    DefaultLocalRegion,
		URLs:           map[string][]string{},
		Whitelist:      map[string][]string{},
		FetchInterval:  30 * time.Second,
		ConnectTimeout: time.Second,
		ReadTimeout:    time.Second,
	}
}

// Names returns the remote regions, sorted.
func (c Config) Names() []string {
	names := make([]string, 0, len(c.URLs))
	for n := range c.URLs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate reports the first wrong field.
func (c Config) Validate() error {
	if strings.TrimSpace(c.LocalRegion) == "" {
		return errors.New("the local region must not be empty")
	}
	if c.FetchInterval < time.Second {
		return fmt.Errorf("remote region fetch interval %v: must be at least 1 s", c.FetchInterval)
	}
	if c.ConnectTimeout <= 0 || c.ReadTimeout <= 0 {
		return errors.New("remote region timeouts must be positive")
	}
	if c.MaxStaleness < 0 {
		return errors.New("max staleness must not be negative")
	}
	for name, urls := range c.URLs {
		if err := validName(name); err != nil {
			return err
		}
		if name == c.LocalRegion {
			return fmt.Errorf("remote region %s is the local region (eureka.client.region)", name)
		}
		if len(urls) == 0 {
			return fmt.Errorf("remote region %s has no URL", name)
		}
		for _, u := range urls {
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				return fmt.Errorf("remote region %s: URL %s: want http:// or https://host/eureka", name, redact.URL(u))
			}
		}
	}
	return nil
}

// validName accepts what can stand in a query parameter list and a DNS
// label: letters, digits, '-', '_' and '.'.
func validName(name string) error {
	if name == "" {
		return errors.New("empty remote region name")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("remote region name %q: use letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// ParseURLsWithName reads Netflix's string form of
// remoteRegionUrlsWithName: "region;url,region;url".
func ParseURLsWithName(raw string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, u, ok := strings.Cut(part, ";")
		if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(u) == "" {
			return nil, fmt.Errorf("%q: want region;url", redact.URL(part))
		}
		name = strings.TrimSpace(name)
		out[name] = append(out[name], strings.TrimSpace(u))
	}
	return out, nil
}

// allowed returns whether the app (upper-cased) of region is served.
func (c Config) allowed(region, app string) bool {
	list, ok := c.Whitelist[region]
	if !ok {
		list, ok = c.Whitelist[GlobalWhitelist]
	}
	if !ok {
		return true
	}
	for _, a := range list {
		if strings.EqualFold(a, app) {
			return true
		}
	}
	return false
}

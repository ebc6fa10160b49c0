package xds

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Config is the xDS server's settings (muster.xds.*).
type Config struct {
	Enabled bool
	Addr    string // gRPC listen address
	// MaxStreams caps the xDS streams open on this node at once (ADS and
	// per-type streams alike); one more is refused with RESOURCE_EXHAUSTED.
	MaxStreams int
	// Warmup is how long an instance's endpoint weight ramps up after it
	// turns UP (muster.traffic.warmup-seconds; 0: no ramp), for every app
	// without a value of its own in AppWarmup. At most MaxWarmup. Any
	// app with a warm-up has a RING_HASH cluster (warmup.go).
	Warmup time.Duration
	// AppWarmup is Warmup per app, by upper-case app name
	// (muster.traffic.apps.<APP>.warmup-seconds); 0 turns it off for that
	// app.
	AppWarmup map[string]time.Duration
}

// DefaultConfig is the xDS server as a node runs it unless told otherwise.
func DefaultConfig() Config {
	return Config{Addr: ":18000", MaxStreams: 10000}
}

// Validate reports the first bad setting, by its key.
func (c Config) Validate() error {
	if c.Addr == "" {
		return errors.New("muster.xds.addr: empty")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("muster.xds.addr %q: want host:port (e.g. :18000): %v", c.Addr, err)
	}
	if c.MaxStreams < 1 {
		return fmt.Errorf("muster.xds.max-streams %d: must be at least 1", c.MaxStreams)
	}
	if err := checkWarmup("muster.traffic.warmup-seconds", c.Warmup); err != nil {
		return err
	}
	apps := make([]string, 0, len(c.AppWarmup))
	for app := range c.AppWarmup {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		if err := checkWarmup("muster.traffic.apps."+app+".warmup-seconds", c.AppWarmup[app]); err != nil {
			return err
		}
	}
	return nil
}

// MaxWarmup bounds a warm-up: an hour is far past any JVM's warm-up, and
// a bound keeps a typo (3600000 meant as ms) from holding an instance at
// a tenth of its traffic for days.
const MaxWarmup = time.Hour

func checkWarmup(key string, d time.Duration) error {
	if d < 0 || d > MaxWarmup || d%time.Second != 0 {
		return fmt.Errorf("%s %v: want whole seconds from 0 (off) to %d", key, d, int(MaxWarmup/time.Second))
	}
	return nil
}

// warmupOf is app's warm-up: its own, else the global one.
func (c Config) warmupOf(app string) time.Duration {
	if d, ok := c.AppWarmup[strings.ToUpper(app)]; ok {
		return d
	}
	return c.Warmup
}

// warmupOn tells whether any app warms up: then every weight is scaled
// (ratios kept), and the clusters of the apps that warm up, and of the VIPs
// they list, are RING_HASH (warmup.go).
func (c Config) warmupOn() bool {
	if c.Warmup > 0 {
		return true
	}
	for _, d := range c.AppWarmup {
		if d > 0 {
			return true
		}
	}
	return false
}

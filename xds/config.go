package xds

import (
	"errors"
	"fmt"
	"net"
)

// Config is the xDS server's settings (muster.xds.*).
type Config struct {
	Enabled bool
	Addr    string // gRPC listen address
	// MaxStreams caps the xDS streams open on this node at once (ADS and
	// per-type streams alike); one more is refused with RESOURCE_EXHAUSTED.
	MaxStreams int
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
	return nil
}

package registry_test

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
)

// Validate owns the limits of the knobs; cmd/muster maps its keys onto
// them and reports these errors under the key.
func TestConfig_Validate(t *testing.T) {
	if err := registry.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	for _, tt := range []struct {
		change func(*registry.Config)
		want   string
	}{
		{func(c *registry.Config) { c.EvictionInterval = -5 * time.Millisecond }, "registry: EvictionInterval must be positive, got -5ms"},
		{func(c *registry.Config) { c.RenewalRateWindow = 999 * time.Millisecond }, "registry: RenewalRateWindow must be at least 1s, got 999ms"},
		{func(c *registry.Config) { c.RenewalPercentThreshold = 1.5 }, "registry: RenewalPercentThreshold must be in (0, 1], got 1.5"},
		{func(c *registry.Config) { c.OutboxSize = 0 }, "registry: OutboxSize must be at least 1, got 0"},
		{func(c *registry.Config) { c.Limits.MaxInstances = 0 }, "registry: Limits.MaxInstances must be from 1 to 1000000000, got 0"},
		{func(c *registry.Config) { c.Limits.MaxMetadataBytes = 1<<30 + 1 }, "registry: Limits.MaxMetadataBytes must be from 1 to 1073741824, got 1073741825"},
		{func(c *registry.Config) { c.Limits.MaxClockSkew = 0 }, "registry: Limits.MaxClockSkew must be positive, got 0s"},
	} {
		c := registry.DefaultConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		if r, err := registry.New(c); err == nil || r != nil {
			t.Errorf("New accepted what Validate refuses: %v", err)
		}
	}
}

package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
)

// Validate owns the limits of the knobs (cmd/muster maps its keys onto
// them and reports these errors under the key); New checks the wiring too.
func TestConfig_Validate(t *testing.T) {
	if err := httpapi.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v; the wiring is New's to check", err)
	}
	if _, err := httpapi.New(httpapi.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "Registry is required") {
		t.Errorf("New without a Registry: %v", err)
	}
	for _, tt := range []struct {
		change func(*httpapi.Config)
		want   string
	}{
		{func(c *httpapi.Config) { c.MaxBodyBytes = 0 }, "httpapi: MaxBodyBytes must be positive, got 0"},
		{func(c *httpapi.Config) { c.MaxBatchBodyBytes = -1 }, "httpapi: MaxBatchBodyBytes must be positive, got -1"},
		{func(c *httpapi.Config) { c.BodyReadTimeout = -time.Second }, "httpapi: BodyReadTimeout must not be negative (0 turns it off), got -1s"},
		{func(c *httpapi.Config) { c.WriteChunkTimeout = -time.Second }, "httpapi: WriteChunkTimeout must not be negative (0 turns it off), got -1s"},
		{func(c *httpapi.Config) { c.MaxConnections = httpapi.MaxLimitValue + 1 }, "httpapi: MaxConnections must be from 0 (no limit) to 10000000, got 10000001"},
		{func(c *httpapi.Config) { c.WatchMaxWait = 0 }, "httpapi: WatchMaxWait must be positive, got 0s"},
		{func(c *httpapi.Config) { c.WatchMaxWatchers = -1 }, "httpapi: WatchMaxWatchers must be from 0 (no limit) to 10000000, got -1"},
		{func(c *httpapi.Config) { c.ConsoleActions = "all" }, `httpapi: ConsoleActions must be one of [loopback any none], got "all"`},
		{func(c *httpapi.Config) { c.ConsolePath = "registry" }, `httpapi: ConsolePath must be a plain path starting with /, got "registry"`},
		{func(c *httpapi.Config) { c.ConsolePath = "/admin/status" }, `httpapi: ConsolePath "/admin/status" is taken by the node's own routes (/admin)`},
		{func(c *httpapi.Config) { c.ConsolePath = "/eureka/" }, `httpapi: ConsolePath "/eureka/" is taken by the node's own routes (/eureka)`},
	} {
		c := httpapi.DefaultConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
	}
	for _, ok := range []func(*httpapi.Config){
		func(c *httpapi.Config) { c.BodyReadTimeout, c.WriteChunkTimeout, c.MaxConnections = 0, 0, 0 },
		func(c *httpapi.Config) { c.WatchMaxWatchers = 0 },
		func(c *httpapi.Config) { c.ConsoleActions = "" },
		func(c *httpapi.Config) { c.ConsolePath = "/registry" },
		func(c *httpapi.Config) { c.ConsolePath = "/eurekas" }, // a prefix of a name is not the name
	} {
		c := httpapi.DefaultConfig()
		ok(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("Validate() = %v, want nil (0 turns a limit off; \"\" is loopback)", err)
		}
	}
}

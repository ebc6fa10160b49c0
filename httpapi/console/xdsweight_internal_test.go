package console

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// TestConsole_xdsWeight: an instance's row shows the weight the node's
// xDS serves it with: a warm one its weight, one warming up how far it is
// and until when (by the console's clock), one without an endpoint
// nothing. (The node's real xDS server behind it: node's
// TestXDS_warmupFromSettings.)
func TestConsole_xdsWeight(t *testing.T) {
	var n *testNode
	n = newTestNode(t, func(_ *registry.Config, cfg *Config) {
		cfg.XDSWeight = func(app, id string) (ops.XDSWeight, bool) {
			switch id {
			case "warm":
				return ops.XDSWeight{Weight: 300, Full: 300, Percent: 100}, true
			case "warming":
				return ops.XDSWeight{Weight: 84, Full: 300, Percent: 28, WarmUntil: n.clock.Now().Add(36 * time.Second)}, true
			}
			return ops.XDSWeight{}, false
		}
	})
	for _, id := range []string{"warm", "warming", "down"} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", id))); err != nil {
			t.Fatal(err)
		}
	}
	body := n.do(t, "GET", "/console/apps/ORDERS", "").Body
	row := func(id string) string {
		return regexp.MustCompile(`(?s)data-id="` + id + `">.*?</tr>`).FindString(body)
	}
	until := n.clock.Now().Add(36 * time.Second).UTC().Format("15:04:05")
	for id, want := range map[string]string{
		"warm":    `<span class="xds-weight">xDS weight 300</span>`,
		"warming": `<span class="xds-weight">xDS weight 84 of 300, warming up until ` + until + ` UTC (28 %, 36s left)</span>`,
	} {
		if r := row(id); !strings.Contains(r, want) {
			t.Errorf("%s's row lacks %q: %s", id, want, r)
		}
	}
	if r := row("down"); r == "" || strings.Contains(r, "xds-weight") {
		t.Errorf("row of an instance without an endpoint: %q", r)
	}
}

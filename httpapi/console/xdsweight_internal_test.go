package console

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/xds"
)

// TestConsole_xdsWeight: with the node's xDS server behind it, an
// instance's row shows the weight xDS serves it with: a warm instance its
// weight, one warming up how far it is and until when, and the full
// weight once warm (the xDS server and the page on the registry's clock).
func TestConsole_xdsWeight(t *testing.T) {
	var srv *xds.Server
	n := newTestNode(t, func(_ *registry.Config, cfg *Config) {
		cfg.XDSWeight = func(app, id string) (ops.XDSWeight, bool) { return srv.Weight(app, id) }
	})
	apply := func(in *registry.Instance) {
		t.Helper()
		if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	inst := func(id, ip string) *registry.Instance {
		return registrytest.NewInstance("ORDERS", id, func(in *registry.Instance) {
			in.IPAddr, in.Port = ip, registry.Port{Number: 8080, Enabled: true}
			in.Metadata = registry.NewMetadata(map[string]string{"weight": "3"})
		})
	}
	apply(inst("o-1", "10.0.0.1"))
	var err error
	srv, err = xds.New(xds.Config{Enabled: true, Addr: "127.0.0.1:0", MaxStreams: 10, Warmup: 50 * time.Second},
		xds.Options{Registry: n.reg, Clock: n.clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	row := func(id string) string {
		body := n.do(t, "GET", "/console/apps/ORDERS", "").body
		return regexp.MustCompile(`(?s)data-id="` + id + `">.*?</tr>`).FindString(body)
	}
	awaitRow := func(id, want string) {
		t.Helper()
		testwait.For(t, 10*time.Second, id+"'s row shows "+want, func() error {
			if r := row(id); !strings.Contains(r, want) {
				return fmt.Errorf("row %q", r)
			}
			return nil
		})
	}
	awaitRow("o-1", `<span class="xds-weight">xDS weight 300</span>`)

	apply(inst("o-2", "10.0.0.2"))
	until := n.clock.Now().Add(50 * time.Second).UTC().Format("15:04:05")
	awaitRow("o-2", "xDS weight 30 of 300, warming up until "+until+" UTC (10 %, 50s left)")
	n.clock.Advance(20 * time.Second)
	awaitRow("o-2", "xDS weight 138 of 300, warming up until "+until+" UTC (46 %, 30s left)")
	n.clock.Advance(30 * time.Second)
	awaitRow("o-2", `<span class="xds-weight">xDS weight 300</span>`)

	// Not UP: no endpoint, so no weight.
	if _, err := n.reg.Apply(registry.StatusOp("ORDERS", "o-2", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "o-2's row loses its weight", func() error {
		if r := row("o-2"); strings.Contains(r, "xds-weight") {
			return fmt.Errorf("row %q", r)
		}
		return nil
	})
}

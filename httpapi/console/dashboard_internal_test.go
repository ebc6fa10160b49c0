package console

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

const (
	emergencyBanner = "EMERGENCY! EUREKA MAY BE INCORRECTLY CLAIMING INSTANCES ARE UP WHEN THEY'RE NOT."
	offBanner       = "THE SELF PRESERVATION MODE IS TURNED OFF. THIS MAY NOT PROTECT INSTANCE EXPIRY"
	belowOffBanner  = "RENEWALS ARE LESSER THAN THE THRESHOLD. THE SELF PRESERVATION MODE IS TURNED OFF."
)

func TestDashboard_instancesAndNoBanner(t *testing.T) {
	n := newTestNode(t)
	for _, id := range []string{"o1", "o2"} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", id))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.reg.Apply(registry.StatusOp("ORDERS", "o2", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", "/", "")
	if r.Code != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %d %s", r.Code, r.Header.Get("Content-Type"))
	}
	for _, want := range []string{"System Status", "Renews threshold", "Renews (last min)", "Lease expiration enabled",
		"DS Replicas", "General Info", "<b>ORDERS</b>", `<span class="ok"><b>UP</b> (1)</span>`,
		`<span class="bad"><b>DOWN</b> (1)</span>`, "node-a", "/static/muster.css", "/static/console.js"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(r.Body, `id="banner"`) {
		t.Error("banner shown while self-preservation is enabled and not active")
	}
	if css := n.do(t, "GET", "/static/muster.css", ""); css.Code != 200 || !strings.Contains(css.Body, "banner") {
		t.Errorf("stylesheet: %d", css.Code)
	}
}

func TestDashboard_emergencyBannerWhenActive(t *testing.T) {
	n := newTestNode(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", id))); err != nil {
			t.Fatal(err)
		}
	}
	if body := n.do(t, "GET", "/", "").Body; strings.Contains(body, emergencyBanner) {
		t.Fatal("EMERGENCY shown during the first window, before the count can know")
	}
	// They renew once (instances that never renewed are not held to the
	// threshold), then go silent.
	n.clock.Advance(30 * time.Second)
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := n.reg.Apply(registry.RenewOp("ORDERS", id)); err != nil {
			t.Fatal(err)
		}
	}
	n.clock.Advance(2 * time.Minute) // nobody renews
	body := n.do(t, "GET", "/", "").Body
	if !strings.Contains(body, emergencyBanner) {
		t.Fatal("no EMERGENCY banner while self-preservation is active")
	}
	if !strings.Contains(body, `id="self-preservation">ACTIVE`) {
		t.Error("self-preservation not shown as ACTIVE")
	}
	// Renewals recover: the banner goes.
	for range 4 {
		n.clock.Advance(30 * time.Second)
		for _, id := range []string{"a", "b", "c", "d"} {
			if _, err := n.reg.Apply(registry.RenewOp("ORDERS", id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if body := n.do(t, "GET", "/", "").Body; strings.Contains(body, emergencyBanner) {
		t.Fatal("EMERGENCY banner still shown after renewals recovered")
	}
}

func TestDashboard_selfPreservationOffBanners(t *testing.T) {
	n := newTestNode(t, func(c *registry.Config, _ *Config) { c.SelfPreservation = false })
	body := n.do(t, "GET", "/", "").Body
	if !strings.Contains(body, offBanner) || strings.Contains(body, emergencyBanner) {
		t.Fatal("self-preservation disabled: want the TURNED OFF banner only")
	}
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.RenewOp("ORDERS", "o1")); err != nil {
		t.Fatal(err)
	}
	n.clock.Advance(2 * time.Minute)
	if body := n.do(t, "GET", "/", "").Body; !strings.Contains(body, belowOffBanner) {
		t.Fatal("renewals below threshold with self-preservation off: want the RENEWALS ARE LESSER banner")
	}
}

// The remote regions' table shows each region's report: served, or none
// (never reached or dropped as stale).
func TestDashboard_remoteRegions(t *testing.T) {
	n := newTestNode(t, func(_ *registry.Config, c *Config) {
		c.RemoteRegions = func() []ops.RemoteRegionInfo {
			return []ops.RemoteRegionInfo{{Name: "b", HasData: true, Apps: 1, Instances: 2}, {Name: "c", Failures: 3, LastError: "down"}}
		}
	})
	r := n.do(t, "GET", "/", "")
	for _, want := range []string{`<table id="regions">`, "served", "dropped as stale"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, r.Body)
		}
	}
}

package settings

import (
	"strings"
	"testing"
	"time"
)

// TestLoadSettings_warmup: the global warm-up and per-app ones from a
// file, the environment and --set, app names upper-cased; a file's YAML
// map under muster.traffic.apps works as the flat keys do.
func TestLoadSettings_warmup(t *testing.T) {
	s := mustLoad(t, "", nil, nil)
	if s.XDS.Warmup != 0 || len(s.XDS.AppWarmup) != 0 {
		t.Fatalf("default warm-up %v %v, want off", s.XDS.Warmup, s.XDS.AppWarmup)
	}
	file := writeFile(t, "muster.yml", "muster:\n  traffic:\n    warmup-seconds: 60\n    apps:\n      orders:\n        warmup-seconds: 120\n      BILLING:\n        warmup-seconds: 0\n")
	s = mustLoad(t, file, []string{"MUSTER_TRAFFIC_APPS_CART_WARMUP_SECONDS=30"}, []string{"muster.traffic.apps.Search.warmup-seconds=3600"})
	if s.XDS.Warmup != time.Minute {
		t.Errorf("muster.traffic.warmup-seconds: %v, want 1m", s.XDS.Warmup)
	}
	want := map[string]time.Duration{"ORDERS": 2 * time.Minute, "BILLING": 0, "CART": 30 * time.Second, "SEARCH": time.Hour}
	if len(s.XDS.AppWarmup) != len(want) {
		t.Errorf("per-app warm-up %v, want %v", s.XDS.AppWarmup, want)
	}
	for app, d := range want {
		if got, ok := s.XDS.AppWarmup[app]; !ok || got != d {
			t.Errorf("warm-up of %s: %v (%v), want %v", app, got, ok, d)
		}
	}
}

// TestLoadSettings_warmupRefused: negative, too long, not a number and an
// unknown per-app field are refused at load, naming the key.
func TestLoadSettings_warmupRefused(t *testing.T) {
	for _, c := range []struct {
		set   string
		wants []string
	}{
		{"muster.traffic.warmup-seconds=-1", []string{"muster.traffic.warmup-seconds", "0 (off) to 3600"}},
		{"muster.traffic.warmup-seconds=3601", []string{"muster.traffic.warmup-seconds", "to 3600"}},
		{"muster.traffic.warmup-seconds=99999999999999", []string{"muster.traffic.warmup-seconds", "to 3600"}},
		{"muster.traffic.warmup-seconds=1m", []string{"muster.traffic.warmup-seconds", "whole seconds"}},
		{"muster.traffic.apps.ORDERS.warmup-seconds=-5", []string{"muster.traffic.apps.ORDERS.warmup-seconds", `"-5"`, "0 (off) to 3600"}},
		{"muster.traffic.apps.ORDERS.warmup-seconds=1e9", []string{"muster.traffic.apps.ORDERS.warmup-seconds", "whole seconds"}},
		{"muster.traffic.apps.ORDERS.warmup=5", []string{`"muster.traffic.apps.ORDERS.warmup"`, "want muster.traffic.apps.ORDERS.warmup-seconds"}},
		{"muster.traffic.apps.warmup-seconds=5", []string{"want muster.traffic.apps.<APP>.warmup-seconds"}},
	} {
		_, _, err := LoadSettings("", nil, []string{c.set})
		if err == nil {
			t.Errorf("%s: loaded", c.set)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.set, err, w)
			}
		}
	}
}

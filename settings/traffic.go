package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/muster-registry/muster/xds"
)

// Traffic settings (docs/traffic.md): muster.traffic.* for every app, and
// muster.traffic.apps.<APP>.* for one.

// warmupKey reads a warm-up in whole seconds, 0 to xds.MaxWarmup: checked
// here as well as by xds.Config.Validate, because a number of seconds too
// large for a time.Duration would wrap before Validate saw it.
func warmupKey(key, help string, field func(*Settings) *time.Duration) setting {
	return bind(key, help, field, parseWarmup,
		func(v time.Duration) string { return strconv.FormatInt(int64(v/time.Second), 10) })
}

func parseWarmup(raw string) (time.Duration, error) {
	maxSeconds := int64(xds.MaxWarmup / time.Second)
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil || v < 0 || v > maxSeconds {
		return 0, fmt.Errorf("want whole seconds from 0 (off) to %d", maxSeconds)
	}
	return time.Duration(v) * time.Second, nil
}

// applyTrafficApp reads muster.traffic.apps.<APP>.<field>. App names are
// Eureka's, upper-cased as the registry keeps them.
func (s *Settings) applyTrafficApp(suffix, raw string) error {
	app, field, ok := cutLast(suffix, '.')
	if !ok || app == "" {
		return fmt.Errorf("unknown setting %q: want %s<APP>.warmup-seconds", trafficAppsPrefix+suffix, trafficAppsPrefix)
	}
	switch CanonicalKey(field) {
	case "warmupseconds":
		d, err := parseWarmup(raw)
		if err != nil {
			return fmt.Errorf("setting %s%s.warmup-seconds = %q: %w", trafficAppsPrefix, app, raw, err)
		}
		if s.XDS.AppWarmup == nil {
			s.XDS.AppWarmup = map[string]time.Duration{}
		}
		s.XDS.AppWarmup[strings.ToUpper(app)] = d
		return nil
	}
	return fmt.Errorf("unknown setting %q: want %s%s.warmup-seconds", trafficAppsPrefix+suffix, trafficAppsPrefix, app)
}

// trafficAppEnvSuffix turns what follows MUSTER_TRAFFIC_APPS_ in an
// environment variable (lower-cased, orders_warmup_seconds) into
// <app>.<field>: the field is the known one it ends with.
func trafficAppEnvSuffix(suffix string) string {
	for _, field := range []string{"warmup_seconds", "warmupseconds"} {
		if app, ok := strings.CutSuffix(suffix, "_"+field); ok && app != "" {
			return app + ".warmup-seconds"
		}
	}
	return suffix
}

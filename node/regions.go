package node

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/settings"
)

// newRegions builds the remote regions' fetchers (none when no region is
// configured); Start runs them. Every node fetches every remote region
// itself: nothing of a remote region is replicated (docs/regions.md).
func (n *Node) newRegions() (*regions.Set, error) {
	s := n.settings
	if len(s.Regions.URLs) == 0 {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if s.Regions.TrustStore != "" {
		pool, err := settings.RegionTrustPool(s.Regions.TrustStore, s.Regions.TrustStorePassword)
		if err != nil {
			return nil, fmt.Errorf("setting eureka.server.remote-region-trust-store: %w", err)
		}
		tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return regions.NewSet(s.Regions, regions.FetcherConfig{TLS: tlsCfg, Clock: n.opts.RegionsClock,
		ID: s.InstanceHostname, Retention: s.Registry.DeltaRetention, Logger: n.log, Metrics: n.metrics}), nil
}

// remoteApp is the DNS interface's lookup of <app>.app.<region>: the
// region's served (whitelisted) instances of the app.
func (n *Node) remoteApp(region, app string) (registry.AppView, bool, bool) {
	if n.regions == nil {
		return registry.AppView{}, false, false
	}
	for _, f := range n.regions.Fetchers() {
		if strings.EqualFold(f.Region(), region) {
			if app == "" {
				return registry.AppView{}, false, true
			}
			v, ok := f.View().App(app)
			return v, ok, true
		}
	}
	return registry.AppView{}, false, false
}

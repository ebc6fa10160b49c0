package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/tlsconfig"
)

// regionInfo describes the remote regions for /admin/status and the
// dashboard.
func (n *Node) regionInfo() []ops.RemoteRegionInfo {
	var out []ops.RemoteRegionInfo
	now := n.regions.Now()
	for _, f := range n.regions.Fetchers() {
		v, st := f.View(), f.Stats()
		info := ops.RemoteRegionInfo{Name: f.Region(), HasData: v.HasData, Apps: len(v.Apps), Instances: v.Instances,
			Hashcode: v.Hashcode(), AgeSeconds: v.Age(now).Seconds(), Failures: st.Failures, LastError: st.LastError,
			Mismatches: st.Mismatches}
		if !v.Fetched.IsZero() {
			info.LastFetch = v.Fetched.UTC().Format(time.RFC3339)
		}
		for _, u := range n.settings.Regions.URLs[f.Region()] {
			info.URLs = append(info.URLs, redact.URL(u))
		}
		out = append(out, info)
	}
	return out
}

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
		pool, err := regionTrustPool(s.Regions.TrustStore, s.Regions.TrustStorePassword)
		if err != nil {
			return nil, fmt.Errorf("setting eureka.server.remote-region-trust-store: %w", err)
		}
		tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return regions.NewSet(s.Regions, regions.FetcherConfig{TLS: tlsCfg, Clock: n.opts.RegionsClock,
		ID: s.InstanceHostname, Retention: s.Registry.DeltaRetention, Logger: n.log}), nil
}

// regionTrustPool reads the CA certificates HTTPS remote regions are
// verified against: a PEM bundle, or a Java trust store (PKCS12 or JKS,
// told apart by its first bytes, opened with password), as Eureka's
// remote-region-trust-store is.
func regionTrustPool(path, password string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !bytes.Contains(b, []byte("-----BEGIN")) {
		certs, err := tlsconfig.ReadTrustStore(tlsconfig.KeyStore{Path: path, Password: password})
		if err != nil {
			return nil, err
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
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

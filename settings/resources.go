package settings

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Spring takes its files as resources: server.ssl.key-store:
// classpath:server.jks is read from the application's jar, file:/etc/x.jks
// and a plain path from the file system. A binary has no class path, so
// Muster gives classpath: a fixed meaning: the directories of
// muster.classpath (in order), then the config file's directory, then
// resources/ and config/ beside it (where a Spring project keeps
// src/main/resources' files next to application.yml once it is deployed
// outside the jar). Without a config file, the working directory stands
// for the file's directory. The first directory holding the file wins; an
// error names every place searched. file: is a path (file:///abs or
// file:rel, relative to the working directory as in Spring); a value
// without a prefix is a path.

// ClasspathKey is the setting listing muster.classpath's directories.
const ClasspathKey = "muster.classpath"

// resourceKeys are the settings Spring reads as resources. The server.ssl
// ones are read only when TLS is on; the others always.
var resourceKeys = []struct {
	key   string
	field func(s *Settings) *string
}{
	{"eureka.server.remote-region-trust-store", func(s *Settings) *string { return &s.Regions.TrustStore }},
	{"server.ssl.key-store", func(s *Settings) *string { return &s.SSLKeyStore }},
	{"server.ssl.trust-store", func(s *Settings) *string { return &s.SSLTrustStore }},
	{"server.ssl.certificate", func(s *Settings) *string { return &s.SSLCertificate }},
	{"server.ssl.certificate-private-key", func(s *Settings) *string { return &s.SSLKey }},
	{"server.ssl.trust-certificate", func(s *Settings) *string { return &s.SSLTrust }},
}

// classpathDirs are the directories classpath: searches, in order.
// Relative muster.classpath entries are taken from the config file's
// directory, where the key is usually written.
func classpathDirs(configFile string, extra []string) []string {
	base := "."
	if configFile != "" {
		base = filepath.Dir(configFile)
	}
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	var dirs []string
	for _, d := range extra {
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		dirs = append(dirs, filepath.Clean(d))
	}
	return append(dirs, base, filepath.Join(base, "resources"), filepath.Join(base, "config"))
}

// resolveResource turns a resource value into a file path: classpath:
// searched in dirs, file: stripped, anything else as it is.
func resolveResource(value string, dirs []string) (path string, err error) {
	v := strings.TrimSpace(value)
	switch {
	case hasPrefixFold(v, "classpath:"):
		name := strings.TrimLeft(v[len("classpath:"):], "/")
		if name == "" {
			return "", errors.New("classpath: names no file")
		}
		searched := make([]string, 0, len(dirs))
		for _, d := range dirs {
			p := filepath.Join(d, filepath.FromSlash(name))
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p, nil
			}
			searched = append(searched, p)
		}
		return "", fmt.Errorf("%s not found; searched %s (a binary has no class path: put the file beside the config file, in resources/ or config/ beside it, or in a directory of %s)",
			v, strings.Join(searched, ", "), ClasspathKey)
	case hasPrefixFold(v, "file:"):
		rest := v[len("file:"):]
		if strings.HasPrefix(rest, "//") {
			u, err := url.Parse(v)
			if err != nil || (u.Host != "" && u.Host != "localhost") {
				return "", fmt.Errorf("%s: want file:/path or file:///path (a local file)", v)
			}
			return filepath.FromSlash(u.Path), nil
		}
		if rest == "" {
			return "", errors.New("file: names no file")
		}
		return filepath.FromSlash(rest), nil
	}
	return v, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// resolveResources replaces each resource setting's classpath: or file:
// value with the file it names, noting the resolution for config --check;
// an error names the setting and the places searched.
func resolveResources(s *Settings, rep *Report, configFile string) {
	dirs := classpathDirs(configFile, s.Classpath)
	for _, rk := range resourceKeys {
		field := rk.field(s)
		if *field == "" {
			continue
		}
		if strings.HasPrefix(rk.key, "server.ssl.") && !s.TLSOn() {
			continue // server.ssl.enabled: false: Spring opens none of them
		}
		path, err := resolveResource(*field, dirs)
		if err != nil {
			where := s.origin[rk.key]
			if where != "" {
				where += ": "
			}
			rep.Errors = append(rep.Errors, fmt.Sprintf("%ssetting %s: %v", where, rk.key, err))
			continue
		}
		if path != strings.TrimSpace(*field) {
			rep.resolved[rk.key] = append(rep.resolved[rk.key], *field+" is "+path)
			*field = path
		}
	}
}

// CheckFiles opens the TLS material as New opens it (the same LoadTLS):
// key stores with their passwords and aliases, PEM certificates and keys,
// trust stores and bundles. muster config --check calls it, so a file the
// node cannot read fails the check as it fails the start. The warnings
// are tlsconfig's (a certificate near its expiry). The data dir is not
// tried: the check must not create it.
func (s *Settings) CheckFiles() (warnings []string, err error) {
	if s.Regions.TrustStore != "" {
		// Opened as the node's regions open it, with its password; unused (and
		// said so) when no remote region is configured.
		if _, err := RegionTrustPool(s.Regions.TrustStore, s.Regions.TrustStorePassword); err != nil {
			return nil, fmt.Errorf("setting eureka.server.remote-region-trust-store: %w", err)
		}
		if len(s.Regions.URLs) == 0 {
			warnings = append(warnings, "eureka.server.remote-region-trust-store is set but no remote region is (eureka.server.remote-region-urls-with-name): it is not used")
		}
	}
	store, err := s.LoadTLS(zerolog.Nop(), 0)
	if err != nil || store == nil {
		return warnings, err
	}
	return append(warnings, store.Check(time.Now())...), nil
}

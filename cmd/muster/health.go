package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/settings"
	"github.com/muster-registry/muster/tlsconfig"
)

// healthCmd probes a node's /readyz and exits non-zero unless it answers
// 200, so container healthchecks work in an image without a shell or curl.
// It prints the body, so with --url it doubles as a GET for scripts
// (docker exec NODE /muster health --url http://127.0.0.1:8761/admin/status).
// In a node's container it follows the node's own settings from the
// environment: https and the node's port, the trust certificate and, for
// client-auth need, the node's certificate as its client certificate.
func healthCmd(args []string, stdout io.Writer) error {
	def := probeDefaults(os.Environ())
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stdout)
	target := fs.String("url", def.url, "URL to probe: host:port (its /readyz) or a full URL; credentials may go in it: https://user:pass@host:8761/admin/status")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	caFile := fs.String("ca-cert", def.ca, "PEM CA bundle to verify an https node against (default: server.ssl.trust-certificate from the environment, else the system roots)")
	certFile := fs.String("cert", def.cert, "PEM client certificate, for nodes with server.ssl.client-auth need (default: server.ssl.certificate from the environment)")
	keyFile := fs.String("key", def.key, "PEM key of --cert")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("health: unexpected argument %q", fs.Arg(0))
	}
	u, err := nodeURL(*target, schemeOf(def.url), "/readyz")
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	*target = u.String()
	tlsCfg, err := def.clientTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := client.Get(*target)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d: %.200s", redact.URL(*target), resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "%s", body)
	return nil
}

type probe struct {
	url, ca, cert, key string
	// store is the node's identity when it comes from keystores, which
	// the PEM flags cannot name.
	store *tlsconfig.Store
}

// clientTLS is the package's clientTLS, except that with the flags left
// at the node's defaults and the node on keystores, the node's own
// keystores verify it and identify the caller.
func (p probe) clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if p.store != nil && caFile == p.ca && certFile == p.cert && keyFile == p.key {
		return p.store.ClientConfig(""), nil
	}
	return clientTLS(caFile, certFile, keyFile)
}

// probeDefaults reads the node's settings from the environment; without
// usable ones it probes http://127.0.0.1:8761/readyz.
func probeDefaults(env []string) probe {
	p := probe{url: "http://127.0.0.1:" + strconv.Itoa(settings.DefaultServerPort) + "/readyz"}
	s, _, err := settings.LoadSettings("", env, nil)
	if err != nil {
		return p
	}
	port := s.ServerPort
	if port == 0 {
		port = settings.DefaultServerPort
	}
	p.url = s.Scheme() + "://127.0.0.1:" + strconv.Itoa(port) + "/readyz"
	if s.TLSOn() {
		p.ca = s.SSLTrust
		if s.SSLClientAuth != tlsconfig.ClientAuthNone {
			p.cert, p.key = s.SSLCertificate, s.SSLKey
		}
		if s.SSLKeyStore != "" || s.SSLTrustStore != "" {
			p.store, _ = tlsconfig.Load(s.TLSConfig(zerolog.Nop(), 0))
		}
	}
	return p
}

// clientTLS builds the TLS config of a tool calling a node: verify it
// against caFile (system roots when empty), present certFile when given.
// nil when there is nothing to set.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(stripFile(caFile))
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(stripFile(certFile), stripFile(keyFile))
		if err != nil {
			return nil, fmt.Errorf("client certificate %s: %w", certFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func stripFile(p string) string {
	if len(p) > 5 && p[:5] == "file:" {
		return p[5:]
	}
	return p
}

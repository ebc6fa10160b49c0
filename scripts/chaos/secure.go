package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// The compose cluster runs secured (docker-compose.yml; README, "Securing
// a cluster"): the nodes serve https with certificates the tls-certs
// one-shot service made, require a client certificate of that CA, and
// (with auth on) HTTP Basic credentials. The harness calls them as an
// operator: the operator certificate and the admin user.
const (
	nodeBase      = "https://127.0.0.1:8761" // a node, from inside its container or through its published port
	adminUser     = "admin"                  // spring.security.user.name in docker-compose.yml
	adminPassword = "admin-password"         // spring.security.user.password in docker-compose.yml
)

// secureClients are the harness's HTTP clients, rebuilt for every fresh
// cluster (each makes its own CA).
type secureClients struct {
	host  *http.Client // reads through the published ports (3 s)
	write *http.Client // registrations, cancels, status changes (5 s)
	roots *x509.CertPool
}

var clients atomic.Pointer[secureClients]

// loadCerts copies the CA and the operator's certificate out of the
// exited tls-certs container (its volume is the cluster's certs volume)
// and builds the clients from them.
func (b *bench) loadCerts(ctx context.Context) error {
	id, err := b.container(ctx, "tls-certs")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "muster-chaos-certs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, f := range []string{"muster-ca.pem", "operator.pem", "operator-key.pem"} {
		if _, err := run(ctx, "docker", "cp", id+":/certs/"+f, filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("copy %s out of tls-certs: %w", f, err)
		}
	}
	ca, err := os.ReadFile(filepath.Join(dir, "muster-ca.pem"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("muster-ca.pem from tls-certs holds no certificate")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "operator.pem"), filepath.Join(dir, "operator-key.pem"))
	if err != nil {
		return err
	}
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	mk := func(timeout time.Duration) *http.Client {
		return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg.Clone(), MaxIdleConnsPerHost: 4}}
	}
	clients.Store(&secureClients{host: mk(3 * time.Second), write: mk(5 * time.Second), roots: pool})
	return nil
}

// checkSecured makes sure the cluster under test is the secured one: every
// node reports auth, TLS with client-auth need, signed replication and
// encrypted gossip; a caller without a client certificate is refused at the
// handshake, and one with a certificate but no credentials gets 401.
func (b *bench) checkSecured(ctx context.Context) error {
	for _, n := range nodes {
		st, err := b.nodeStatus(ctx, n)
		if err != nil {
			return err
		}
		if sec := st.Security; !sec.Auth || !sec.TLS || sec.ClientAuth != "need" || !sec.PeerAuth || !sec.GossipEncrypted {
			return fmt.Errorf("%s is not secured: %+v", n, sec)
		}
	}
	c := clients.Load()
	noCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.roots}}}
	if resp, err := noCert.Get(nodeBase + "/eureka/apps"); err == nil {
		resp.Body.Close()
		return fmt.Errorf("a caller without a client certificate got HTTP %d", resp.StatusCode)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nodeBase+"/eureka/apps", nil)
	if err != nil {
		return err
	}
	resp, err := c.host.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("a caller without credentials got HTTP %d, want 401", resp.StatusCode)
	}
	return nil
}

// authorize adds the admin's credentials to a request for a node.
func authorize(req *http.Request) {
	req.SetBasicAuth(adminUser, adminPassword)
}

// withCredentials puts the admin's credentials into a node URL, for
// `muster health --url` inside a container (it sends them as HTTP Basic and
// never prints them).
func withCredentials(url string) string {
	if rest, ok := strings.CutPrefix(url, "https://"); ok && strings.HasPrefix(url, nodeBase) {
		return "https://" + adminUser + ":" + adminPassword + "@" + rest
	}
	return url
}

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-registry/muster/internal/keystoretest"
)

// keyStoreSets are a node's settings with Spring's keystore keys (the
// fixtures' node.p12 and trust.jks) and client-auth need.
func keyStoreSets(t *testing.T) []string {
	t.Helper()
	ks := keystoretest.Fixtures()
	return ks.ServerSettings(ks.Path("node.p12"))
}

// TestHealth_followsTheNodesKeyStores: `muster health` in the node's
// container (its settings in the environment) gets through client-auth
// need with the node's keystores.
func TestHealth_followsTheNodesKeyStores(t *testing.T) {
	sets := keyStoreSets(t)
	n := startNode(t, "node-a", append(sets, "cluster.enabled=false")...)
	_, port, _ := strings.Cut(n.Addr(), ":")
	t.Setenv("MUSTER_SERVER_PORT", port)
	for _, kv := range sets {
		key, value, _ := strings.Cut(kv, "=")
		t.Setenv("MUSTER_"+strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key)), value)
	}
	// The node's own key is from the keystores' CA, which the trust store
	// holds: health verifies the node and is let in.
	muster(t, false, "health")
	t.Setenv("MUSTER_SERVER_SSL_KEY_STORE_PASSWORD", "hunter2-wrong")
	if _, stderr := muster(t, true, "health"); strings.Contains(stderr, "hunter2") {
		t.Errorf("health with a wrong password shows it: %s", stderr)
	}
}

func TestHealth_followsTheNodesTLS(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	muster(t, false, "tls", "ca", "--out-dir", dir)
	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "node-a", "--dns", "localhost", "--ip", "127.0.0.1")
	muster(t, false, "tls", "ca", "--out-dir", other, "--common-name", "Someone else's CA")
	ca, cert, key := filepath.Join(dir, "muster-ca.pem"), filepath.Join(dir, "node-a.pem"), filepath.Join(dir, "node-a-key.pem")
	n := startNode(t, "node-a", "server.ssl.certificate="+cert, "server.ssl.certificate-private-key="+key,
		"server.ssl.trust-certificate="+ca, "server.ssl.client-auth=need", "cluster.enabled=false")
	_, port, _ := strings.Cut(n.Addr(), ":")
	env := []string{"MUSTER_SERVER_PORT=" + port, "MUSTER_SERVER_SSL_CERTIFICATE=" + cert,
		"MUSTER_SERVER_SSL_CERTIFICATE_PRIVATE_KEY=" + key, "MUSTER_SERVER_SSL_TRUST_CERTIFICATE=" + ca,
		"MUSTER_SERVER_SSL_CLIENT_AUTH=need"}
	def := probeDefaults(env)
	if def.url != "https://127.0.0.1:"+port+"/readyz" || def.cert != cert || def.ca != ca {
		t.Fatalf("probe defaults %+v", def)
	}
	muster(t, false, "health", "--url", def.url, "--ca-cert", def.ca, "--cert", def.cert, "--key", def.key)
	_, stderr := muster(t, true, "health", "--url", def.url, "--ca-cert", filepath.Join(other, "muster-ca.pem"))
	if !strings.Contains(stderr, "certificate") {
		t.Errorf("health against a node of another CA: %s", stderr)
	}
	base := strings.TrimSuffix(def.url, "/readyz")
	out, _ := muster(t, false, "status", "--url", base, "--ca-cert", def.ca, "--cert", def.cert, "--key", def.key)
	if !strings.Contains(out, "node-a") {
		t.Errorf("muster status over mutual TLS: %s", out)
	}
	if _, stderr := muster(t, true, "members", "--url", base, "--ca-cert", def.ca); !strings.Contains(stderr, "members:") {
		t.Errorf("muster members without a client certificate: %s", stderr)
	}
}

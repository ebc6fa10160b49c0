package node

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/keystoretest"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/tlsconfig"
)

// keyStoreSets are a node's settings with Spring's keystore keys, the
// keystore copied to dir so that a test may replace it.
func keyStoreSets(t *testing.T, dir string) []string {
	t.Helper()
	ks := keystoretest.Fixtures()
	copyInto(t, ks.Path("node.p12"), filepath.Join(dir, "node.p12"))
	return ks.ServerSettings(filepath.Join(dir, "node.p12"))
}

func copyInto(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// keyStoreClient dials as the keystore set's client (its own PKCS12,
// verifying the node against the CA), as peers do.
func keyStoreClient(t *testing.T) *http.Client {
	t.Helper()
	ks := keystoretest.Fixtures()
	s, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: ks.Path("client.p12"), Password: keystoretest.StorePassword},
		TrustFile: ks.Path("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialTLSContext: s.DialTLSContext(&net.Dialer{Timeout: time.Second})}}
}

// TestNode_TLS_keyStore: a node configured as a Spring Boot server with a
// PKCS12 keystore, a JKS trust store and client-auth need serves the
// Eureka API over mutual TLS; a client without a certificate of the CA is
// refused; a keystore replaced on disk is served on the next handshakes,
// and one the password does not open changes nothing.
func TestNode_TLS_keyStore(t *testing.T) {
	dir := t.TempDir()
	// Reloads only when the test asks (TestNode_TLS_keyStoreReload has the
	// node's own loop).
	n := startTLSNode(t, "node-a", nil, time.Hour, append(keyStoreSets(t, dir), "cluster.enabled=false")...)
	waitOpened(t, n)
	if !strings.HasPrefix(n.URL(), "https://") {
		t.Errorf("advertised URL %s, want https", n.URL())
	}
	c := keyStoreClient(t)
	base := "https://" + n.Addr()
	if code, body, err := do(t, c, "POST", base+"/eureka/apps/KEYSTORE", instanceBody("KEYSTORE", "k1", 60)); err != nil || code != 204 {
		t.Fatalf("register over mutual TLS: %d %s %v", code, body, err)
	}
	if code, _, err := do(t, c, "GET", base+"/eureka/apps/KEYSTORE/k1", ""); err != nil || code != 200 {
		t.Fatalf("read over mutual TLS: %d %v", code, err)
	}
	_, body, _ := do(t, c, "GET", base+"/admin/status", "")
	var st struct{ Security struct{ TLS bool } }
	json.Unmarshal([]byte(body), &st)
	if !st.Security.TLS {
		t.Errorf("/admin/status: %s", body)
	}
	p := mustPKI(t) // certificates of another CA than the keystores'
	for who, other := range map[string]*http.Client{
		"a client of another CA":         tlsClient(t, keystoretest.Fixtures().Path("ca.pem"), p.cert("client"), p.key("client")),
		"a client without a certificate": tlsClient(t, keystoretest.Fixtures().Path("ca.pem"), "", ""),
	} {
		if code, _, err := do(t, other, "POST", base+"/eureka/apps/EVIL", instanceBody("EVIL", "e1", 60)); err == nil {
			t.Errorf("%s: answered %d, want the handshake refused", who, code)
		}
	}

	servedCN := func() string {
		fresh := keyStoreClient(t)
		resp, err := fresh.Get(base + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if cn := servedCN(); cn != "node" {
		t.Fatalf("serving %s, want node", cn)
	}
	// Another keystore with the same password: key-alias names node, so
	// the client's store is refused…
	copyInto(t, keystoretest.Fixtures().Path("client.p12"), filepath.Join(dir, "node.p12"))
	if _, err := n.tls.Reload(); err == nil || !strings.Contains(err.Error(), `no entry "node"`) {
		t.Errorf("Reload of a store without the alias: %v", err)
	}
	if cn := servedCN(); cn != "node" {
		t.Errorf("after a store without the alias: serving %s, want node still", cn)
	}
	// …and a renewed node keystore (the legacy copy of the same key, other
	// bytes) is taken.
	copyInto(t, keystoretest.Fixtures().Path("legacy.p12"), filepath.Join(dir, "node.p12"))
	if changed, err := n.tls.Reload(); !changed || err != nil {
		t.Errorf("Reload of the renewed keystore: %v, %v", changed, err)
	}
	if cn := servedCN(); cn != "node" {
		t.Errorf("after the renewed keystore: serving %s, want node", cn)
	}
	copyInto(t, keystoretest.Fixtures().Path("node.jks"), filepath.Join(dir, "node.p12"))
	if _, err := n.tls.Reload(); err == nil || !strings.Contains(err.Error(), "key store password") {
		t.Errorf("Reload of a store the password does not open: %v", err)
	}
	if code, _, err := do(t, c, "GET", base+"/eureka/apps/KEYSTORE/k1", ""); err != nil || code != 200 {
		t.Errorf("after a refused store: %d %v", code, err)
	}
}

// TestNode_TLS_keyStoreReload: the node's reload loop serves a keystore
// replaced on disk (no Reload call by the test).
func TestNode_TLS_keyStoreReload(t *testing.T) {
	dir := t.TempDir()
	sets := keyStoreSets(t, dir)
	sets = append(sets[:3:3], "server.ssl.trust-store="+keystoretest.Fixtures().Path("trust.p12"),
		"server.ssl.trust-store-password="+keystoretest.TrustPassword, "server.ssl.client-auth=need", "cluster.enabled=false")
	n := startTLSNode(t, "node-a", nil, 10*time.Millisecond, sets...)
	waitOpened(t, n)
	serial := func() string {
		resp, err := keyStoreClient(t).Get("https://" + n.Addr() + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if got := serial(); got != "node" {
		t.Fatalf("serving %s, want node", got)
	}
	copyInto(t, keystoretest.Fixtures().Path("client.p12"), filepath.Join(dir, "node.p12"))
	testwait.True(t, 30*time.Second, "new handshakes get the replaced keystore's certificate", func() bool { return serial() == "client" })
}

// TestNode_TLS_keyStoreErrors: a wrong password or alias stops start-up
// naming the setting, never showing the password.
func TestNode_TLS_keyStoreErrors(t *testing.T) {
	ks := keystoretest.Fixtures()
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"wrong key store password", []string{"server.ssl.key-store=" + ks.Path("node.p12"), "server.ssl.key-store-password=hunter2-wrong"},
			[]string{"setting server.ssl.key-store-password: key store password of " + ks.Path("node.p12") + ": wrong password"}},
		{"alias absent", []string{"server.ssl.key-store=" + ks.Path("node.jks"), "server.ssl.key-store-password=" + keystoretest.JKSPassword, "server.ssl.key-alias=tomcat"},
			[]string{"setting server.ssl.key-alias: ", `no entry "tomcat"`, "key entries: node; trusted certificates: ca"}},
		{"JKS key password wrong", []string{"server.ssl.key-store=" + ks.Path("node.jks"), "server.ssl.key-store-password=" + keystoretest.JKSPassword, "server.ssl.key-password=hunter2-wrong"},
			[]string{"setting server.ssl.key-password: ", `does not decrypt key "node"`}},
		{"wrong trust store password", []string{"server.ssl.key-store=" + ks.Path("node.p12"), "server.ssl.key-store-password=" + keystoretest.StorePassword,
			"server.ssl.trust-store=" + ks.Path("trust.p12"), "server.ssl.trust-store-password=hunter2-wrong"},
			[]string{"setting server.ssl.trust-store-password: trust store password of " + ks.Path("trust.p12")}},
		{"key store missing", []string{"server.ssl.key-store=" + ks.Path("nope.p12")}, []string{`setting server.ssl.key-store = "` + ks.Path("nope.p12") + `"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, "", nil, append([]string{"server.port=0", "cluster.enabled=false"}, tc.sets...))
			_, err := New(s, testLogger(t))
			if err == nil {
				t.Fatal("the node started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want %q in it", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err = %v shows the password", err)
			}
		})
	}
}

// TestCluster_TLS_keyStores: two nodes on the keystores, client-auth need:
// B copies A's registry at start-up and gets A's changes by replication,
// both over mutual TLS with the identities from the keystores.
func TestCluster_TLS_keyStores(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	a := startTLSNode(t, "node-a", nil, 0, keyStoreSets(t, t.TempDir())...)
	waitOpened(t, a)
	c := keyStoreClient(t)
	if code, _, err := do(t, c, "POST", "https://"+a.Addr()+"/eureka/apps/SYNCED", instanceBody("SYNCED", "s1", 60)); err != nil || code != 204 {
		t.Fatalf("register on A: %d %v", code, err)
	}
	b := startTLSNode(t, "node-b", []string{a.gossipAddr(t)}, 0, keyStoreSets(t, t.TempDir())...)
	waitOpened(t, b)
	if b.syncResult.Instances != 1 || b.syncResult.Source != "node-a" {
		t.Errorf("B's syncUp: %+v, want 1 instance from node-a", b.syncResult)
	}
	if code, _, err := do(t, c, "POST", "https://"+a.Addr()+"/eureka/apps/REPLICATED", instanceBody("REPLICATED", "r1", 60)); err != nil || code != 204 {
		t.Fatalf("register on A: %d %v", code, err)
	}
	testwait.True(t, 30*time.Second, "B holds A's new instance", func() bool {
		code, _, _ := do(t, c, "GET", "https://"+b.Addr()+"/eureka/apps/REPLICATED/r1", "")
		return code == 200
	})
}

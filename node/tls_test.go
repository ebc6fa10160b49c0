package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/tlsconfig"
)

// pki is a CA and certificates as `muster tls` writes them (same files,
// same names): node-a, node-b, node-c and client from one CA, stranger from
// another.
type pki struct{ dir, other string }

func mustPKI(t *testing.T) pki {
	t.Helper()
	p := pki{dir: t.TempDir(), other: t.TempDir()}
	writeCA(t, p.dir, "Muster CA")
	for _, name := range []string{"node-a", "node-b", "node-c", "client"} {
		writeCert(t, p.dir, name, []string{name, "localhost"})
	}
	writeCA(t, p.other, "Someone else's CA")
	writeCert(t, p.other, "stranger", nil)
	return p
}

// writeCA writes muster-ca.pem and muster-ca-key.pem into dir.
func writeCA(t *testing.T, dir, commonName string) {
	t.Helper()
	c, k, err := tlsconfig.NewCA(tlsconfig.CAOptions{CommonName: commonName})
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "muster-ca.pem"), c)
	writePEM(t, filepath.Join(dir, "muster-ca-key.pem"), k)
}

// writeCert writes name.pem and name-key.pem, signed by dir's CA, for
// 127.0.0.1 and dnsNames.
func writeCert(t *testing.T, dir, name string, dnsNames []string) {
	t.Helper()
	caCert, err := os.ReadFile(filepath.Join(dir, "muster-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(dir, "muster-ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: name, DNSNames: dnsNames, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		CACert: caCert, CAKey: caKey})
	if err != nil {
		t.Fatal(err)
	}
	// Key first: a reloading node that sees the new certificate must find
	// its key (the CLI writes both atomically).
	writePEM(t, filepath.Join(dir, name+"-key.pem"), k)
	writePEM(t, filepath.Join(dir, name+".pem"), c)
}

func writePEM(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// clientTLS is the TLS config of a client that trusts ca and, when cert
// is given, presents it.
func clientTLS(ca, cert, key string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pemBytes, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("%s: no PEM certificate", ca)
		}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func (p pki) ca() string              { return filepath.Join(p.dir, "muster-ca.pem") }
func (p pki) cert(name string) string { return filepath.Join(p.dir, name+".pem") }
func (p pki) key(name string) string  { return filepath.Join(p.dir, name+"-key.pem") }
func (p pki) otherCA() string         { return filepath.Join(p.other, "muster-ca.pem") }
func (p pki) strangerPair() (string, string) {
	return filepath.Join(p.other, "stranger.pem"), filepath.Join(p.other, "stranger-key.pem")
}

// tlsSets are the settings of a node named name with client-auth auth.
func (p pki) tlsSets(name, auth string) []string {
	return []string{"server.ssl.certificate=" + p.cert(name), "server.ssl.certificate-private-key=" + p.key(name),
		"server.ssl.trust-certificate=" + p.ca(), "server.ssl.client-auth=" + auth}
}

// client is an HTTPS client that trusts ca and presents cert (none when
// cert is "").
func tlsClient(t *testing.T, ca, cert, key string) *http.Client {
	t.Helper()
	cfg, err := clientTLS(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func do(t *testing.T, c *http.Client, method, url, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// startTLSNode starts a node like startTestNode, with reload the interval
// at which it looks at its TLS files.
func startTLSNode(t *testing.T, name string, join []string, reload time.Duration, sets ...string) *Node {
	t.Helper()
	base := []string{
		"eureka.client.register-with-eureka=false", // tests count the instances they register
		"server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0",
		"eureka.server.registry-sync-retry-wait-ms=200",
	}
	if len(join) > 0 {
		base = append(base, "cluster.join="+strings.Join(join, ","))
	}
	s := mustLoad(t, "", nil, append(base, sets...))
	n, err := New(s, testLogger(t).With().Str("node", name).Logger(), Options{Memberlist: memberlist.DefaultLocalConfig(), TLSReload: reload})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// tlsWaitLimit is generous: -race on a loaded 2-core machine.
const tlsWaitLimit = 30 * time.Second

func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, tlsWaitLimit, what, cond)
}

// waitUntilWhy is waitUntilTrue with cond's last reason in the failure.
func waitUntilWhy(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testwait.For(t, tlsWaitLimit, what, func() error {
		if ok, why := cond(); !ok {
			return errors.New(why)
		}
		return nil
	})
}

// TestCluster_mutualTLS: two nodes with client-auth need, certificates
// from `muster tls`, on loopback. B copies A's registry at start-up
// (syncUp) and then gets A's changes by replication, both over mutual TLS;
// a client certificate from another CA, no certificate, and plain HTTP
// are all refused and change nothing.
func TestCluster_mutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	p := mustPKI(t)
	a := startTLSNode(t, "node-a", nil, 0, p.tlsSets("node-a", "need")...)
	waitOpened(t, a)
	if !strings.HasPrefix(a.URL(), "https://127.0.0.1:") {
		t.Fatalf("advertised URL %s, want https", a.URL())
	}
	client := tlsClient(t, p.ca(), p.cert("client"), p.key("client"))
	base := "https://" + a.Addr() + "/eureka/apps/"
	if code, _, err := do(t, client, "POST", base+"SYNCED", instanceBody("SYNCED", "s1", 60)); err != nil || code != 204 {
		t.Fatalf("register on A over TLS: %d %v", code, err)
	}

	b := startTLSNode(t, "node-b", []string{a.gossipAddr(t)}, 0, p.tlsSets("node-b", "need")...)
	waitOpened(t, b)
	if b.syncResult.Instances != 1 || b.syncResult.Source != "node-a" {
		t.Errorf("B's syncUp: %+v, want 1 instance from node-a", b.syncResult)
	}
	if code, _, err := do(t, client, "POST", base+"REPLICATED", instanceBody("REPLICATED", "r1", 60)); err != nil || code != 204 {
		t.Fatalf("register on A: %d %v", code, err)
	}
	bApps := "https://" + b.Addr() + "/eureka/apps/"
	waitUntilTrue(t, "B holds A's new instance", func() bool {
		code, _, _ := do(t, client, "GET", bApps+"REPLICATED/r1", "")
		return code == 200
	})

	// The node tells the truth about itself: https everywhere.
	_, body, _ := do(t, client, "GET", "https://"+a.Addr()+"/admin/status", "")
	var st struct {
		URL      string
		Peers    []struct{ Name, URL, LastError string }
		Security struct {
			TLS        bool
			ClientAuth string
		}
	}
	json.Unmarshal([]byte(body), &st)
	if st.URL != a.URL() || len(st.Peers) != 1 || !strings.HasPrefix(st.Peers[0].URL, "https://") || st.Peers[0].LastError != "" ||
		!st.Security.TLS || st.Security.ClientAuth != "need" {
		t.Errorf("A's /admin/status: %s", body)
	}

	// Refused: another CA's client certificate, no certificate, plain HTTP.
	scert, skey := p.strangerPair()
	stranger := tlsClient(t, p.ca(), scert, skey)
	anonymous := tlsClient(t, p.ca(), "", "")
	for who, c := range map[string]*http.Client{"stranger": stranger, "anonymous": anonymous} {
		code, _, err := do(t, c, "POST", base+"EVIL", instanceBody("EVIL", "e1", 60))
		if err == nil {
			t.Errorf("%s: answered %d, want the handshake refused", who, code)
		}
	}
	if code, _, err := do(t, &http.Client{Timeout: 5 * time.Second}, "POST", "http://"+a.Addr()+"/eureka/apps/EVIL", instanceBody("EVIL", "e2", 60)); err != nil || code != 400 {
		t.Errorf("plain HTTP: %d %v, want 400", code, err)
	}
	// A node with a certificate from another CA joins the gossip (no
	// gossip key here) but gets nothing into A or B: its batches are
	// refused at the handshake, and A and B refuse to send to it.
	strangerSets := []string{"server.ssl.certificate=" + scert, "server.ssl.certificate-private-key=" + skey,
		"server.ssl.trust-certificate=" + p.ca(), "server.ssl.client-auth=need", "eureka.server.registry-sync-retries=0"}
	s := startTLSNode(t, "stranger", []string{a.gossipAddr(t)}, 0, strangerSets...)
	waitOpened(t, s)
	toStranger := tlsClient(t, p.otherCA(), p.cert("client"), p.key("client"))
	if code, _, err := do(t, toStranger, "POST", "https://"+s.Addr()+"/eureka/apps/EVIL", instanceBody("EVIL", "e3", 60)); err != nil || code != 204 {
		t.Fatalf("register on the stranger node: %d %v", code, err)
	}
	waitUntilWhy(t, "the stranger's batches to A and B fail", func() (bool, string) {
		failing := 0
		peers := s.rep.Peers()
		for _, ps := range peers {
			// With TLS 1.3 the refusal of a client certificate reaches the
			// client after its side of the handshake: a TLS alert or a
			// reset, depending on timing.
			if ps.Failures > 0 && ps.LastError != "" {
				failing++
			}
		}
		return failing == 2, fmt.Sprintf("stranger's peers %+v", peers)
	})
	if code, _, err := do(t, client, "POST", base+"LATER", instanceBody("LATER", "l1", 60)); err != nil || code != 204 {
		t.Fatalf("register on A: %d %v", code, err)
	}
	waitUntilWhy(t, "A's batches to the stranger fail", func() (bool, string) {
		peers := a.rep.Peers()
		for _, ps := range peers {
			if ps.Name == "stranger" {
				// A's batches to B go through meanwhile, so this is the
				// stranger's certificate (or a timeout while verifying it).
				return ps.Failures > 0 && ps.LastError != "", fmt.Sprintf("A's peers %+v", peers)
			}
		}
		return false, fmt.Sprintf("A's peers %+v", peers)
	})
	for _, n := range []*Node{a, b} {
		if code, _, _ := do(t, client, "GET", "https://"+n.Addr()+"/eureka/apps/EVIL", ""); code != 404 {
			t.Errorf("%s holds EVIL (GET answered %d)", n.name, code)
		}
	}
}

// TestNode_TLS_certificateRotation: a node's certificate is replaced on
// disk with `muster tls cert --force`; new handshakes see the new
// certificate, a connection kept alive across the rotation keeps working,
// and a bad pair written afterwards changes nothing.
func TestNode_TLS_certificateRotation(t *testing.T) {
	p := mustPKI(t)
	n := startTLSNode(t, "node-a", nil, 10*time.Millisecond, append(p.tlsSets("node-a", "need"), "cluster.enabled=false")...)
	waitOpened(t, n)
	url := "https://" + n.Addr() + "/eureka/apps"
	cfg, err := clientTLS(p.ca(), p.cert("client"), p.key("client"))
	if err != nil {
		t.Fatal(err)
	}
	keepAlive := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	serial := func(c *http.Client) (string, bool) {
		t.Helper()
		reused := false
		req, _ := http.NewRequest("GET", url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String(), reused
	}
	fresh := func() string {
		s, _ := serial(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg.Clone()}})
		return s
	}
	before, _ := serial(keepAlive)

	writeCert(t, p.dir, "node-a", []string{"localhost"})
	waitUntilTrue(t, "a new handshake sees the rotated certificate", func() bool { return fresh() != before })
	if got, reused := serial(keepAlive); !reused || got != before {
		t.Errorf("kept-alive connection: reused %v, serial %s; want the same connection, old serial %s", reused, got, before)
	}
	rotated := fresh()

	// A key of another certificate: the node keeps serving the rotated one.
	other, _ := os.ReadFile(p.key("node-b"))
	if err := os.WriteFile(p.key("node-a"), other, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := n.tls.Reload(); err == nil {
		t.Error("Reload of a mismatched pair reported no error")
	}
	if got := fresh(); got != rotated {
		t.Errorf("after a bad key: serial %s, want %s", got, rotated)
	}
}

// TestNode_TLS_badFiles: missing or mismatched files stop start-up with an
// error naming the setting.
func TestNode_TLS_badFiles(t *testing.T) {
	p := mustPKI(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"certificate missing", []string{"server.ssl.certificate=" + missing, "server.ssl.certificate-private-key=" + p.key("node-a")}, "server.ssl.certificate"},
		{"key missing", []string{"server.ssl.certificate=" + p.cert("node-a"), "server.ssl.certificate-private-key=" + missing}, "server.ssl.certificate-private-key"},
		{"key of another node", []string{"server.ssl.certificate=" + p.cert("node-a"), "server.ssl.certificate-private-key=" + p.key("node-b")}, "server.ssl.certificate-private-key"},
		{"trust missing", append(p.tlsSets("node-a", "need")[:2], "server.ssl.trust-certificate="+missing), "server.ssl.trust-certificate"},
		{"trust is a key", append(p.tlsSets("node-a", "want")[:2], "server.ssl.trust-certificate="+p.key("node-a"), "server.ssl.client-auth=want"), "server.ssl.trust-certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, "", nil, append([]string{"server.port=0", "cluster.enabled=false"}, tc.sets...))
			_, err := New(s, testLogger(t))
			if err == nil || !strings.Contains(err.Error(), "setting "+tc.want+" ") {
				t.Errorf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestCluster_secretKeys: mid-rotation (README's step 2 under way), a node
// that sends with the new key and still accepts the old one and a node that
// sends with the old key and already accepts the new one join and
// replicate. (cluster's keyring test covers the whole rotation.)
func TestCluster_secretKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	oldKey := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 32)))
	newKey := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("n", 32)))
	a := startTLSNode(t, "node-a", nil, 0, "cluster.secret-key="+oldKey, "cluster.secret-keys="+newKey)
	waitOpened(t, a)
	b := startTLSNode(t, "node-b", []string{a.gossipAddr(t)}, 0, "cluster.secret-key="+newKey, "cluster.secret-keys="+oldKey)
	waitOpened(t, b)
	waitUntilTrue(t, "A and B see each other", func() bool { return len(a.currentPeers()) == 1 && len(b.currentPeers()) == 1 })
	if code := call(t, "POST", "http://"+b.Addr()+"/eureka/apps/KEYED", instanceBody("KEYED", "k1", 60)); code != 204 {
		t.Fatalf("register on B: %d", code)
	}
	waitUntilTrue(t, "A holds B's instance", func() bool {
		code, _, _ := httpGet("http://" + a.Addr() + "/eureka/apps/KEYED/k1")
		return code == 200
	})
}

func TestSelfInstance_TLS(t *testing.T) {
	s := mustLoad(t, "", nil, []string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem"})
	in := selfInstance(s, "node-a", "10.0.0.5", 8761, time.Now())
	if in.Port.Enabled || !in.SecurePort.Enabled || in.SecurePort.Number != 8761 || !strings.HasPrefix(in.HomePageURL, "https://node-a:8761") {
		t.Errorf("self-registration over TLS: port %+v, secure port %+v, home %s", in.Port, in.SecurePort, in.HomePageURL)
	}
}

// With client-auth need only holders of the CA's certificates get in, so
// the node does not call itself open even without credentials.
func TestSecurity_Open_clientAuthNeed(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		open bool
	}{
		{nil, true},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem"}, true},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem", "server.ssl.trust-certificate=/ca.pem", "server.ssl.client-auth=want"}, true},
		{[]string{"server.ssl.certificate=/c.pem", "server.ssl.certificate-private-key=/k.pem", "server.ssl.trust-certificate=/ca.pem", "server.ssl.client-auth=need"}, false},
	} {
		s := mustLoad(t, "", nil, tc.sets)
		rep := (&nodeSecurity{}).report(s)
		if rep.Open() != tc.open || rep.TLS != s.TLSOn() {
			t.Errorf("%v: report %+v, Open %v, want %v", tc.sets, rep, rep.Open(), tc.open)
		}
	}
}

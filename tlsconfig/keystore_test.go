package tlsconfig_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-registry/muster/internal/keystoretest"
	"github.com/muster-registry/muster/tlsconfig"
)

// TestKeyStore runs every keystore test on the committed keystores and on
// a set keytool makes now (where it is installed): Java 17 PKCS12, JKS
// with a key password of its own, Java 8's legacy PKCS12, trust stores of
// both types.
func TestKeyStore(t *testing.T) {
	for name, set := range keystoretest.Sets(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("handshakes", func(t *testing.T) { testKeyStoreHandshakes(t, set) })
			t.Run("errors", func(t *testing.T) { testKeyStoreErrors(t, set) })
			t.Run("reload", func(t *testing.T) { testKeyStoreReload(t, set) })
		})
	}
}

func nodeStore(set keystoretest.Set) tlsconfig.KeyStore {
	return tlsconfig.KeyStore{Path: set.Path("node.p12"), Password: keystoretest.StorePassword}
}

func clientStore(t *testing.T, set keystoretest.Set) *tlsconfig.Store {
	t.Helper()
	s, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("client.p12"), Password: keystoretest.StorePassword},
		TrustFile: set.Path("ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testKeyStoreHandshakes serves each keystore with client-auth need and a
// trust store: a client with a certificate of the CA (from its own PKCS12)
// gets in and is seen by name, one of another CA and one without a
// certificate are refused.
func testKeyStoreHandshakes(t *testing.T, set keystoretest.Set) {
	ofCA := clientStore(t, set)
	stranger := mustLoad(t, mustFiles(t, mustCA(t, "Other"), "stranger"), tlsconfig.ClientAuthNone)
	trustP12 := tlsconfig.KeyStore{Path: set.Path("trust.p12"), Password: keystoretest.TrustPassword}
	trustJKS := tlsconfig.KeyStore{Path: set.Path("trust.jks"), Password: keystoretest.TrustPassword, Type: "jks"}
	for _, tc := range []struct {
		name string
		cfg  tlsconfig.Config
	}{
		{"PKCS12 with a PKCS12 trust store", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: trustP12}},
		{"PKCS12 typed, alias in another case", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: "file:" + set.Path("node.p12"), Password: keystoretest.StorePassword, Type: "pkcs12"},
			KeyAlias: "NODE", TrustStore: trustJKS}},
		{"PKCS12 as its own trust store", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: nodeStore(set)}},
		{"JKS with a key password", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("node.jks"), Password: keystoretest.JKSPassword, Type: "JKS"},
			KeyAlias: "node", KeyPassword: keystoretest.JKSKeyPassword, TrustStore: trustJKS}},
		{"JKS typed PKCS12 (Java reads either)", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("node.jks"), Password: keystoretest.JKSPassword, Type: "PKCS12"},
			KeyPassword: keystoretest.JKSKeyPassword, TrustStore: trustP12}},
		{"JKS trust store without a password", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: tlsconfig.KeyStore{Path: set.Path("trust.jks")}}},
		{"legacy PKCS12 (RC2, 3DES)", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("legacy.p12"), Password: keystoretest.StorePassword}, TrustFile: set.Path("ca.pem")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ClientAuth = tlsconfig.ClientAuthNeed
			s, err := tlsconfig.Load(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if cn := s.Leaf().Subject.CommonName; cn != "node" {
				t.Errorf("serving %q, want node", cn)
			}
			url := serve(t, s)
			if got, err := get(client(ofCA), url); err != nil || got != "client" {
				t.Errorf("client of the CA: %q, %v; want it seen as client", got, err)
			}
			if got, err := get(client(stranger), url); err == nil {
				t.Errorf("client of another CA: answered %q, want the handshake refused", got)
			}
			anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: ofCA.ClientConfig("")}}
			anonymous.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = nil
			if got, err := get(anonymous, url); err == nil {
				t.Errorf("client without a certificate: answered %q, want the handshake refused", got)
			}
			// The chain served verifies against the CA: Check has nothing
			// to say.
			if w := s.Check(s.Leaf().NotBefore.AddDate(1, 0, 0)); len(w) != 0 {
				t.Errorf("Check = %q", w)
			}
		})
	}
}

func testKeyStoreErrors(t *testing.T, set keystoretest.Set) {
	junk := filepath.Join(t.TempDir(), "junk.p12")
	mustWrite(t, junk, []byte("\x30 not really a keystore"))
	jks := func(pw string) tlsconfig.KeyStore {
		return tlsconfig.KeyStore{Path: set.Path("node.jks"), Password: pw}
	}
	for _, tc := range []struct {
		name  string
		cfg   tlsconfig.Config
		want  tlsconfig.File
		texts []string
	}{
		{"PKCS12 wrong password", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("node.p12"), Password: "hunter2-wrong"}}, tlsconfig.FileKeyStorePassword, []string{"wrong password"}},
		{"PKCS12 no password", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("node.p12")}}, tlsconfig.FileKeyStorePassword, []string{"wrong password"}},
		{"JKS wrong password", tlsconfig.Config{KeyStore: jks("hunter2-wrong"), KeyPassword: keystoretest.JKSKeyPassword}, tlsconfig.FileKeyStorePassword, []string{"wrong password"}},
		{"JKS key password missing", tlsconfig.Config{KeyStore: jks(keystoretest.JKSPassword)}, tlsconfig.FileKeyPassword, []string{"not set", `key "node"`}},
		{"JKS key password wrong", tlsconfig.Config{KeyStore: jks(keystoretest.JKSPassword), KeyPassword: "hunter2-wrong"}, tlsconfig.FileKeyPassword, []string{`does not decrypt key "node"`}},
		{"PKCS12 alias absent", tlsconfig.Config{KeyStore: nodeStore(set), KeyAlias: "tomcat"}, tlsconfig.FileKeyAlias, []string{`no entry "tomcat"`, "key entries: node"}},
		{"JKS alias absent", tlsconfig.Config{KeyStore: jks(keystoretest.JKSPassword), KeyPassword: keystoretest.JKSKeyPassword, KeyAlias: "tomcat"}, tlsconfig.FileKeyAlias, []string{`no entry "tomcat"`, "key entries: node; trusted certificates: ca"}},
		{"JKS alias of a trusted certificate", tlsconfig.Config{KeyStore: jks(keystoretest.JKSPassword), KeyAlias: "ca"}, tlsconfig.FileKeyAlias, []string{`"ca" is a trusted certificate`}},
		{"PKCS12 with two keys", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("twokeys.p12"), Password: keystoretest.StorePassword}}, tlsconfig.FileKeyStore, []string{"several private keys (client, node)", "-srcalias"}},
		{"PKCS12 with two keys, alias absent", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("twokeys.p12"), Password: keystoretest.StorePassword}, KeyAlias: "x"}, tlsconfig.FileKeyStore, []string{"several private keys (client, node)"}},
		{"trust store as key store", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("trust.jks"), Password: keystoretest.TrustPassword}}, tlsconfig.FileKeyAlias, []string{"no private key", "trusted certificates: ca"}},
		{"PEM as key store", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("ca.pem"), Password: "x"}}, tlsconfig.FileKeyStore, []string{"a PEM file", "server.ssl.certificate"}},
		{"junk as key store", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: junk, Password: "x"}}, tlsconfig.FileKeyStore, []string{"not a PKCS12 keystore"}},
		{"missing key store", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("nope.p12")}}, tlsconfig.FileKeyStore, []string{"no such file"}},
		{"JCEKS type", tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: set.Path("node.p12"), Type: "JCEKS"}}, tlsconfig.FileKeyStore, []string{`"JCEKS": want PKCS12 or JKS`, "keytool -importkeystore"}},
		{"key store and PEM", tlsconfig.Config{KeyStore: nodeStore(set), CertFile: set.Path("ca.pem")}, tlsconfig.FileKeyStore, []string{"one or the other"}},
		{"trust store and PEM", tlsconfig.Config{KeyStore: nodeStore(set), TrustFile: set.Path("ca.pem"), TrustStore: nodeStore(set)}, tlsconfig.FileTrustStore, []string{"one or the other"}},
		{"trust store wrong password", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: tlsconfig.KeyStore{Path: set.Path("trust.p12"), Password: "hunter2-wrong"}}, tlsconfig.FileTrustStorePassword, []string{"wrong password"}},
		{"JKS trust store wrong password", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: tlsconfig.KeyStore{Path: set.Path("trust.jks"), Password: "hunter2-wrong"}}, tlsconfig.FileTrustStorePassword, []string{"wrong password"}},
		{"trust store is PEM", tlsconfig.Config{KeyStore: nodeStore(set), TrustStore: tlsconfig.KeyStore{Path: set.Path("ca.pem")}}, tlsconfig.FileTrustStore, []string{"a PEM file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconfig.Load(tc.cfg)
			var fe *tlsconfig.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if fe.File != tc.want {
				t.Errorf("err = %v: blames the %s, want the %s", err, fe.File, tc.want)
			}
			for _, text := range tc.texts {
				if !strings.Contains(err.Error(), text) {
					t.Errorf("err = %v, want %q in it", err, text)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err = %v shows the password", err)
			}
		})
	}
}

// testKeyStoreReload replaces the keystore on disk while serving: new
// handshakes get the new certificate; a store that no longer opens with
// the password keeps the previous one.
func testKeyStoreReload(t *testing.T, set keystoretest.Set) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.p12")
	copyFile(t, set.Path("node.p12"), path)
	s, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: path, Password: keystoretest.StorePassword},
		TrustStore: tlsconfig.KeyStore{Path: set.Path("trust.p12"), Password: keystoretest.TrustPassword}, ClientAuth: tlsconfig.ClientAuthNeed})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, s)
	ofCA := clientStore(t, set)
	servedCN := func() string {
		t.Helper()
		resp, err := client(ofCA).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if cn := servedCN(); cn != "node" {
		t.Fatalf("serving %s, want node", cn)
	}
	copyFile(t, set.Path("client.p12"), path) // same password, another key
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("Reload after the store changed = %v, %v", changed, err)
	}
	if cn := servedCN(); cn != "client" {
		t.Errorf("after the reload serving %s, want client", cn)
	}
	copyFile(t, set.Path("node.jks"), path) // another password
	if _, err := s.Reload(); err == nil || !strings.Contains(err.Error(), "key store password") {
		t.Errorf("Reload of a store the password does not open: %v", err)
	}
	if cn := servedCN(); cn != "client" {
		t.Errorf("after a refused store serving %s, want client still", cn)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, to, b)
}

// TestKeyStore_openssl: a PKCS12 made from `muster tls` PEM files with
// openssl, the other way in, loads with its alias.
func TestKeyStore_openssl(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skipf("openssl not found: %v", err)
	}
	ca := mustCA(t, "CA")
	f := mustFiles(t, ca, "node")
	p12 := filepath.Join(f.dir, "node.p12")
	out, err := exec.Command("openssl", "pkcs12", "-export", "-in", f.cert, "-inkey", f.key, "-certfile", f.trust,
		"-name", "muster", "-out", p12, "-passout", "pass:secret").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	s, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: p12, Password: "secret"}, KeyAlias: "muster", TrustFile: f.trust})
	if err != nil {
		t.Fatal(err)
	}
	if s.Leaf().Subject.CommonName != "node" {
		t.Errorf("leaf %s", s.Leaf().Subject)
	}
	if _, err := tlsconfig.Load(tlsconfig.Config{KeyStore: tlsconfig.KeyStore{Path: p12, Password: "secret"}, KeyAlias: "node"}); err == nil ||
		!strings.Contains(err.Error(), "key entries: muster") {
		t.Errorf("alias node in openssl's store: %v", err)
	}
}

func TestParseStoreType(t *testing.T) {
	for in, want := range map[string]string{"": "", "pkcs12": "PKCS12", " PKCS12 ": "PKCS12", "jks": "JKS", "JKS": "JKS"} {
		if got, err := tlsconfig.ParseStoreType(in); err != nil || got != want {
			t.Errorf("ParseStoreType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"JCEKS", "PKCS11", "BCFKS", "pem"} {
		if _, err := tlsconfig.ParseStoreType(in); err == nil {
			t.Errorf("ParseStoreType(%q) accepted", in)
		}
	}
}

// ReadTrustStore reads what a trust store vouches for (the CA, in
// trust.p12 and trust.jks), with a file: prefix too, and says which file
// and what is wrong without the password.
func TestReadTrustStore(t *testing.T) {
	for name, set := range keystoretest.Sets(t) {
		t.Run(name, func(t *testing.T) {
			caBlock, _ := pem.Decode(mustRead(t, set.Path("ca.pem")))
			if caBlock == nil {
				t.Fatal("ca.pem holds no PEM block")
			}
			for _, file := range []string{"trust.p12", "file:" + set.Path("trust.jks")} {
				path := file
				if !strings.HasPrefix(file, "file:") {
					path = set.Path(file)
				}
				certs, err := tlsconfig.ReadTrustStore(tlsconfig.KeyStore{Path: path, Password: keystoretest.TrustPassword})
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				if len(certs) != 1 || !bytes.Equal(certs[0].Raw, caBlock.Bytes) {
					t.Fatalf("%s: %d certificates, want the CA only", file, len(certs))
				}
			}
			const wrong = "hunter2-wrong"
			_, err := tlsconfig.ReadTrustStore(tlsconfig.KeyStore{Path: set.Path("trust.p12"), Password: wrong})
			var fe *tlsconfig.FileError
			if !errors.As(err, &fe) || fe.File != tlsconfig.FileTrustStorePassword || strings.Contains(err.Error(), wrong) {
				t.Fatalf("wrong password: %v", err)
			}
			_, err = tlsconfig.ReadTrustStore(tlsconfig.KeyStore{Path: set.Path("missing.p12")})
			if !errors.As(err, &fe) || fe.File != tlsconfig.FileTrustStore || !strings.Contains(err.Error(), "missing.p12") {
				t.Fatalf("missing file: %v", err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

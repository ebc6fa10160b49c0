package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/keystoretest"
)

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// getTLS is GET url over TLS trusting caFile only.
func getTLS(t *testing.T, url, caFile string) int {
	t.Helper()
	pemCA, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A Spring file's server.ssl.key-store: classpath:server.jks, with the
// store in resources/ beside the file as a deployed Spring project keeps
// it: config --check opens it (with its passwords) and passes, serve
// serves TLS with it; the CA bundle comes from classpath: too.
func TestServe_classpathKeyStore(t *testing.T) {
	ks := keystoretest.Fixtures()
	dir := t.TempDir()
	copyFile(t, ks.Path("node.jks"), filepath.Join(dir, "resources", "server.jks"))
	copyFile(t, ks.Path("ca.pem"), filepath.Join(dir, "config", "ca.pem"))
	file := filepath.Join(dir, "application.yml")
	spring := `server:
  port: 0
  ssl:
    key-store: classpath:server.jks
    key-store-password: ` + keystoretest.JKSPassword + `
    key-password: ` + keystoretest.JKSKeyPassword + `
    key-store-type: JKS
    key-alias: node
    trust-certificate: classpath:/ca.pem
cluster:
  enabled: false
`
	if err := os.WriteFile(file, []byte(spring), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := muster(t, false, "config", "--check", "--config", file)
	if want := filepath.Join(dir, "resources", "server.jks"); !strings.Contains(out, want) || !strings.Contains(out, "classpath:server.jks is "+want) {
		t.Errorf("config --check does not show where classpath:server.jks was found (%s):\n%s", want, out)
	}
	if strings.Contains(out, keystoretest.JKSPassword) {
		t.Errorf("config --check shows the store's password:\n%s", out)
	}

	n := serveArgs(t, "tls", "--config", file)
	if code := getTLS(t, "https://"+n.Addr()+"/eureka/apps", ks.Path("ca.pem")); code != 200 {
		t.Errorf("GET /eureka/apps over TLS from the classpath key store: %d", code)
	}

	// A wrong key password: serve cannot open the key, and config --check,
	// which opens the store as serve does, fails too (it used to pass).
	bad := strings.Replace(spring, "key-password: "+keystoretest.JKSKeyPassword, "key-password: hunter2-wrong", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = muster(t, true, "config", "--check", "--config", file)
	if !strings.Contains(out, "server.ssl.key-password") || strings.Contains(out, "hunter2") {
		t.Errorf("config --check with a wrong key password:\n%s", out)
	}
	_, serr := muster(t, true, "serve", "--config", file, "--server.address=127.0.0.1")
	if !strings.Contains(serr, "server.ssl.key-password") {
		t.Errorf("serve with a wrong key password: %s", serr)
	}
}

// classpath: that finds nothing: config --check and serve refuse it alike,
// naming every place searched; muster.classpath adds a directory, searched
// first.
func TestConfigCheck_classpathNotFound(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "application.yml")
	if err := os.WriteFile(file, []byte("server:\n  ssl:\n    key-store: classpath:keystore.p12\n    key-store-password: "+keystoretest.StorePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := muster(t, true, "config", "--check", "--config", file)
	for _, place := range []string{filepath.Join(dir, "keystore.p12"), filepath.Join(dir, "resources", "keystore.p12"), filepath.Join(dir, "config", "keystore.p12"), "muster.classpath"} {
		if !strings.Contains(out, place) {
			t.Errorf("config --check's error does not name %s:\n%s", place, out)
		}
	}
	if !strings.Contains(out, "application.yml:3") {
		t.Errorf("config --check's error does not name the line:\n%s", out)
	}
	_, serr := muster(t, true, "serve", "--config", file)
	if !strings.Contains(serr, filepath.Join(dir, "resources", "keystore.p12")) {
		t.Errorf("serve's error does not name the places searched: %s", serr)
	}
	// TLS off: Spring opens no store, and the missing one is no error.
	muster(t, false, "config", "--check", "--config", file, "--server.ssl.enabled=false")

	ks := keystoretest.Fixtures()
	copyFile(t, ks.Path("node.p12"), filepath.Join(dir, "certs", "keystore.p12"))
	out, _ = muster(t, false, "config", "--check", "--config", file, "--muster.classpath=certs")
	if !strings.Contains(out, filepath.Join(dir, "certs", "keystore.p12")) {
		t.Errorf("muster.classpath=certs not searched:\n%s", out)
	}
}

// file: and PEM files: a Spring Boot 2.7+ PEM pair given as file: URLs
// and a plain path.
func TestServe_filePrefixPEM(t *testing.T) {
	dir := t.TempDir()
	muster(t, false, "tls", "ca", "--out-dir", dir)
	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "node-a", "--dns", "localhost", "--ip", "127.0.0.1")
	n := serveArgs(t, "pem", "--server.port=0", "--cluster.enabled=false",
		"--server.ssl.certificate=file://"+filepath.Join(dir, "node-a.pem"),
		"--server.ssl.certificate-private-key=file:"+filepath.Join(dir, "node-a-key.pem"))
	if code := getTLS(t, "https://"+n.Addr()+"/readyz", filepath.Join(dir, "muster-ca.pem")); code != 200 {
		t.Errorf("GET /readyz over TLS from file: PEMs: %d", code)
	}
	out, _ := muster(t, true, "config", "--check", "--server.ssl.certificate=file:"+filepath.Join(dir, "nope.pem"),
		"--server.ssl.certificate-private-key="+filepath.Join(dir, "node-a-key.pem"))
	if !strings.Contains(out, "server.ssl.certificate") || !strings.Contains(out, "nope.pem") {
		t.Errorf("config --check with a missing PEM:\n%s", out)
	}
}

// eureka.server.remote-region-trust-store is opened by config --check as
// the node opens it at start: a good PKCS12 or JKS store with its password
// passes; a wrong password or a missing file fails the check naming the
// setting, never the password; a store without any remote region is a
// warning (it is not used).
func TestConfigCheck_remoteRegionTrustStore(t *testing.T) {
	ks := keystoretest.Fixtures()
	base := []string{"config", "--check", "--set", "cluster.enabled=false",
		"--set", "eureka.server.remote-region-urls-with-name.b=https://127.0.0.1:1/eureka/"}
	for _, store := range []string{ks.Path("trust.p12"), "file:" + ks.Path("trust.jks"), ks.Path("ca.pem")} {
		out, _ := muster(t, false, append(base, "--set", "eureka.server.remote-region-trust-store="+store,
			"--set", "eureka.server.remote-region-trust-store-password="+keystoretest.TrustPassword)...)
		if strings.Contains(out, keystoretest.TrustPassword) {
			t.Errorf("config --check shows the trust store's password:\n%s", out)
		}
	}
	const wrong = "hunter2-wrong"
	out, _ := muster(t, true, append(base, "--set", "eureka.server.remote-region-trust-store="+ks.Path("trust.p12"),
		"--set", "eureka.server.remote-region-trust-store-password="+wrong)...)
	if !strings.Contains(out, "error:   setting eureka.server.remote-region-trust-store") || strings.Contains(out, wrong) {
		t.Errorf("a wrong trust store password: the check must fail naming the setting, not the password:\n%s", out)
	}
	missing := filepath.Join(t.TempDir(), "nope.jks")
	out, _ = muster(t, true, append(base, "--set", "eureka.server.remote-region-trust-store="+missing)...)
	if !strings.Contains(out, "eureka.server.remote-region-trust-store") || !strings.Contains(out, "nope.jks") {
		t.Errorf("a missing trust store: the check must fail naming the setting and the file:\n%s", out)
	}
	out, _ = muster(t, false, "config", "--check", "--set", "cluster.enabled=false",
		"--set", "eureka.server.remote-region-trust-store="+ks.Path("trust.p12"),
		"--set", "eureka.server.remote-region-trust-store-password="+keystoretest.TrustPassword)
	if !strings.Contains(out, "warning: eureka.server.remote-region-trust-store is set but no remote region is") {
		t.Errorf("a trust store without remote regions: no warning:\n%s", out)
	}
}

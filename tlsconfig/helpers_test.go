package tlsconfig_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-registry/muster/tlsconfig"
)

// testCA is a CA for tests, with the PEM NewCA made.
type testCA struct {
	cert, key []byte
}

func mustCA(tb testing.TB, cn string) testCA {
	tb.Helper()
	c, k, err := tlsconfig.NewCA(tlsconfig.CAOptions{CommonName: cn})
	if err != nil {
		tb.Fatal(err)
	}
	return testCA{c, k}
}

// issue makes a certificate for 127.0.0.1 and localhost.
func (ca testCA) issue(tb testing.TB, name string) (cert, key []byte) {
	tb.Helper()
	c, k, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: name, DNSNames: []string{"localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, CACert: ca.cert, CAKey: ca.key})
	if err != nil {
		tb.Fatal(err)
	}
	return c, k
}

// files are a node's PEM files in a temporary directory.
type files struct {
	dir, cert, key, trust string
}

func mustFiles(tb testing.TB, ca testCA, name string) files {
	tb.Helper()
	dir := tb.TempDir()
	f := files{dir: dir, cert: filepath.Join(dir, "node.pem"), key: filepath.Join(dir, "node-key.pem"), trust: filepath.Join(dir, "ca.pem")}
	c, k := ca.issue(tb, name)
	mustWrite(tb, f.cert, c)
	mustWrite(tb, f.key, k)
	mustWrite(tb, f.trust, ca.cert)
	return f
}

func mustWrite(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func mustLoad(tb testing.TB, f files, auth tlsconfig.ClientAuth) *tlsconfig.Store {
	tb.Helper()
	s, err := tlsconfig.Load(tlsconfig.Config{CertFile: f.cert, KeyFile: f.key, TrustFile: f.trust, ClientAuth: auth})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

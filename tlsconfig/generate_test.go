package tlsconfig_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/tlsconfig"
)

func parse(tb testing.TB, certPEM []byte) *x509.Certificate {
	tb.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		tb.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestNewCA_selfSignedP256(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, k, err := tlsconfig.NewCA(tlsconfig.CAOptions{CommonName: "Test CA", Validity: 48 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ca := parse(t, c)
	if !ca.IsCA || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("IsCA %v, MaxPathLenZero %v, usage %b: want a CA that signs leaves only", ca.IsCA, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if ca.Subject.CommonName != "Test CA" {
		t.Errorf("CN = %q, want Test CA", ca.Subject.CommonName)
	}
	if got := ca.NotAfter.Sub(now); got != 48*time.Hour {
		t.Errorf("validity = %s, want 48h", got)
	}
	pub, ok := ca.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", ca.PublicKey)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if !strings.Contains(string(k), "BEGIN PRIVATE KEY") {
		t.Errorf("key is not PKCS#8 PEM: %.40s", k)
	}
}

func TestNewCert_signedForServerAndClient(t *testing.T) {
	ca := mustCA(t, "Test CA")
	c, _, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "node-a", DNSNames: []string{"node-a", "node-a.example"},
		IPs: []net.IP{net.ParseIP("10.0.0.5"), net.ParseIP("127.0.0.1")}, CACert: ca.cert, CAKey: ca.key})
	if err != nil {
		t.Fatal(err)
	}
	leaf := parse(t, c)
	roots := x509.NewCertPool()
	roots.AddCert(parse(t, ca.cert))
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node-a.example", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verify for usage %v: %v", usage, err)
		}
	}
	if err := leaf.VerifyHostname("10.0.0.5"); err != nil {
		t.Errorf("IP SAN: %v", err)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	other := mustCA(t, "Other CA")
	foreign := x509.NewCertPool()
	foreign.AddCert(parse(t, other.cert))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: foreign}); err == nil {
		t.Error("verified against another CA")
	}
}

func TestNewCert_nameIsTheDefaultSAN(t *testing.T) {
	ca := mustCA(t, "Test CA")
	for _, tc := range []struct {
		name     string
		wantDNS  []string
		wantIPv4 string
	}{{"node-b", []string{"node-b"}, ""}, {"10.1.2.3", nil, "10.1.2.3"}} {
		c, _, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: tc.name, CACert: ca.cert, CAKey: ca.key})
		if err != nil {
			t.Fatal(err)
		}
		leaf := parse(t, c)
		if !slices.Equal(leaf.DNSNames, tc.wantDNS) {
			t.Errorf("%s: DNS SANs = %v, want %v", tc.name, leaf.DNSNames, tc.wantDNS)
		}
		if tc.wantIPv4 != "" && (len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != tc.wantIPv4) {
			t.Errorf("%s: IP SANs = %v, want %s", tc.name, leaf.IPAddresses, tc.wantIPv4)
		}
	}
}

func TestNewCert_refusesAKeyOfAnotherCA(t *testing.T) {
	ca, other := mustCA(t, "A"), mustCA(t, "B")
	if _, _, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "x", CACert: ca.cert, CAKey: other.key}); err == nil ||
		!strings.Contains(err.Error(), "does not belong") {
		t.Errorf("err = %v, want the CA key refused", err)
	}
	leaf, leafKey := ca.issue(t, "leaf")
	if _, _, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "x", CACert: leaf, CAKey: leafKey}); err == nil {
		t.Error("a leaf certificate signed a certificate")
	}
}

func TestNewCert_doesNotOutliveItsCA(t *testing.T) {
	now := time.Now()
	c, k, _ := tlsconfig.NewCA(tlsconfig.CAOptions{Validity: 24 * time.Hour, Now: now})
	cert, _, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: "x", Validity: 365 * 24 * time.Hour, Now: now, CACert: c, CAKey: k})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := parse(t, cert).NotAfter, parse(t, c).NotAfter; got.After(want) {
		t.Errorf("NotAfter %s is after the CA's %s", got, want)
	}
}

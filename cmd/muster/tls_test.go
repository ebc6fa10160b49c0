package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// muster runs the command line as a user would and returns stdout and
// stderr; it fails the test on a non-zero exit unless wantFail.
func muster(t *testing.T, wantFail bool, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	if (code != 0) != wantFail {
		t.Fatalf("muster %s: exit %d (want failure %v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantFail, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestTLSCmd_caAndCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	muster(t, false, "tls", "ca", "--out-dir", dir, "--days", "30", "--common-name", "Test Cluster CA")
	ca := readCert(t, filepath.Join(dir, "muster-ca.pem"))
	if !ca.IsCA || ca.Subject.CommonName != "Test Cluster CA" {
		t.Errorf("CA: IsCA %v, CN %q", ca.IsCA, ca.Subject.CommonName)
	}
	if m := mode(t, filepath.Join(dir, "muster-ca-key.pem")); m != 0o600 {
		t.Errorf("CA key mode %o, want 600", m)
	}

	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "node-a", "--dns", "node-a", "--dns", "node-a.internal", "--ip", "10.0.0.5", "--ip", "127.0.0.1")
	leaf := readCert(t, filepath.Join(dir, "node-a.pem"))
	if m := mode(t, filepath.Join(dir, "node-a-key.pem")); m != 0o600 {
		t.Errorf("node key mode %o, want 600", m)
	}
	if !slices.Equal(leaf.DNSNames, []string{"node-a", "node-a.internal"}) || len(leaf.IPAddresses) != 2 || leaf.IPAddresses[0].String() != "10.0.0.5" {
		t.Errorf("SANs: DNS %v, IP %v", leaf.DNSNames, leaf.IPAddresses)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node-a.internal", KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("usage %v: %v", u, err)
		}
	}

	// Several names at once: each its own pair, reachable by its name.
	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "node-b", "--name", "node-c", "--dns", "localhost")
	for _, n := range []string{"node-b", "node-c"} {
		c := readCert(t, filepath.Join(dir, n+".pem"))
		if c.Subject.CommonName != n || !slices.Equal(c.DNSNames, []string{n, "localhost"}) {
			t.Errorf("%s: CN %q, DNS %v", n, c.Subject.CommonName, c.DNSNames)
		}
	}
}

func TestTLSCmd_refusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	muster(t, false, "tls", "ca", "--out-dir", dir)
	before, _ := os.ReadFile(filepath.Join(dir, "muster-ca-key.pem"))
	_, stderr := muster(t, true, "tls", "ca", "--out-dir", dir)
	if !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--force") {
		t.Errorf("stderr = %q, want a refusal that names --force", stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "muster-ca-key.pem")); !bytes.Equal(before, after) {
		t.Error("the CA key changed although the command was refused")
	}
	out, _ := muster(t, false, "tls", "ca", "--out-dir", dir, "--if-missing")
	if !strings.Contains(out, "kept") {
		t.Errorf("--if-missing: %q", out)
	}
	muster(t, false, "tls", "ca", "--out-dir", dir, "--force")
	if after, _ := os.ReadFile(filepath.Join(dir, "muster-ca-key.pem")); bytes.Equal(before, after) {
		t.Error("--force did not write a new CA")
	}

	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "n1")
	muster(t, true, "tls", "cert", "--out-dir", dir, "--name", "n1")
	muster(t, false, "tls", "cert", "--out-dir", dir, "--name", "n1", "--if-missing")
	// Half a pair is not "all the files exist": --if-missing refuses.
	os.Remove(filepath.Join(dir, "n1-key.pem"))
	muster(t, true, "tls", "cert", "--out-dir", dir, "--name", "n1", "--if-missing")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestTLSCmd_badInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tls"}, "want ca or cert"},
		{[]string{"tls", "csr"}, "unknown command"},
		{[]string{"tls", "cert", "--out-dir", dir, "--name", "x"}, "muster tls ca"},
		{[]string{"tls", "cert", "--out-dir", dir}, "--name is required"},
		{[]string{"tls", "cert", "--out-dir", dir, "--name", "x", "--ip", "10.0.0.300"}, "not an IP address"},
		{[]string{"tls", "cert", "--out-dir", dir, "--name", "../x"}, "cannot be a file name"},
		{[]string{"tls", "ca", "--out-dir", dir, "--days", "0"}, "at least 1"},
	} {
		_, stderr := muster(t, true, tc.args...)
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("muster %s: stderr %q, want %q", strings.Join(tc.args, " "), stderr, tc.want)
		}
	}
	other := t.TempDir()
	muster(t, false, "tls", "ca", "--out-dir", dir)
	muster(t, false, "tls", "ca", "--out-dir", other)
	_, stderr := muster(t, true, "tls", "cert", "--out-dir", dir, "--name", "x", "--ca-key", filepath.Join(other, "muster-ca-key.pem"))
	if !strings.Contains(stderr, "does not belong") {
		t.Errorf("CA key of another CA: %q", stderr)
	}
}

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeAPIServer answers GET /api/v1/nodes/NAME over TLS for a bearer token,
// as the Kubernetes API server does for a service account that may get
// nodes. It returns the CA and token files to pass to k8s-zone.
func fakeAPIServer(t *testing.T, token string, nodes map[string]map[string]string) (srv *httptest.Server, caFile, tokenFile string) {
	t.Helper()
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"kind":"Status","code":403,"reason":"Forbidden"}`, http.StatusForbidden)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/nodes/")
		labels, found := nodes[name]
		if r.Method != http.MethodGet || !ok || !found {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":%q,"labels":%s},"status":{}}`, name, mustJSON(t, labels))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile = filepath.Join(dir, "ca.crt")
	tokenFile = filepath.Join(dir, "token")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile, tokenFile
}

func mustJSON(t *testing.T, m map[string]string) string {
	t.Helper()
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestK8sZone_writesTheNodesZone(t *testing.T) {
	srv, ca, token := fakeAPIServer(t, "s3cret-token", map[string]map[string]string{
		"node-a":      {"kubernetes.io/hostname": "node-a", zoneLabel: "eu-west-1a"},
		"legacy-node": {legacyZoneLabel: "us-east-1b"},
		"no-zone":     {"kubernetes.io/hostname": "no-zone"},
	})
	for _, tc := range []struct {
		node, wantZone string
	}{
		{"node-a", "eu-west-1a"},
		{"legacy-node", "us-east-1b"},
		{"no-zone", "default"}, // the setting's default
	} {
		t.Run(tc.node, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "zone.properties")
			var stdout, stderr bytes.Buffer
			code := run([]string{"k8s-zone", "--api", srv.URL, "--ca-file", ca, "--token-file", token, "--node", tc.node, "--out", out}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			// serve --config reads it: the zone is the node's.
			s := mustLoad(t, out, nil, nil)
			if s.Cluster.Zone != tc.wantZone {
				t.Fatalf("cluster.zone = %q, want %q\nfile: %s", s.Cluster.Zone, tc.wantZone, mustRead(t, out))
			}
			if tc.wantZone == "default" && !strings.Contains(stderr.String(), "no "+zoneLabel+" label") {
				t.Errorf("no warning for a node without a zone label: %q", stderr.String())
			}
		})
	}
}

func TestK8sZone_errors(t *testing.T) {
	srv, ca, token := fakeAPIServer(t, "right", map[string]map[string]string{"n1": {zoneLabel: "a"}})
	wrongToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrongToken, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every httptest server has the same certificate: make another CA.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(otherCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"forbidden", []string{"--api", srv.URL, "--ca-file", ca, "--token-file", wrongToken, "--node", "n1"}, "may not read nodes"},
		{"unknown node", []string{"--api", srv.URL, "--ca-file", ca, "--token-file", token, "--node", "n9"}, "404"},
		{"untrusted server", []string{"--api", srv.URL, "--ca-file", otherCA, "--token-file", token, "--node", "n1"}, "certificate"},
		{"no node name", []string{"--api", srv.URL, "--ca-file", ca, "--token-file", token, "--node", ""}, "NODE_NAME"},
		{"no token", []string{"--api", srv.URL, "--ca-file", ca, "--token-file", "/nonexistent/token", "--node", "n1"}, "token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "zone.properties")
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"k8s-zone", "--out", out}, tc.args...), &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want a failure naming %q", code, stderr.String(), tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed lookup wrote %s", out)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

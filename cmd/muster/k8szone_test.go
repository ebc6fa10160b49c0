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
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
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

// settingsAwaited are keys the Kubernetes manifests already pass but that
// land with the security issue (9). Until then they are left out of the
// check below; once the settings exist they are checked like the rest.
var settingsAwaited = []string{"spring.security.user.name", "spring.security.user.password", "cluster.peer-secret"}

// TestKubernetesManifest_settings feeds the StatefulSet's environment to
// the real config loader, as the pod would: every variable must name a
// setting, and the resulting ports, join address and node identity must
// match the manifests. deploy/kubernetes has the strict, typed checks; this
// one needs the loader, which lives here.
func TestKubernetesManifest_settings(t *testing.T) {
	raw := mustRead(t, filepath.Join("..", "..", "deploy", "kubernetes", "statefulset.yaml"))
	doc, err := yaml.Parser().Unmarshal([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	pod := dig(t, doc, "spec", "template", "spec")
	ctr := digList(t, pod, "containers")[0].(map[string]any)
	const (
		podName, podNamespace, podIP = "muster-1", "registry", "10.1.2.3"
	)
	downward := map[string]string{"metadata.name": podName, "metadata.namespace": podNamespace, "status.podIP": podIP}
	vars := map[string]string{}
	var env []string
	for _, e := range digList(t, ctr, "env") {
		e := e.(map[string]any)
		name := e["name"].(string)
		var value string
		switch {
		case e["value"] != nil:
			value = expandK8sVars(e["value"].(string), vars)
		case dig(t, e, "valueFrom")["fieldRef"] != nil:
			value = downward[dig(t, e, "valueFrom", "fieldRef")["fieldPath"].(string)]
		case dig(t, e, "valueFrom")["secretKeyRef"] != nil:
			key := dig(t, e, "valueFrom", "secretKeyRef")["key"].(string)
			if _, known := settingByCanonical[canonical(key)]; !known && slices.Contains(settingsAwaited, key) {
				t.Logf("%s (%s) skipped: the setting is not on this branch yet", name, key)
				continue
			}
			value = map[string]string{
				"cluster.secret-key": "MDEyMzQ1Njc4OWFiY2RlZg==", // 16 bytes, base64
			}[key]
			if value == "" {
				value = "test-" + key
			}
			if got := envKey(strings.TrimPrefix(name, "MUSTER_")); got != key {
				t.Errorf("%s maps to setting %q, but reads Secret key %q", name, got, key)
			}
		}
		vars[name] = value
		env = append(env, name+"="+value)
	}

	args := digList(t, ctr, "args")
	if args[0] != "serve" || args[1] != "--config" {
		t.Fatalf("container args %v, want serve --config FILE", args)
	}
	zoneFile := filepath.Join(t.TempDir(), "zone.properties")
	if err := os.WriteFile(zoneFile, []byte("cluster.zone=eu-west-1b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, notices, err := loadSettings(zoneFile, env, nil)
	if err != nil {
		t.Fatalf("the pod's environment does not load: %v\nenv: %q", err, env)
	}
	for _, n := range notices {
		if !strings.Contains(n.Msg, "spring.security") { // ignored until issue 9 lands
			t.Errorf("notice: %s", n.Msg)
		}
	}

	ports := map[string]int{}
	for _, p := range digList(t, ctr, "ports") {
		p := p.(map[string]any)
		ports[p["name"].(string)] = p["containerPort"].(int)
	}
	headless := dig(t, doc, "spec")["serviceName"].(string)
	want := fmt.Sprintf("%s.%s.svc:%d", headless, podNamespace, ports["gossip-tcp"])
	switch {
	case s.ServerPort != ports["http"]:
		t.Errorf("server.port = %d, container port http = %d", s.ServerPort, ports["http"])
	case s.Cluster.BindPort != ports["gossip-tcp"] || s.Cluster.BindPort != ports["gossip-udp"]:
		t.Errorf("cluster.bind-port = %d, container gossip ports %v", s.Cluster.BindPort, ports)
	case !slices.Equal(s.Cluster.Join, []string{want}):
		t.Errorf("cluster.join = %q, want the headless Service %q", s.Cluster.Join, want)
	case s.ClusterNodeName != podName || s.Cluster.AdvertiseAddr != podIP || !s.InstancePreferIP:
		t.Errorf("node %q advertising %q (prefer IP %v), want the pod's name %q and IP %q", s.ClusterNodeName, s.Cluster.AdvertiseAddr, s.InstancePreferIP, podName, podIP)
	case s.Cluster.Zone != "eu-west-1b":
		t.Errorf("cluster.zone = %q: the file the init container writes was not read", s.Cluster.Zone)
	case s.ClusterSecretKey == "":
		t.Errorf("cluster.secret-key is not set from the Secret")
	}
}

var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandK8sVars does what the kubelet does with $(VAR) in env values: refer
// to variables defined earlier; unknown references stay as they are.
func expandK8sVars(s string, vars map[string]string) string {
	return k8sVarRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

func digAny(t *testing.T, m map[string]any, path ...string) any {
	t.Helper()
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("no %s in the manifest", strings.Join(path, "."))
		}
		cur = mm[p]
	}
	return cur
}

func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	v, ok := digAny(t, m, path...).(map[string]any)
	if !ok {
		t.Fatalf("%s is not a map in the manifest", strings.Join(path, "."))
	}
	return v
}

func digList(t *testing.T, m map[string]any, path ...string) []any {
	t.Helper()
	v, ok := digAny(t, m, path...).([]any)
	if !ok {
		t.Fatalf("%s is not a list in the manifest", strings.Join(path, "."))
	}
	return v
}

package settings

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
)

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
	raw := mustRead(t, filepath.Join("..", "deploy", "kubernetes", "statefulset.yaml"))
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
			if _, known := settingByCanonical[CanonicalKey(key)]; !known && slices.Contains(settingsAwaited, key) {
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
	s, notices, err := LoadSettings(zoneFile, env, nil)
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

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

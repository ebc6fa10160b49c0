package kubernetes_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The Secret the README tells operators to create, and the keys the
// StatefulSet reads from it (the setting names, so the mapping is obvious).
const secretName = "muster-secrets"

var secretKeys = map[string]string{
	"MUSTER_SPRING_SECURITY_USER_NAME":     "spring.security.user.name",
	"MUSTER_SPRING_SECURITY_USER_PASSWORD": "spring.security.user.password",
	"MUSTER_CLUSTER_PEER_SECRET":           "cluster.peer-secret",
	"MUSTER_CLUSTER_SECRET_KEY":            "cluster.secret-key",
}

// Muster's defaults (muster config): server.port and cluster.bind-port.
const (
	defaultServerPort  = 8761
	defaultClusterPort = 7946
)

// strictDecoder decodes YAML into the typed API objects and fails on
// unknown or duplicate fields, as kubectl's strict field validation does.
func strictDecoder(t testing.TB) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme, scheme,
		k8sjson.SerializerOptions{Yaml: true, Strict: true})
}

// decodeAll splits a multi-document YAML stream and decodes every document
// strictly.
func decodeAll(t testing.TB, dec runtime.Decoder, source string, stream []byte) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for i, doc := range splitDocuments(stream) {
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil { // strict errors come with a decoded object: still a failure
			t.Fatalf("%s, document %d: %v\n%s", source, i+1, err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// render runs the kustomization through the kustomize library (the one
// kubectl embeds).
func render(t testing.TB) []byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// manifests is the rendered kustomization, by kind.
type manifests struct {
	all             []runtime.Object
	statefulSet     *appsv1.StatefulSet
	services        map[string]*corev1.Service
	pdb             *policyv1.PodDisruptionBudget
	serviceAccounts map[string]*corev1.ServiceAccount
	clusterRoles    map[string]*rbacv1.ClusterRole
	bindings        []*rbacv1.ClusterRoleBinding
	namespaces      []string
}

func index(t testing.TB, objs []runtime.Object) manifests {
	t.Helper()
	m := manifests{all: objs, services: map[string]*corev1.Service{}, serviceAccounts: map[string]*corev1.ServiceAccount{},
		clusterRoles: map[string]*rbacv1.ClusterRole{}}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			if m.statefulSet != nil {
				t.Fatal("two StatefulSets")
			}
			m.statefulSet = o
		case *corev1.Service:
			m.services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			m.pdb = o
		case *corev1.ServiceAccount:
			m.serviceAccounts[o.Name] = o
		case *rbacv1.ClusterRole:
			m.clusterRoles[o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			m.bindings = append(m.bindings, o)
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o.Name)
		default:
			t.Fatalf("unexpected kind %T", obj)
		}
	}
	if m.statefulSet == nil || m.pdb == nil {
		t.Fatalf("rendered manifests lack a StatefulSet or a PodDisruptionBudget")
	}
	return m
}

// TestManifests_decodeStrictly decodes every file the kustomization lists
// and the rendered output with the API types; an unknown field fails.
func TestManifests_decodeStrictly(t *testing.T) {
	dec := strictDecoder(t)
	raw, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &kz); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(kz.Resources, f) {
			t.Errorf("%s is not listed in kustomization.yaml's resources", f)
		}
	}
	n := 0
	for _, f := range kz.Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(decodeAll(t, dec, f, b))
	}
	rendered := decodeAll(t, dec, "kustomize build", render(t))
	if len(rendered) != n {
		t.Fatalf("kustomize rendered %d objects, the files hold %d", len(rendered), n)
	}
}

// TestStrictDecoder_unknownField shows the decoder above can fail: a typo
// in a field name is an error, not a silently dropped setting.
func TestStrictDecoder_unknownField(t *testing.T) {
	dec := strictDecoder(t)
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n",
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replica: 3}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ClusterIP, type: NodePort}\n",
	} {
		if _, _, err := dec.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
}

func TestManifests_wiring(t *testing.T) {
	m := index(t, decodeAll(t, strictDecoder(t), "kustomize build", render(t)))
	sts := m.statefulSet
	pod := sts.Spec.Template.Spec

	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", sts.Spec.Replicas)
	}
	podLabels := labels.Set(sts.Spec.Template.Labels)
	mustSelect := func(what string, sel *metav1.LabelSelector) {
		t.Helper()
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() || !s.Matches(podLabels) {
			t.Errorf("%s selector %v does not select the pods (labels %v): %v", what, sel, podLabels, err)
		}
	}
	mustSelect("StatefulSet", sts.Spec.Selector)
	mustSelect("PodDisruptionBudget", m.pdb.Spec.Selector)
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable = %v, want 1 of 3", mu)
	}

	// Zones.
	var zoneSpread *corev1.TopologySpreadConstraint
	for i, c := range pod.TopologySpreadConstraints {
		mustSelect("topologySpreadConstraint "+c.TopologyKey, c.LabelSelector)
		if c.TopologyKey == corev1.LabelTopologyZone {
			zoneSpread = &pod.TopologySpreadConstraints[i]
		}
	}
	if zoneSpread == nil || zoneSpread.MaxSkew != 1 || zoneSpread.WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("no hard spread over %s with maxSkew 1: %+v", corev1.LabelTopologyZone, pod.TopologySpreadConstraints)
	}

	// Services.
	headless := m.services[sts.Spec.ServiceName]
	client := m.services["muster"]
	if headless == nil || client == nil {
		t.Fatalf("want the headless Service %q (the StatefulSet's serviceName) and the client Service muster, have %v", sts.Spec.ServiceName, keys(m.services))
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q, publishNotReadyAddresses %v; want None and true (nodes must find each other before they are ready)",
			headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	for _, svc := range []*corev1.Service{headless, client} {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s selector %v does not select the pods", svc.Name, svc.Spec.Selector)
		}
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := envMap(c.Env)
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	wantPort := func(name string, number int, proto corev1.Protocol, envName string) {
		t.Helper()
		p, ok := ports[name]
		if !ok || int(p.ContainerPort) != number || p.Protocol != proto {
			t.Errorf("container port %s = %+v, want %d/%s", name, p, number, proto)
		}
		if env[envName] != fmt.Sprint(number) {
			t.Errorf("%s = %q, want %d, the port the container declares", envName, env[envName], number)
		}
	}
	wantPort("http", defaultServerPort, corev1.ProtocolTCP, "MUSTER_SERVER_PORT")
	wantPort("gossip-tcp", defaultClusterPort, corev1.ProtocolTCP, "MUSTER_CLUSTER_BIND_PORT")
	wantPort("gossip-udp", defaultClusterPort, corev1.ProtocolUDP, "MUSTER_CLUSTER_BIND_PORT")

	// Every Service port reaches a container port of the same number and
	// protocol.
	for _, svc := range []*corev1.Service{headless, client} {
		for _, sp := range svc.Spec.Ports {
			cp, ok := ports[sp.TargetPort.String()]
			if sp.TargetPort.Type != intstr.String || !ok {
				t.Errorf("Service %s port %s targets %q, not a named container port", svc.Name, sp.Name, sp.TargetPort.String())
				continue
			}
			if cp.ContainerPort != sp.Port || cp.Protocol != sp.Protocol {
				t.Errorf("Service %s port %s: %d/%s → container %d/%s", svc.Name, sp.Name, sp.Port, sp.Protocol, cp.ContainerPort, cp.Protocol)
			}
		}
	}
	// Clients reach the Eureka API and the DNS interface (UDP and TCP),
	// nothing else.
	var clientPorts []string
	for _, sp := range client.Spec.Ports {
		clientPorts = append(clientPorts, fmt.Sprintf("%d/%s", sp.Port, sp.Protocol))
	}
	if want := []string{fmt.Sprintf("%d/TCP", defaultServerPort), "8600/UDP", "8600/TCP"}; !slices.Equal(clientPorts, want) {
		t.Errorf("client Service ports %v, want %v", clientPorts, want)
	}
	wantProto := map[corev1.Protocol]bool{}
	for _, sp := range headless.Spec.Ports {
		if sp.Port == defaultClusterPort {
			wantProto[sp.Protocol] = true
		}
	}
	if !wantProto[corev1.ProtocolTCP] || !wantProto[corev1.ProtocolUDP] {
		t.Errorf("headless Service must carry gossip on TCP and UDP %d: %+v", defaultClusterPort, headless.Spec.Ports)
	}

	// Probes.
	checkProbe := func(what string, p *corev1.Probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe = %+v, want GET %s on port http", what, p, path)
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz")
	checkProbe("liveness", c.LivenessProbe, "/livez")

	// Membership: the join address is the headless Service's DNS name in
	// the pod's namespace, on the gossip port.
	wantJoin := fmt.Sprintf("%s.$(POD_NAMESPACE).svc:%d", headless.Name, defaultClusterPort)
	if env["MUSTER_CLUSTER_JOIN"] != wantJoin {
		t.Errorf("MUSTER_CLUSTER_JOIN = %q, want %q", env["MUSTER_CLUSTER_JOIN"], wantJoin)
	}
	wantFieldRef(t, c.Env, "POD_NAMESPACE", "metadata.namespace")
	wantFieldRef(t, c.Env, "POD_NAME", "metadata.name")
	wantFieldRef(t, c.Env, "POD_IP", "status.podIP")
	mustPrecede(t, c.Env, "POD_NAMESPACE", "MUSTER_CLUSTER_JOIN")
	mustPrecede(t, c.Env, "POD_NAME", "MUSTER_CLUSTER_NODE_NAME")
	mustPrecede(t, c.Env, "POD_IP", "MUSTER_CLUSTER_ADVERTISE_ADDR")
	if env["MUSTER_CLUSTER_NODE_NAME"] != "$(POD_NAME)" || env["MUSTER_CLUSTER_ADVERTISE_ADDR"] != "$(POD_IP)" {
		t.Errorf("node name %q and advertise address %q, want the pod's name and IP", env["MUSTER_CLUSTER_NODE_NAME"], env["MUSTER_CLUSTER_ADVERTISE_ADDR"])
	}

	// Secrets.
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != secretName || secretKeys[e.Name] != ref.Key {
			t.Errorf("%s from secret %s key %s, want %s key %s", e.Name, ref.Name, ref.Key, secretName, secretKeys[e.Name])
		}
	}
	for name := range secretKeys {
		if e, ok := findEnv(c.Env, name); !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s is not read from the Secret %s", name, secretName)
		}
	}

	// Zone: the init container writes the file serve reads.
	if len(pod.InitContainers) != 1 {
		t.Fatalf("want the zone init container, have %d", len(pod.InitContainers))
	}
	ic := pod.InitContainers[0]
	out := flagValue(ic.Args, "--out")
	if ic.Args[0] != "k8s-zone" || out == "" || flagValue(c.Args, "--config") != out || c.Args[0] != "serve" {
		t.Errorf("init container args %q and container args %q: want k8s-zone --out F and serve --config F", ic.Args, c.Args)
	}
	wantFieldRef(t, ic.Env, "NODE_NAME", "spec.nodeName")
	if ic.Image != c.Image {
		t.Errorf("init container image %q, want the muster image %q", ic.Image, c.Image)
	}
	dir := filepath.Dir(out)
	if !mountsAt(ic.VolumeMounts, dir, false) || !mountsAt(c.VolumeMounts, dir, true) {
		t.Errorf("%s must be a volume written by the init container and read (read-only) by muster", dir)
	}
	if !mountsAt(ic.VolumeMounts, "/var/run/secrets/kubernetes.io/serviceaccount", true) {
		t.Errorf("the init container needs the API token at the in-cluster path")
	}
	if mountsAt(c.VolumeMounts, "/var/run/secrets/kubernetes.io/serviceaccount", true) {
		t.Errorf("the muster container must not get the API token")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken must be false: only the init container gets a token")
	}

	// RBAC: the pod's service account may get nodes, and nothing else.
	sa := m.serviceAccounts[pod.ServiceAccountName]
	if sa == nil {
		t.Fatalf("service account %q is not in the manifests", pod.ServiceAccountName)
	}
	granted := false
	for _, b := range m.bindings {
		for _, s := range b.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Name != sa.Name || s.Namespace != sa.Namespace {
				continue
			}
			role := m.clusterRoles[b.RoleRef.Name]
			if b.RoleRef.Kind != "ClusterRole" || role == nil {
				t.Fatalf("binding %s refers to %s %s, not in the manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			for _, r := range role.Rules {
				if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"nodes"}) || !slices.Equal(r.Verbs, []string{"get"}) {
					t.Errorf("ClusterRole %s grants %+v, want only get on nodes", role.Name, r)
				}
				granted = true
			}
		}
	}
	if !granted {
		t.Errorf("no ClusterRoleBinding lets %s/%s get nodes", sa.Namespace, sa.Name)
	}
	for _, obj := range m.all {
		acc, _ := obj.(metav1.Object)
		switch obj.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *corev1.Namespace:
		default:
			if !slices.Contains(m.namespaces, acc.GetNamespace()) {
				t.Errorf("%T %s is in namespace %q, which the manifests do not create", obj, acc.GetName(), acc.GetNamespace())
			}
		}
	}

	// Non-root, read-only root filesystem, no privilege, resources.
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod must run as a non-root numeric user (the image has no /etc/passwd): %+v", psc)
	}
	for _, ct := range append([]corev1.Container{c}, pod.InitContainers...) {
		sc := ct.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: want a read-only root filesystem, no privilege escalation, all capabilities dropped: %+v", ct.Name, sc)
		}
		if ct.Resources.Requests.Cpu().IsZero() || ct.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no CPU and memory requests", ct.Name)
		}
	}

	// Graceful stop: the preStop sleep and muster's own shutdown fit the
	// grace period.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 5 {
		t.Fatalf("want a preStop sleep of at least 5 s while endpoints drain: %+v", c.Lifecycle)
	}
	const shutdownTimeout = 10 // muster.shutdown-timeout-ms default, in seconds
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < c.Lifecycle.PreStop.Sleep.Seconds+shutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v < preStop %d s + shutdown %d s", g, c.Lifecycle.PreStop.Sleep.Seconds, shutdownTimeout)
	}
}

// TestManifests_kubectlKustomize renders with kubectl when it is installed
// and checks it agrees with the library.
func TestManifests_kubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed (Debian: apt-get install kubernetes-client); the kustomize library rendered the manifests in the other tests")
	}
	cmd := exec.Command(kubectl, "kustomize", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.String())
	}
	dec := strictDecoder(t)
	byKubectl := byName(decodeAll(t, dec, "kubectl kustomize", out))
	byLibrary := byName(decodeAll(t, dec, "kustomize build", render(t)))
	if !slices.Equal(keys(byKubectl), keys(byLibrary)) {
		t.Fatalf("kubectl rendered %v, the library %v", keys(byKubectl), keys(byLibrary))
	}
	for name, obj := range byLibrary {
		if !equality.Semantic.DeepEqual(obj, byKubectl[name]) {
			t.Errorf("%s differs between kubectl kustomize and the library", name)
		}
	}
}

func byName(objs []runtime.Object) map[string]runtime.Object {
	m := map[string]runtime.Object{}
	for _, o := range objs {
		acc := o.(metav1.Object)
		m[fmt.Sprintf("%T %s/%s", o, acc.GetNamespace(), acc.GetName())] = o
	}
	return m
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func findEnv(env []corev1.EnvVar, name string) (corev1.EnvVar, bool) {
	for _, e := range env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func wantFieldRef(t *testing.T, env []corev1.EnvVar, name, path string) {
	t.Helper()
	e, ok := findEnv(env, name)
	if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
		t.Errorf("%s must come from the downward API field %s: %+v", name, path, e)
	}
}

// mustPrecede: Kubernetes expands $(VAR) only from variables defined
// earlier in the list.
func mustPrecede(t *testing.T, env []corev1.EnvVar, first, then string) {
	t.Helper()
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == first })
	j := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == then })
	if i < 0 || j < 0 || i > j {
		t.Errorf("%s must be defined before %s uses it", first, then)
	}
}

func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func mountsAt(mounts []corev1.VolumeMount, path string, readOnly bool) bool {
	for _, m := range mounts {
		if m.MountPath == path && m.ReadOnly == readOnly {
			return true
		}
	}
	return false
}

package kubernetes_test

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const springExample = "examples/spring-app.yaml"

// springApp is the example's two objects.
type springApp struct {
	config     *corev1.ConfigMap
	deployment *appsv1.Deployment
}

func loadSpringExample(t *testing.T) springApp {
	t.Helper()
	b, err := os.ReadFile(springExample)
	if err != nil {
		t.Fatal(err)
	}
	var app springApp
	for _, obj := range decodeAll(t, strictDecoder(t), springExample, b) {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			app.config = o
		case *appsv1.Deployment:
			app.deployment = o
		default:
			t.Fatalf("%s: unexpected %T", springExample, obj)
		}
	}
	if app.config == nil || app.deployment == nil {
		t.Fatalf("%s: want a ConfigMap and a Deployment", springExample)
	}
	return app
}

// TestSpringExample_preStopDrain checks the Kubernetes recipe of
// docs/traffic.md as the kubelet and Spring Boot will read it: the hook
// drains the instance id the app registers, waits longer than a caller's
// fetch interval, and fits the grace period with Spring's shutdown.
func TestSpringExample_preStopDrain(t *testing.T) {
	if problems := springExampleProblems(loadSpringExample(t)); len(problems) > 0 {
		t.Errorf("%s:\n  %s", springExample, strings.Join(problems, "\n  "))
	}
}

// TestSpringExample_problemsFound shows the checks above can fail: each
// edit is a mistake an adapted copy of the recipe could make.
func TestSpringExample_problemsFound(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*springApp)
		want string
	}{
		{"grace shorter than the wait", func(a *springApp) {
			g := int64(60)
			a.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "terminationGracePeriodSeconds"},
		{"instance id not the pod name", configEdit("instance-id: ${POD_NAME}", "instance-id: ${HOSTNAME}:orders:8080"), "instance-id"},
		{"load balancer cache on", configEdit("enabled: false", "enabled: true"), "loadbalancer"},
		{"drained instances handed out", configEdit("filter-only-up-instances: true", "filter-only-up-instances: false"), "filter-only-up-instances"},
		{"credentials on the command line", hookEdit("drain ", "drain --url http://orders:pw@muster.muster.svc:8761 "), "MUSTER_URL"},
		{"URL before its credentials", func(a *springApp) {
			c := &a.deployment.Spec.Template.Spec.Containers[0]
			i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "MUSTER_URL" })
			u := c.Env[i]
			c.Env = slices.Insert(slices.Delete(c.Env, i, i+1), 0, u)
		}, "not defined before"},
		{"wait shorter than a fetch", hookEdit("--wait 60s", "--wait 20s"), "--wait"},
		{"variables left to the kubelet", func(a *springApp) {
			c := &a.deployment.Spec.Template.Spec.Containers[0]
			c.Lifecycle.PreStop.Exec.Command = append([]string{"/opt/muster/muster", "drain", "--wait", "60s", "ORDERS"}, "$(POD_NAME)")
		}, "shell"},
		{"wrong app", hookEdit(" ORDERS ", " PAYMENTS "), "app"},
		{"binary not mounted", func(a *springApp) {
			c := &a.deployment.Spec.Template.Spec.Containers[0]
			c.VolumeMounts = c.VolumeMounts[:1]
		}, "/opt/muster"},
		{"password in the manifest", func(a *springApp) {
			c := &a.deployment.Spec.Template.Spec.Containers[0]
			for i := range c.Env {
				if c.Env[i].Name == "EUREKA_PASSWORD" {
					c.Env[i].ValueFrom, c.Env[i].Value = nil, "hunter2"
				}
			}
		}, "Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := loadSpringExample(t)
			tc.edit(&app)
			problems := springExampleProblems(app)
			if !strings.Contains(strings.Join(problems, "\n"), tc.want) {
				t.Errorf("problems %q, want one about %q", problems, tc.want)
			}
		})
	}
}

// configEdit replaces old with new in the ConfigMap's application.yaml.
func configEdit(old, new string) func(*springApp) {
	return func(a *springApp) {
		a.config.Data["application.yaml"] = strings.Replace(a.config.Data["application.yaml"], old, new, 1)
	}
}

// hookEdit replaces old with new in the preStop hook's script.
func hookEdit(old, new string) func(*springApp) {
	return func(a *springApp) {
		cmd := a.deployment.Spec.Template.Spec.Containers[0].Lifecycle.PreStop.Exec.Command
		cmd[2] = strings.Replace(cmd[2], old, new, 1)
	}
}

var (
	shellVar = regexp.MustCompile(`\$\{(\w+)\}`)
	// The kubelet's $(VAR) in an environment variable's value.
	kubeVar = regexp.MustCompile(`\$\((\w+)\)`)
	// Spring's ${…} placeholders in application.yaml, without a default.
	springVar = regexp.MustCompile(`\$\{([A-Z_]+)\}`)
)

// springExampleProblems is every way the example breaks the recipe.
func springExampleProblems(app springApp) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// What Spring Boot reads from the ConfigMap.
	raw := app.config.Data["application.yaml"]
	var props map[string]any
	if err := yaml.Unmarshal([]byte(raw), &props); err != nil {
		return []string{"ConfigMap application.yaml: " + err.Error()}
	}
	prop := func(key string) any {
		var v any = props
		for _, part := range strings.Split(key, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[part]
		}
		return v
	}
	appName := strings.ToUpper(fmt.Sprint(prop("spring.application.name")))
	if prop("eureka.instance.instance-id") != "${POD_NAME}" {
		fail("eureka.instance.instance-id is %v, want ${POD_NAME}: the hook drains the pod's name", prop("eureka.instance.instance-id"))
	}
	if prop("spring.cloud.loadbalancer.cache.enabled") != false {
		fail("spring.cloud.loadbalancer.cache.enabled is %v, want false: the drain cannot see the loadbalancer's own cache", prop("spring.cloud.loadbalancer.cache.enabled"))
	}
	if v := prop("eureka.client.filter-only-up-instances"); v != nil && v != true {
		fail("eureka.client.filter-only-up-instances is %v: a drained instance would still be handed out", v)
	}
	fetch := 30 * time.Second // eureka-client's default
	if v, ok := prop("eureka.client.registry-fetch-interval-seconds").(float64); ok {
		fetch = time.Duration(v) * time.Second
	}
	shutdown := 30 * time.Second // Spring Boot's default
	if v, ok := prop("spring.lifecycle.timeout-per-shutdown-phase").(string); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			fail("spring.lifecycle.timeout-per-shutdown-phase %q: %v", v, err)
		}
		shutdown = d
	}

	pod := app.deployment.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return append(problems, fmt.Sprintf("want one container, have %d", len(pod.Containers)))
	}
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e, ok := env["POD_NAME"]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		fail("POD_NAME must come from the downward API's metadata.name")
	}
	for _, m := range springVar.FindAllStringSubmatch(raw, -1) {
		if _, ok := env[m[1]]; !ok {
			fail("application.yaml uses ${%s}, which the container's environment lacks", m[1])
		}
	}
	mountedAt := func(dir string) bool {
		for _, m := range c.VolumeMounts {
			if path.Clean(m.MountPath) == path.Clean(dir) {
				return true
			}
		}
		return false
	}
	if loc := strings.TrimPrefix(env["SPRING_CONFIG_ADDITIONAL_LOCATION"].Value, "optional:"); !mountedAt(loc) {
		fail("SPRING_CONFIG_ADDITIONAL_LOCATION %q is not where the ConfigMap is mounted", loc)
	}

	// The hook.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		return append(problems, "no preStop exec hook")
	}
	cmd := c.Lifecycle.PreStop.Exec.Command
	if len(cmd) != 3 || cmd[1] != "-c" || !strings.HasSuffix(cmd[0], "sh") {
		return append(problems, fmt.Sprintf("preStop command %q: want a shell (sh -c SCRIPT): the kubelet expands no variables in a hook", cmd))
	}
	words := shellWords(cmd[2])
	drainAt := -1
	for i := 0; i+1 < len(words); i++ {
		if path.Base(words[i]) == "muster" && words[i+1] == "drain" {
			drainAt = i
		}
	}
	if drainAt < 0 {
		return append(problems, fmt.Sprintf("preStop script %q runs no muster drain", cmd[2]))
	}
	if dir := path.Dir(words[drainAt]); !mountedAt(dir) {
		fail("the hook runs %s, but nothing is mounted at %s", words[drainAt], dir)
	}
	var wait time.Duration
	var positional []string
	for i := drainAt + 2; i < len(words); i++ {
		switch words[i] {
		case "--wait":
			i++
			d, err := time.ParseDuration(words[i])
			if err != nil {
				fail("--wait %q: %v", words[i], err)
			}
			wait = d
		case "--url":
			i++
			if strings.Contains(words[i], "@") {
				fail("--url %q puts credentials on the hook's command line: use MUSTER_URL from the environment", words[i])
			}
		default:
			positional = append(positional, words[i])
		}
	}
	if len(positional) != 2 || positional[0] != appName || positional[1] != "${POD_NAME}" {
		fail("the hook drains %q, want the app %s and the instance ${POD_NAME}", positional, appName)
	}
	if wait <= fetch {
		fail("--wait %s is not longer than a caller's fetch interval (%s): the receipt would rarely come in time", wait, fetch)
	}
	grace := int64(30) // the API's default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = *pod.TerminationGracePeriodSeconds
	}
	if time.Duration(grace)*time.Second <= wait+shutdown {
		fail("terminationGracePeriodSeconds %d does not cover the hook's wait (%s) and Spring's shutdown (%s)", grace, wait, shutdown)
	}
	for _, m := range shellVar.FindAllStringSubmatch(cmd[2], -1) {
		if _, ok := env[m[1]]; !ok {
			fail("the hook uses ${%s}, which the container's environment lacks", m[1])
		}
	}
	// Where the drain goes: MUSTER_URL, its credentials from the Secret
	// by $(VAR), which the kubelet expands only from variables above it.
	musterURL, ok := env["MUSTER_URL"]
	if !ok || !strings.Contains(musterURL.Value, "@") {
		fail("MUSTER_URL %q must name the nodes with the drain user's credentials", musterURL.Value)
	}
	for _, m := range kubeVar.FindAllStringSubmatch(musterURL.Value, -1) {
		e, ok := env[m[1]]
		switch {
		case !ok || slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == m[1] }) > slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "MUSTER_URL" }):
			fail("MUSTER_URL uses $(%s), which is not defined before it", m[1])
		case e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil:
			fail("%s must come from a Secret, not the manifest", m[1])
		}
	}
	if !strings.Contains(musterURL.Value, "$(") {
		fail("MUSTER_URL %q holds the credentials in the manifest: take them from a Secret", musterURL.Value)
	}
	return problems
}

// shellWords splits a one-line sh script into words, keeping what is
// quoted together (enough for the hook: no escapes, no nesting).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\n' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

package springconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, path string, opt Options) *Config {
	t.Helper()
	c, err := Load(path, opt)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func want(t *testing.T, c *Config, key, value, origin string) {
	t.Helper()
	v, ok := c.Get(key)
	if !ok {
		t.Errorf("%s: missing (have %v)", key, c.Values)
		return
	}
	if v.Value != value {
		t.Errorf("%s = %q, want %q", key, v.Value, value)
	}
	if origin != "" && !strings.HasSuffix(v.Origin.String(), origin) {
		t.Errorf("%s: origin %s, want …%s", key, v.Origin, origin)
	}
}

func absent(t *testing.T, c *Config, key string) {
	t.Helper()
	if v, ok := c.Get(key); ok {
		t.Errorf("%s = %q from %s, want absent", key, v.Value, v.Origin)
	}
}

const multiDoc = `server:
  port: 8761
eureka:
  server:
    enable-self-preservation: true
---
eureka:
  server:
    enable-self-preservation: false
---
spring:
  config:
    activate:
      on-profile: peer1
server:
  port: 8762
---
spring:
  profiles: peer2
server:
  port: 8763
---
spring:
  profiles: "!peer1 & !peer2"
eureka:
  instance:
    hostname: standalone
`

func TestLoad_everyDocumentInOrderAndProfiles(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", multiDoc)
	c := mustLoad(t, p, Options{})
	want(t, c, "server.port", "8761", "application.yml:2")
	// The unconditional second document wins over the first.
	want(t, c, "eureka.server.enableSelfPreservation", "false", "application.yml:9")
	want(t, c, "eureka.instance.hostname", "standalone", "")
	if len(c.Profiles) != 1 || c.Profiles[0] != "default" {
		t.Errorf("profiles %v, want [default]", c.Profiles)
	}

	c = mustLoad(t, p, Options{Profiles: []string{"peer1"}})
	want(t, c, "server.port", "8762", "application.yml:16")
	absent(t, c, "eureka.instance.hostname")

	c = mustLoad(t, p, Options{Env: []string{"SPRING_PROFILES_ACTIVE=peer2"}})
	want(t, c, "server.port", "8763", "application.yml:21")

	// The caller's profiles win over the environment's, as Spring's
	// command line does.
	c = mustLoad(t, p, Options{Env: []string{"SPRING_PROFILES_ACTIVE=peer2"}, Profiles: []string{"peer1"}})
	want(t, c, "server.port", "8762", "")
}

func TestLoad_profileFromTheFileAndProfileFiles(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "registry.yml", "spring:\n  profiles:\n    active: dev,eu\nserver:\n  port: 1\nmuster:\n  a: base\n  b: base\n  c: base\n")
	write(t, dir, "application-dev.yml", "muster:\n  a: app-dev\n  b: app-dev\n")
	write(t, dir, "registry-dev.properties", "muster.b=registry-dev\n")
	write(t, dir, "registry-eu.yaml", "muster:\n  c: eu\n---\nspring.config.activate.on-profile: dev & eu\nmuster.d: both\n")
	write(t, dir, "registry-prod.yml", "muster:\n  c: prod\n")
	c := mustLoad(t, p, Options{})
	if strings.Join(c.Profiles, ",") != "dev,eu" {
		t.Fatalf("profiles %v", c.Profiles)
	}
	want(t, c, "muster.a", "app-dev", "application-dev.yml:2")
	want(t, c, "muster.b", "registry-dev", "registry-dev.properties:1")
	want(t, c, "muster.c", "eu", "registry-eu.yaml:2")
	want(t, c, "muster.d", "both", "registry-eu.yaml:5")
	if len(c.Files) != 4 {
		t.Errorf("files %v", c.Files)
	}
}

func TestLoad_propertiesDocuments(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.properties", `# comment
server.port = 8761
eureka.client.serviceUrl.defaultZone=http\://localhost\:8761/eureka/
cluster.join[0]=a:7946
cluster.join[1]=b:7946
long.value=one \
    two
spaced value
#---
spring.config.activate.on-profile=prod
server.port: 80
#---
spring.config.activate.on-profile=!prod
muster.mode=dev
`)
	c := mustLoad(t, p, Options{})
	want(t, c, "server.port", "8761", "application.properties:2")
	want(t, c, "eureka.client.service-url.defaultZone", "http://localhost:8761/eureka/", "")
	want(t, c, "cluster.join", "a:7946,b:7946", "application.properties:4")
	want(t, c, "long.value", "one two", "")
	want(t, c, "spaced", "value", "")
	want(t, c, "muster.mode", "dev", "application.properties:14")
	c = mustLoad(t, p, Options{Profiles: []string{"prod"}})
	want(t, c, "server.port", "80", "application.properties:11")
	absent(t, c, "muster.mode")
}

func TestLoad_yamlShapes(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "a.yml", `defaults: &defaults
  x: 1
  y: 2
merged:
  <<: *defaults
  y: 3
cluster:
  join: [a, b]
eureka:
  instance:
    metadata-map:
      "[management.port]": "9001"
      zone: eu
users:
  - name: a
    role: read
empty:
nulled: ~
`)
	c := mustLoad(t, p, Options{})
	want(t, c, "merged.x", "1", "")
	want(t, c, "merged.y", "3", "")
	want(t, c, "cluster.join", "a,b", "a.yml:8")
	want(t, c, "eureka.instance.metadata-map.management.port", "9001", "a.yml:12")
	want(t, c, "users[0].role", "read", "a.yml:16")
	want(t, c, "empty", "", "")
	want(t, c, "nulled", "", "")
}

func TestLoad_placeholders(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", `server:
  port: ${PORT:8761}
eureka:
  instance:
    hostname: ${HOSTNAME_OVERRIDE:localhost}
  client:
    service-url:
      defaultZone: http://${eureka.instance.hostname}:${server.port}/eureka/
nested: ${missing.one:${missing.two:${server.port}}}
relaxed: ${my-app.base-url}
literal: \${not.a.placeholder}
colon: ${NOPE:http://x:1}
instance-id: ${spring.application.name:muster}:${random.value}
`)
	c := mustLoad(t, p, Options{Env: []string{"MY_APP_BASE_URL=http://relaxed"}})
	want(t, c, "eureka.client.service-url.defaultZone", "http://localhost:8761/eureka/", "application.yml:8")
	want(t, c, "nested", "8761", "")
	want(t, c, "relaxed", "http://relaxed", "")
	want(t, c, "literal", "${not.a.placeholder}", "")
	want(t, c, "colon", "http://x:1", "")
	if v, _ := c.Get("instance-id"); !strings.HasPrefix(v.Value, "muster:") || len(v.Value) != len("muster:")+32 {
		t.Errorf("instance-id %q", v.Value)
	}
	// The environment wins over the file, exact name first, then the
	// relaxed form of the key.
	c = mustLoad(t, p, Options{Env: []string{"PORT=9000", "EUREKA_INSTANCE_HOSTNAME=node1", "MYAPP_BASEURL=x"}})
	want(t, c, "server.port", "9000", "")
	want(t, c, "eureka.client.service-url.defaultZone", "http://node1:9000/eureka/", "")
	if v, _ := c.Get("server.port"); len(v.Resolved) != 1 || !strings.Contains(v.Resolved[0], "environment (PORT)") {
		t.Errorf("server.port notes %v", v.Resolved)
	}
	// The command line wins over the environment.
	c = mustLoad(t, p, Options{Env: []string{"PORT=9000", "MYAPP_BASEURL=x"}, Overrides: map[string]string{"eureka.instance.hostname": "cli"}})
	want(t, c, "eureka.client.service-url.defaultZone", "http://cli:9000/eureka/", "")
}

func TestLoad_unresolvedPlaceholdersAllReported(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", `server:
  port: ${PORT}
a: ${b}
b: ${a}
ok: fine
`)
	c, err := Load(p, Options{})
	var errs Errors
	if !errors.As(err, &errs) || c == nil {
		t.Fatalf("err %v, config %v", err, c)
	}
	if len(errs) != 3 {
		t.Fatalf("want 3 errors (port, a, b), got %d:\n%v", len(errs), err)
	}
	msg := err.Error()
	for _, part := range []string{"application.yml:2: server.port: unresolved placeholder ${PORT}", "placeholder cycle: a → b → a", "application.yml:3: a:"} {
		if !strings.Contains(msg, part) {
			t.Errorf("errors do not say %q:\n%s", part, msg)
		}
	}
	want(t, c, "ok", "fine", "")
}

func TestLoad_profilesActiveFromPlaceholderAndInclude(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", "spring.profiles.active: ${ENV_PROFILE:dev}\nspring.profiles.include: common\n---\nspring.config.activate.on-profile: dev\nx: dev\n---\nspring.config.activate.on-profile: prod\nx: prod\n---\nspring.config.activate.on-profile: common\ny: common\n")
	c := mustLoad(t, p, Options{Env: []string{"ENV_PROFILE=prod"}})
	want(t, c, "x", "prod", "")
	want(t, c, "y", "common", "")
	if strings.Join(c.Profiles, ",") != "common,prod" {
		t.Errorf("profiles %v", c.Profiles)
	}
}

func TestLoad_onCloudPlatform(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", "x: plain\n---\nspring.config.activate.on-cloud-platform: kubernetes\nx: k8s\n")
	want(t, mustLoad(t, p, Options{}), "x", "plain", "")
	want(t, mustLoad(t, p, Options{Env: []string{"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443"}}), "x", "k8s", "")
}

func TestLoad_badFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yml"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
	p := write(t, dir, "bad.yml", "a: [1,\n")
	if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), "bad.yml") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestMatchProfiles(t *testing.T) {
	tests := []struct {
		cond   string
		active []string
		want   bool
	}{
		{"dev", []string{"dev"}, true},
		{"dev", []string{"prod"}, false},
		{"!dev", []string{"prod"}, true},
		{"!dev", []string{"dev"}, false},
		{"dev, prod", []string{"prod"}, true},
		{"dev & eu", []string{"dev"}, false},
		{"dev & eu", []string{"eu", "dev"}, true},
		{"dev | eu", []string{"eu"}, true},
		{"(a | b) & !c", []string{"b"}, true},
		{"(a | b) & !c", []string{"b", "c"}, false},
		{"(a", []string{"a"}, false},
	}
	for _, tt := range tests {
		if got := MatchProfiles(tt.cond, tt.active); got != tt.want {
			t.Errorf("MatchProfiles(%q, %v) = %v, want %v", tt.cond, tt.active, got, tt.want)
		}
	}
}

func TestRelaxedEnvName(t *testing.T) {
	for key, env := range map[string]string{
		"server.port":                            "SERVER_PORT",
		"eureka.server.enable-self-preservation": "EUREKA_SERVER_ENABLESELFPRESERVATION",
		"cluster.join[0]":                        "CLUSTER_JOIN_0",
	} {
		if got := RelaxedEnvName(key); got != env {
			t.Errorf("RelaxedEnvName(%q) = %q, want %q", key, got, env)
		}
	}
}

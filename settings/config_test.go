package settings

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/xds"
)

func mustLoad(t *testing.T, file string, env, sets []string) *Settings {
	t.Helper()
	s, _, err := LoadSettings(file, env, sets)
	if err != nil {
		t.Fatalf("LoadSettings: %v", err)
	}
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSettings_defaults(t *testing.T) {
	s := mustLoad(t, "", nil, nil)
	if s.ServerPort != 8761 || !s.Registry.SelfPreservation || s.Registry.RenewalPercentThreshold != 0.85 ||
		s.Registry.ExpectedRenewalInterval != 30*time.Second || s.Registry.EvictionInterval != time.Minute ||
		s.Registry.RenewThresholdUpdateInterval != 15*time.Minute || s.Registry.DeltaRetention != 3*time.Minute ||
		s.Registry.DeltaRetentionInterval != 30*time.Second || s.Registry.RenewalRateWindow != time.Minute ||
		s.HTTP.DisableDelta || !s.Registry.SyncWhenTimestampDiffers || !s.RegisterWithEureka || s.Cluster.BindPort != 7946 ||
		s.Cluster.Zone != "default" || s.Replication.MaxQueueSize != 10000 || s.Sync.Attempts != 5 {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestLoadSettings_layersInOrder(t *testing.T) {
	file := writeFile(t, "application.yml", `
server:
  port: 9000
eureka:
  server:
    enable-self-preservation: false
    renewal-percent-threshold: 0.7
    eviction-interval-timer-in-ms: 5000
  client:
    service-url:
      defaultZone: http://a:8761/eureka/,http://b:8761/eureka/
  instance:
    metadata-map:
      management.port: "9001"
cluster:
  join: [n1:7946, n2:7946]
muster:
  measured-rate-window-ms: 5000
`)
	env := []string{"SERVER_PORT=9100", "MUSTER_EUREKA_SERVER_RENEWAL_PERCENT_THRESHOLD=0.75", "PATH=/bin", "EUREKA_UNRELATED_THING=x"}
	s := mustLoad(t, file, env, []string{"server.port=9200"})
	if s.ServerPort != 9200 {
		t.Errorf("server.port = %d, want 9200 from --set over env over file", s.ServerPort)
	}
	if s.Registry.RenewalPercentThreshold != 0.75 {
		t.Errorf("renewal-percent-threshold = %v, want 0.75 from MUSTER_ env", s.Registry.RenewalPercentThreshold)
	}
	if s.Registry.SelfPreservation || s.Registry.EvictionInterval != 5*time.Second || s.Registry.RenewalRateWindow != 5*time.Second {
		t.Errorf("file values not applied: %+v", s)
	}
	if got := s.ServiceURLs["defaultZone"]; len(got) != 2 || got[1] != "http://b:8761/eureka/" {
		t.Errorf("service-url.defaultZone = %v", got)
	}
	if s.InstanceMetadata["management.port"] != "9001" {
		t.Errorf("metadata-map = %v", s.InstanceMetadata)
	}
	if len(s.Cluster.Join) != 2 || s.Cluster.Join[0] != "n1:7946" {
		t.Errorf("cluster.join = %v", s.Cluster.Join)
	}
}

// Spring's relaxed binding: camelCase, kebab-case and env-style names all
// reach the same setting, so an existing application.yml works.
func TestLoadSettings_relaxedNames(t *testing.T) {
	for _, set := range []string{
		"eureka.server.enableSelfPreservation=false",
		"eureka.server.enable-self-preservation=false",
		"EUREKA.SERVER.ENABLE_SELF_PRESERVATION=false",
	} {
		if s := mustLoad(t, "", nil, []string{set}); s.Registry.SelfPreservation {
			t.Errorf("%s: not applied", set)
		}
	}
	s := mustLoad(t, "", []string{"EUREKA_SERVER_ENABLESELFPRESERVATION=false", "EUREKA_CLIENT_SERVICEURL_DEFAULTZONE=http://x:1/eureka/"}, nil)
	if s.Registry.SelfPreservation || len(s.ServiceURLs["defaultZone"]) != 1 {
		t.Errorf("Spring env names: selfPreservation %v, serviceURLs %v", s.Registry.SelfPreservation, s.ServiceURLs)
	}
}

func TestLoadSettings_propertiesFile(t *testing.T) {
	file := writeFile(t, "application.properties", "# comment\nserver.port=9300\neureka.server.disable-delta = true\n")
	s := mustLoad(t, file, nil, nil)
	if s.ServerPort != 9300 || !s.HTTP.DisableDelta {
		t.Fatalf("properties: port %d disableDelta %v", s.ServerPort, s.HTTP.DisableDelta)
	}
}

func TestLoadSettings_errorsNameTheKey(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   []string
		sets  []string
		wants []string
	}{
		{"unknown key", "", nil, []string{"eureka.server.enable-self-preservaton=false", "muster.config.unknown-keys=error"},
			[]string{`"eureka.server.enable-self-preservaton"`, `did you mean "eureka.server.enable-self-preservation"`, "muster.config.unknown-keys is error"}},
		{"unknown muster key", "", nil, []string{"muster.frobnicate=1"}, []string{`"muster.frobnicate"`, "muster.config.unknown-keys: warn"}},
		{"unknown cluster key", "", nil, []string{"cluster.joins=a:7946"}, []string{`"cluster.joins" (did you mean "cluster.join"?)`, "must be known"}},
		{"unknown MUSTER_ env", "", []string{"MUSTER_NOPE=1"}, nil, []string{"environment", `"nope"`}},
		{"bad int", "", nil, []string{"server.port=eighty"}, []string{"server.port", "whole number"}},
		{"port out of range", "", nil, []string{"server.port=70000"}, []string{"server.port", "0 to 65535"}},
		{"bad bool", "", nil, []string{"eureka.server.disable-delta=perhaps"}, []string{"eureka.server.disable-delta", "true or false"}},
		{"bad threshold", "", nil, []string{"eureka.server.renewal-percent-threshold=1.5"}, []string{"renewal-percent-threshold"}},
		{"negative interval", "", nil, []string{"eureka.server.eviction-interval-timer-in-ms=-5"}, []string{"eviction-interval-timer-in-ms", "positive"}},
		{"bad log level", "", nil, []string{"muster.log.level=loud"}, []string{"muster.log.level"}},
		{"bad service url", "", nil, []string{"eureka.client.service-url.defaultZone=ftp://x"}, []string{"service-url.defaultZone"}},
		{"unknown key in file", writeFile(t, "a.yml", "muster:\n  config:\n    unknown-keys: error\neureka:\n  server:\n    colour: blue\n"), nil, nil, []string{"a.yml:6", "eureka.server.colour"}},
		{"missing file", "/nonexistent/muster.yml", nil, nil, []string{"/nonexistent/muster.yml"}},
		{"--set without =", "", nil, []string{"server.port"}, []string{"key=value"}},
		// Limits of the packages' fields are the packages' (Validate); the
		// error still names the key and the value as written.
		{"rate window below the registry's minimum", "", nil, []string{"muster.measured-rate-window-ms=500"},
			[]string{`setting muster.measured-rate-window-ms = "500"`, "RenewalRateWindow", "at least 1s"}},
		{"queue below a batch", "", []string{"EUREKA_SERVER_MAXELEMENTSINPEERREPLICATIONPOOL=100"}, nil,
			[]string{`setting eureka.server.max-elements-in-peer-replication-pool = "100"`, "MaxQueueSize"}},
		{"instances limit", "", nil, []string{"muster.max-instances=0"}, []string{"setting muster.max-instances", "MaxInstances"}},
		{"peer timeout", "", nil, []string{"eureka.server.peer-node-read-timeout-ms=0"}, []string{"setting eureka.server.peer-node-read-timeout-ms", "positive"}},
		{"sync retries", "", nil, []string{"eureka.server.registry-sync-retries=1001"}, []string{"setting eureka.server.registry-sync-retries", "1000"}},
		{"bind address", "", nil, []string{"cluster.bind-addr=localhost"}, []string{"setting cluster.bind-addr", "not an IP address"}},
		{"seed port", "", nil, []string{"cluster.join=a:7946,b:99999"}, []string{"setting cluster.join", "99999"}},
		{"console actions", "", nil, []string{"muster.dashboard.actions-without-auth=all"}, []string{"muster.dashboard.actions-without-auth", "loopback, any, none"}},
	}
	for _, tt := range tests {
		_, _, err := LoadSettings(tt.file, tt.env, tt.sets)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, want := range tt.wants {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, want)
			}
		}
	}
}

func TestLoadSettings_springFileWithForeignAndIgnoredKeys(t *testing.T) {
	file := writeFile(t, "application.yml", `
spring:
  application:
    name: eureka-server

management:
  endpoints:
    web:
      exposure:
        include: "*"
eureka:
  server:
    response-cache-update-interval-ms: 3000
  client:
    fetch-registry: false
    register-with-eureka: true
`)
	s, notices, err := LoadSettings(file, nil, nil)
	if err != nil {
		t.Fatalf("a typical Spring Eureka server file must load: %v", err)
	}
	if s.AppName != "eureka-server" || !s.RegisterWithEureka {
		t.Errorf("settings: %+v", s)
	}
	var warned bool
	for _, n := range notices {
		if n.Warn && strings.Contains(n.Msg, "response-cache-update-interval-ms") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning for an Eureka key Muster ignores: %+v", notices)
	}
}

// Every default lives in one place. Loading nothing leaves each package's
// Config exactly its DefaultConfig (so cmd sets no default of its own, and
// a key that feeds two packages agrees with both of their defaults); and
// what muster config and README print for a key that sets a package's
// field is that package's default.
func TestSettings_defaultsAreThePackages(t *testing.T) {
	s := mustLoad(t, "", nil, nil)
	packages := Settings{
		Registry:    registry.DefaultConfig(),
		Replication: replication.DefaultConfig(),
		Transport:   replication.DefaultHTTPTransportConfig(),
		Sync:        replication.DefaultSyncConfig(),
		AntiEntropy: replication.DefaultAntiEntropyConfig(),
		HTTP:        httpapi.DefaultConfig(),
		Cluster:     cluster.DefaultConfig(),
		DNS:         dns.DefaultConfig(),
		XDS:         xds.DefaultConfig(),
		HealthCheck: healthcheck.DefaultConfig(),
		Regions:     regions.DefaultConfig(),
		Drain:       drain.DefaultKnobs(),
	}
	for _, c := range packageConfigs {
		got := reflect.ValueOf(s).Elem().FieldByName(c.field).Interface()
		want := reflect.ValueOf(&packages).Elem().FieldByName(c.field).Interface()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Settings.%s after loading nothing differs from the package's DefaultConfig:\n got %+v\nwant %+v", c.field, got, want)
		}
	}
	keys := 0
	for _, st := range settings {
		if settingConfig[st.Key] == "" {
			continue
		}
		keys++
		if got := st.format(&packages); got != st.Default {
			t.Errorf("%s: muster config prints the default %q, the package's DefaultConfig has %q", st.Key, st.Default, got)
		}
	}
	if keys < 30 {
		t.Errorf("only %d keys set a package's field: the mapping is not being checked", keys)
	}
}

// docs/configuration.md documents every setting with its default.
func TestConfigurationDoc_documentsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, st := range settings {
		row := "| `" + st.Key + "` |"
		if !strings.Contains(readme, row) {
			t.Errorf("docs/configuration.md lacks a row for %s", st.Key)
			continue
		}
		line := readme[strings.Index(readme, row):]
		line = line[:strings.IndexByte(line, '\n')]
		if st.Default != "" && !strings.Contains(line, "`"+st.Default+"`") {
			t.Errorf("docs/configuration.md row of %s does not give the default `%s`: %s", st.Key, st.Default, line)
		}
	}
}

func TestLoadSettings_environmentNames(t *testing.T) {
	env := []string{
		"MUSTER_LOG_LEVEL=debug", // muster.* without its own prefix
		"MUSTER_MUSTER_MEASURED_RATE_WINDOW_MS=5000",
		"MUSTER_EUREKA_CLIENT_SERVICE_URL_DEFAULTZONE=http://a:8761/eureka/",
		"MUSTER_EUREKA_CLIENT_SERVICEURL_ZONE2=http://b:8761/eureka/",
		// Kubernetes service links for a Service named muster.
		"MUSTER_PORT=tcp://10.0.0.9:8761", "MUSTER_PORT_8761_TCP_ADDR=10.0.0.9", "MUSTER_SERVICE_HOST=10.0.0.9",
	}
	s := mustLoad(t, "", env, nil)
	if s.LogLevel != "debug" || s.Registry.RenewalRateWindow != 5*time.Second {
		t.Errorf("log level %q, window %s", s.LogLevel, s.Registry.RenewalRateWindow)
	}
	if len(s.ServiceURLs["defaultZone"]) != 1 || len(s.ServiceURLs["zone2"]) != 1 {
		t.Errorf("service urls %v", s.ServiceURLs)
	}
}

// Every typo of a file is reported in one run, each with its file:line and
// a did-you-mean; Spring keys Muster does not use are accepted with a
// warning; other namespaces are ignored; muster.config.unknown-keys: warn
// starts anyway.
func TestLoadSettings_allProblemsAtOnce(t *testing.T) {
	text := `eureka:
  server:
    enable-self-preservaton: false
    rate-limiter-enabled: true
    a-s-g-cache-expiry-timeout-ms: 1000
  client:
    registerWithEurka: false
    instance-info-replication-interval-seconds: 10
server:
  prot: 8762
  tomcat:
    max-threads: 10
security:
  user:
    name: admin
    password: s3cret-pass
jhipster:
  registry:
    password: x
zuul:
  routes: {a: b}
`
	file := writeFile(t, "application.yml", text+"muster.config.unknown-keys: error\n")
	_, _, err := LoadSettings(file, nil, nil)
	if err == nil {
		t.Fatal("typos: no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`application.yml:3: unknown setting "eureka.server.enable-self-preservaton" (did you mean "eureka.server.enable-self-preservation"?)`,
		`application.yml:7: unknown setting "eureka.client.registerWithEurka" (did you mean "eureka.client.register-with-eureka"?)`,
		`application.yml:10: unknown setting "server.prot" (did you mean "server.port"?)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 3 {
		t.Errorf("want exactly the 3 typos, got %d lines:\n%s", n, msg)
	}
	if strings.Contains(msg, "jhipster") || strings.Contains(msg, "rate-limiter") || strings.Contains(msg, "tomcat") {
		t.Errorf("valid keys refused:\n%s", msg)
	}

	warnFile := writeFile(t, "application.yml", text+"muster.config.unknown-keys: warn\ncluster.enabled: false\n")
	s, notices, err := LoadSettings(warnFile, nil, nil)
	if err != nil {
		t.Fatalf("unknown-keys warn: %v", err)
	}
	if s.SpringUserName != "admin" || s.SpringUserPassword != "s3cret-pass" {
		t.Errorf("Spring Boot 1.x security.user.* not honoured: %q", s.SpringUserName)
	}
	var warns []string
	for _, n := range notices {
		if n.Warn {
			warns = append(warns, n.Msg)
		}
		if strings.Contains(n.Msg, "s3cret") {
			t.Errorf("a notice shows the password: %s", n.Msg)
		}
	}
	all := strings.Join(warns, "\n")
	for _, want := range []string{"enable-self-preservaton", "application.yml:4: eureka.server.rate-limiter-enabled is accepted but not used: no rate limiter",
		"a-s-g-cache-expiry-timeout-ms", "instance-info-replication-interval-seconds", "server.tomcat.max-threads"} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	if strings.Contains(all, "jhipster") || strings.Contains(all, "zuul") {
		t.Errorf("foreign namespaces warned about:\n%s", all)
	}
}

func TestLoadSettings_secretsMaskedInErrors(t *testing.T) {
	_, _, err := LoadSettings("", nil, []string{"cluster.peer-secret=short-secret"})
	if err == nil {
		t.Skip("a short peer secret is accepted alone")
	}
	if strings.Contains(err.Error(), "short-secret") {
		t.Errorf("error shows the secret: %v", err)
	}
}

// TestLoadSettings_unknownKeysAsSpringTreatsThem: by default
// (muster.config.unknown-keys: spring) an unknown key under eureka.* or
// server.* is a warning with a did-you-mean, as Spring's beans ignore
// fields they lack; under muster.* and cluster.* it is an error; a key a
// placeholder reads is never unknown; each message says how to make it the
// other.
func TestLoadSettings_unknownKeysAsSpringTreatsThem(t *testing.T) {
	text := `eureka:
  password: s3cret-pass
  instance:
    port: 8761
  server:
    enable-self-preservaton: false
  client:
    service-url:
      defaultZone: http://admin:${eureka.password}@peer1:8761/eureka/
server:
  ssl:
    enabled: false
    trustStoreRequired: true
cluster:
  enabled: false
`
	s, notices, err := LoadSettings(writeFile(t, "application.yml", text), nil, nil)
	if err != nil {
		t.Fatalf("Spring's namespaces: %v", err)
	}
	if got := s.ServiceURLs["defaultZone"]; len(got) != 1 || got[0] != "http://admin:s3cret-pass@peer1:8761/eureka/" {
		t.Errorf("defaultZone %v", got)
	}
	var warns []string
	for _, n := range notices {
		if n.Warn {
			warns = append(warns, n.Msg)
		}
		if strings.Contains(n.Msg, "eureka.password") && n.Warn {
			t.Errorf("a key read by a placeholder is warned about: %s", n.Msg)
		}
		if strings.Contains(n.Msg, "s3cret") {
			t.Errorf("a notice shows the password: %s", n.Msg)
		}
	}
	all := strings.Join(warns, "\n")
	for _, want := range []string{
		`application.yml:4: unknown setting "eureka.instance.port"`,
		`application.yml:6: unknown setting "eureka.server.enable-self-preservaton" (did you mean "eureka.server.enable-self-preservation"?): ignored, as Spring ignores a property its bean does not have (muster.config.unknown-keys: error refuses it)`,
		`application.yml:13: unknown setting "server.ssl.trustStoreRequired"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "unknown setting"); n != 3 {
		t.Errorf("%d unknown-key warnings, want 3 (one each):\n%s", n, all)
	}

	_, _, err = LoadSettings(writeFile(t, "application.yml", text+"  joins: a:7946\nmuster:\n  log:\n    levle: debug\n"), nil, nil)
	if err == nil {
		t.Fatal("unknown keys of cluster.* and muster.*: no error")
	}
	for _, want := range []string{
		`application.yml:16: unknown setting "cluster.joins" (did you mean "cluster.join"?); keys of Muster's own namespaces (muster.*, cluster.*, MUSTER_*) must be known (muster.config.unknown-keys: warn starts anyway)`,
		`application.yml:19: unknown setting "muster.log.levle" (did you mean "muster.log.level"?)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), "eureka.") {
		t.Errorf("Spring's namespaces refused:\n%s", err)
	}
	_, _, err = LoadSettings("", []string{"MUSTER_CLUSTER_JOINS=a:7946"}, nil)
	if err == nil || !strings.Contains(err.Error(), `did you mean "cluster.join"?`) {
		t.Errorf("MUSTER_ variable: %v, want a did-you-mean", err)
	}
}

func TestMaskSecret_importURLs(t *testing.T) {
	got := maskSecret("spring.config.import", "optional:configserver:http://cfg:pw-secret@127.0.0.1:8888;http://cfg:pw-secret@127.0.0.2:8888, file:a.yml")
	if strings.Contains(got, "pw-secret") || !strings.Contains(got, "http://cfg:******@127.0.0.1:8888") || !strings.Contains(got, "file:a.yml") {
		t.Errorf("masked: %s", got)
	}
}

// The node's own registration advertises the actuator's info and health,
// as Spring Cloud's instance does, under the actuator's base path.
func TestLoadSettings_selfRegistrationURLsFollowTheActuator(t *testing.T) {
	s := mustLoad(t, "", nil, nil)
	if s.InstanceStatusPagePath != "/actuator/info" || s.InstanceHealthCheckPath != "/actuator/health" {
		t.Errorf("defaults %s, %s", s.InstanceStatusPagePath, s.InstanceHealthCheckPath)
	}
	s = mustLoad(t, "", nil, []string{"management.endpoints.web.base-path=/manage", "eureka.instance.health-check-url-path=/livez"})
	if s.InstanceStatusPagePath != "/manage/info" || s.InstanceHealthCheckPath != "/livez" {
		t.Errorf("moved actuator: %s, %s", s.InstanceStatusPagePath, s.InstanceHealthCheckPath)
	}
}

func TestLoadSettings_mavenTokenInAProperty(t *testing.T) {
	file := writeFile(t, "application.properties", "server.port=@server.port@\ninfo.app.version=@project.version@\n")
	_, _, err := LoadSettings(file, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "application.properties:1") || !strings.Contains(err.Error(), "@server.port@ is an unfiltered Maven token") ||
		strings.Contains(err.Error(), "project.version") {
		t.Errorf("error %v, want one for server.port naming the token (info.* is not Muster's)", err)
	}
}

package main

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/settings"
)

// corpusCase is one Spring Eureka server configuration of
// testdata/spring, as a Spring team writes them, and what Muster must make
// of it.
type corpusCase struct {
	name string
	file string
	env  map[string]string // set for the case; every name in unsetEnv is unset otherwise
	args []string          // more command-line arguments (--profile, --KEY=VALUE)
	// want: effective values (muster config --check's table); origins:
	// substrings of where each came from.
	want    map[string]string
	origins map[string]string
	// errors: each must be among the problems, and there must be exactly
	// as many; warnings and ignored: substrings of the warnings and of the
	// ignored keys.
	errors   []string
	warnings []string
	ignored  []string
	// start: the configuration must start a node; startArgs are what the
	// test adds besides loopback ports (unreachable peers of a peer-aware
	// file); user is the Basic credentials the API wants; check looks
	// further at the running node's base URL.
	start     bool
	startArgs []string
	user      string
	check     func(t *testing.T, base string)
}

// unsetEnv are the variables the corpus's placeholders read.
var unsetEnv = []string{"PORT", "APP_NAME", "EUREKA_HOST", "MY_REGISTRY_ZONE", "EVICTION_MS", "THRESHOLD", "EUREKA_PEERS",
	"POD_NAME", "SERVICE_NAME", "REGISTRY_PASSWORD", "JHIPSTER_REGISTRY_PASSWORD", "EUREKA_PASSWORD", "SPRING_PROFILES_ACTIVE", "SERVER_PORT"}

// noSync: a peer-aware file names peers that do not exist here; without
// syncUp the node opens at once (the peers' absence is logged).
var noSync = []string{"--eureka.server.registry-sync-retries=0"}

func corpus() []corpusCase {
	return []corpusCase{
		{name: "standalone (Spring's guide)", file: "standalone.yml",
			want: map[string]string{"server.port": "8761", "eureka.client.service-url.defaultZone": "http://localhost:8761/eureka/",
				"eureka.client.register-with-eureka": "false", "eureka.server.wait-time-in-ms-when-sync-empty": "0"},
			origins:  map[string]string{"server.port": "standalone.yml:3", "eureka.client.service-url.defaultZone": "standalone.yml:12"},
			warnings: []string{"eureka.client.fetchRegistry is accepted but not used"},
			ignored:  []string{"logging.level.com.netflix.eureka"},
			start:    true},
		{name: "peer aware, legacy spring.profiles, peer1", file: "peer-aware.yml", args: []string{"--profile", "peer1"},
			want:    map[string]string{"eureka.instance.hostname": "peer1", "eureka.client.service-url.defaultZone": "https://peer2/eureka/"},
			origins: map[string]string{"eureka.instance.hostname": "peer-aware.yml:7"},
			start:   true, startArgs: noSync},
		{name: "peer aware, peer2 from SPRING_PROFILES_ACTIVE", file: "peer-aware.yml", env: map[string]string{"SPRING_PROFILES_ACTIVE": "peer2"},
			want: map[string]string{"eureka.instance.hostname": "peer2", "eureka.client.service-url.defaultZone": "https://peer1/eureka/"}},
		{name: "peer aware, no profile: no peer document", file: "peer-aware.yml",
			want: map[string]string{"eureka.instance.hostname": "", "server.port": "8761"}, start: true},
		{name: "three peers, Boot 2.4 on-profile, unconditional second document", file: "peer-aware-boot24.yml", args: []string{"--spring.profiles.active=peer1"},
			want: map[string]string{"server.port": "8771", "eureka.instance.hostname": "peer1", "eureka.server.enable-self-preservation": "false",
				"eureka.server.eviction-interval-timer-in-ms": "5000", "spring.application.name": "discovery",
				"eureka.client.service-url.defaultZone": "http://peer2:8772/eureka/,http://peer3:8773/eureka/"},
			origins: map[string]string{"eureka.server.enable-self-preservation": "peer-aware-boot24.yml:14", "server.port": "peer-aware-boot24.yml:22"},
			start:   true, startArgs: noSync},
		{name: "three peers, negated profile document", file: "peer-aware-boot24.yml",
			want:  map[string]string{"eureka.instance.hostname": "localhost", "eureka.client.service-url.defaultZone": "http://localhost:8761/eureka/"},
			start: true},
		{name: "placeholders from the environment, relaxed and nested", file: "placeholders.yml",
			env: map[string]string{"PORT": "9123", "EUREKA_HOST": "registry.local", "MY_REGISTRY_ZONE": "zone-b"},
			want: map[string]string{"server.port": "9123", "eureka.instance.hostname": "registry.local", "spring.application.name": "eureka-server",
				"eureka.client.service-url.defaultZone": "http://registry.local:9123/eureka/", "eureka.instance.metadata-map.zone": "zone-b",
				"eureka.server.eviction-interval-timer-in-ms": "15000", "eureka.server.renewal-percent-threshold": "0.85"},
			origins: map[string]string{"server.port": "from the environment (PORT)", "eureka.instance.metadata-map.zone": "MY_REGISTRY_ZONE"},
			start:   true},
		{name: "placeholders: the command line wins", file: "placeholders.yml", args: []string{"--server.port=9200", "--EVICTION_MS", "7000"},
			env:  map[string]string{"PORT": "9123", "MY_REGISTRY_ZONE": "z"},
			want: map[string]string{"server.port": "9200", "eureka.client.service-url.defaultZone": "http://localhost:9200/eureka/", "eureka.server.eviction-interval-timer-in-ms": "7000"}},
		{name: "unresolved placeholders, all reported", file: "unresolved.yml",
			errors: []string{"unresolved.yml:6: eureka.client.service-url.defaultZone: unresolved placeholder ${EUREKA_PEERS}",
				"unresolved.yml:8: eureka.instance.hostname: unresolved placeholder ${POD_NAME}"}},
		{name: "jhipster registry: foreign namespaces, dashboard path, actuator paths", file: "jhipster-registry.yml",
			want: map[string]string{"eureka.dashboard.path": "/registry", "eureka.instance.status-page-url-path": "/management/info",
				"eureka.instance.health-check-url-path": "/management/health", "management.endpoints.web.base-path": "/management",
				"spring.security.user.password": "******", "eureka.server.enable-self-preservation": "true",
				"eureka.client.service-url.defaultZone": "http://admin:******@localhost:8761/eureka/"},
			origins: map[string]string{"eureka.server.enable-self-preservation": "jhipster-registry.yml:63"},
			warnings: []string{"eureka.instance.appname is accepted but not used", "spring.security.user.roles is accepted but not used",
				"gossip clustering is off: users are configured"},
			ignored: []string{"jhipster.registry.password = ******", "zuul.routes.api.path", "spring.cloud.config.server.git.uri"},
			start:   true, user: "admin:admin",
			check: func(t *testing.T, base string) {
				if code := getAs(t, base+"/registry", "admin:admin"); code != 200 {
					t.Errorf("eureka.dashboard.path /registry: %d", code)
				}
				if code := getAs(t, base+"/registry", ""); code != 401 {
					t.Errorf("/registry without credentials: %d, want 401", code)
				}
			}},
		{name: "jhipster registry: gossip asked for with authentication needs a peer secret", file: "jhipster-registry.yml",
			args: []string{"--cluster.enabled=true"}, errors: []string{"cluster.peer-secret is required"}},
		{name: "typos: Spring's namespaces warn with a did-you-mean, Muster's are errors", file: "typos.yml",
			errors: []string{
				`typos.yml:12: unknown setting "cluster.joins" (did you mean "cluster.join"?); keys of Muster's own namespaces (muster.*, cluster.*, MUSTER_*) must be known (muster.config.unknown-keys: warn starts anyway)`,
			},
			warnings: []string{
				`typos.yml:5: unknown setting "eureka.server.enable-self-preservaton" (did you mean "eureka.server.enable-self-preservation"?): ignored, as Spring ignores a property its bean does not have (muster.config.unknown-keys: error refuses it)`,
				`typos.yml:6: unknown setting "eureka.server.renewal-percent-treshold" (did you mean "eureka.server.renewal-percent-threshold"?)`,
				`typos.yml:8: unknown setting "eureka.client.register-with-eurka" (did you mean "eureka.client.register-with-eureka"?)`,
				`typos.yml:10: unknown setting "eureka.instnce.hostname" (did you mean "eureka.instance.hostname"?)`,
			}},
		{name: "typos with muster.config.unknown-keys: error: every one at once, with line and did-you-mean", file: "typos.yml",
			args: []string{"--muster.config.unknown-keys=error"},
			errors: []string{
				`typos.yml:5: unknown setting "eureka.server.enable-self-preservaton" (did you mean "eureka.server.enable-self-preservation"?); every unknown key is an error as muster.config.unknown-keys is error`,
				`typos.yml:6: unknown setting "eureka.server.renewal-percent-treshold" (did you mean "eureka.server.renewal-percent-threshold"?)`,
				`typos.yml:8: unknown setting "eureka.client.register-with-eurka" (did you mean "eureka.client.register-with-eureka"?)`,
				`typos.yml:10: unknown setting "eureka.instnce.hostname" (did you mean "eureka.instance.hostname"?)`,
				`typos.yml:12: unknown setting "cluster.joins" (did you mean "cluster.join"?)`,
			}},
		{name: "keys Spring accepts: one warning each, placeholder-read keys none", file: "spring-namespaces.yml",
			want: map[string]string{"eureka.client.service-url.defaultZone": "http://user:******@localhost:8761/eureka/"},
			warnings: []string{`spring-namespaces.yml:4: unknown setting "eureka.instance.port"`,
				`spring-namespaces.yml:6: unknown setting "eureka.server.enable-self-preservaton" (did you mean "eureka.server.enable-self-preservation"?)`,
				`spring-namespaces.yml:14: unknown setting "server.ssl.trustStoreRequired"`},
			ignored: []string{"eureka.password = ****** "},
			start:   true, startArgs: []string{"--cluster.enabled=false"}},
		{name: "a password alone: Spring Boot's user", file: "password-only.yml", args: []string{"--cluster.enabled=false"},
			want:    map[string]string{"spring.security.user.name": "user", "eureka.client.register-with-eureka": "true"},
			origins: map[string]string{"spring.security.user.name": "Spring Boot"},
			start:   true, user: "user:change-me-please",
			check: func(t *testing.T, base string) {
				// Spring's default: the server registers itself, once it
				// opened (a moment after it serves).
				waitFor(t, 10*time.Second, "the node to register itself (register-with-eureka's default true)", func() bool {
					body := getBody(t, base+"/eureka/apps/MUSTER", "user:change-me-please")
					return strings.Contains(body, "<app>MUSTER</app>")
				})
			}},
		{name: "several locations, a folder, profile groups and an include in a profile document", file: "several/base.yml,several/override.properties",
			args: []string{"--spring.config.additional-location=" + filepath.Join("testdata", "spring", "several", "conf") + "/", "--profile", "prod"},
			want: map[string]string{"server.port": "8770", "eureka.instance.hostname": "override-host", "spring.application.name": "registry",
				"eureka.environment": "from-folder", "cluster.zone": "eu-west-1a", "eureka.server.enable-self-preservation": "false",
				"eureka.datacenter": "included-by-eu"},
			origins: map[string]string{"server.port": "override.properties:1", "cluster.zone": "conf/application.yml:11",
				"eureka.server.enable-self-preservation": "conf/application.yml:19"},
			start: true, startArgs: []string{"--cluster.enabled=false"}},
		{name: "bootstrap.yml before application.yml", file: "bootstrap/application.yml",
			want:    map[string]string{"spring.application.name": "bootstrapped-registry", "server.port": "8761"},
			origins: map[string]string{"spring.application.name": "bootstrap/bootstrap.yml:3", "server.port": "bootstrap/application.yml:2"},
			start:   true},
		{name: "spring.config.import of file: and optional:file:", file: "imports/application.yml",
			want:    map[string]string{"eureka.instance.hostname": "imported-host", "eureka.server.renewal-percent-threshold": "0.7"},
			origins: map[string]string{"eureka.instance.hostname": "imports/more/peers.yml:3"},
			start:   true},
		{name: "an unfiltered Maven token", file: "maven-token.yml",
			errors: []string{"maven-token.yml:4: @project.version@ is an unfiltered Maven token: the file needs Maven resource filtering"}},
		{name: "typos with muster.config.unknown-keys: warn", file: "typos-warn.yml",
			want:     map[string]string{"muster.config.unknown-keys": "warn", "eureka.server.enable-self-preservation": "true"},
			warnings: []string{`typos-warn.yml:5: unknown setting "eureka.server.enable-self-preservaton"`, "typos-warn.yml:12"},
			start:    true},
		{name: "Spring Boot 1.x legacy keys, camelCase", file: "boot1-legacy.yml",
			want: map[string]string{"spring.security.user.name": "eureka", "spring.security.user.password": "******",
				"eureka.instance.prefer-ip-address": "true", "eureka.instance.lease-renewal-interval-in-seconds": "10",
				"eureka.server.expected-client-renewal-interval-seconds": "10", "eureka.client.service-url.defaultZone": "http://eureka:******@localhost:8761/eureka/"},
			origins:  map[string]string{"spring.security.user.name": "boot1-legacy.yml:11", "server.context-path": "boot1-legacy.yml:4"},
			warnings: []string{"server.tomcat.max-threads", "security.basic.enabled", "eureka.server.aSGCacheExpiryTimeoutMs"},
			ignored:  []string{"endpoints.health.sensitive", "management.security.enabled"},
			start:    true, user: "eureka:change-me-please"},
		{name: "keys the old loader refused; client and dashboard off", file: "client-disabled.yml",
			want: map[string]string{"eureka.client.enabled": "false", "eureka.dashboard.enabled": "false", "eureka.client.register-with-eureka": "false",
				"eureka.instance.health-check-url-path": "/actuator/health",
				// Honoured since remote regions exist (docs/regions.md).
				"eureka.server.remote-region-urls-with-name.us-west":         "http://127.0.0.1:1/eureka/",
				"eureka.server.disable-transparent-fallback-to-other-region": "true"},
			warnings: []string{"eureka.client.healthcheck.enabled", "eureka.client.instance-info-replication-interval-seconds",
				"eureka.server.a-sgcache-expiry-timeout-ms", "eureka.server.rate-limiter-enabled", "eureka.server.max-threads-for-status-replication",
				"eureka.server.peer-node-total-connections",
				"eureka.client.enabled is false: the static peers"},
			ignored: []string{"ctrip.apollo.meta"},
			start:   true,
			check: func(t *testing.T, base string) {
				if code := getAs(t, base+"/", ""); code != 404 {
					t.Errorf("dashboard with eureka.dashboard.enabled false: %d, want 404", code)
				}
			}},
		{name: "bad values name the key and the line", file: "bad-values.yml",
			errors: []string{`bad-values.yml:2: setting server.port = "eighty": want a whole number`,
				`bad-values.yml:5: setting eureka.server.renewal-percent-threshold = "lots": want a number`}},
		{name: "profile files beside the file", file: "profile-files/registry.yml", env: map[string]string{"SPRING_PROFILES_ACTIVE": "dev,eu"},
			want: map[string]string{"eureka.environment": "dev-from-application", "eureka.datacenter": "dev-from-registry",
				"server.port": "8799", "cluster.zone": "eu-west-1a"},
			origins: map[string]string{"eureka.datacenter": "registry-dev.yml:2", "cluster.zone": "application-eu.properties:1"},
			start:   true},
		{name: ".properties documents, active profile from the file, profile file", file: "props/application.properties",
			want: map[string]string{"eureka.server.enable-self-preservation": "false", "eureka.server.renewal-percent-threshold": "0.49",
				"eureka.client.service-url.defaultZone": "http://localhost:8761/eureka/", "cluster.join": "seed-a:7946,seed-b:7946"},
			origins: map[string]string{"eureka.server.enable-self-preservation": "application.properties:14", "eureka.server.renewal-percent-threshold": "application-prod.properties:1"},
			// Seeds that do not exist here: the node would wait for its
			// peers' clients as after a full restart (muster.cold-start-wait-ms),
			// and resolving their names is slow without a network.
			start: true, startArgs: []string{"--muster.cold-start-wait-ms=0", "--cluster.join="}},
	}
}

var (
	effectiveRow = regexp.MustCompile(`^  (\S+)\s+= (.*?)\s{2,}(\S.*)$`)
	ignoredRow   = regexp.MustCompile(`^  (\S+)\s+= (.*)$`)
)

// checkOutput is what muster config --check printed, parsed.
type checkOutput struct {
	values, origins          map[string]string
	errors, warnings, ignore []string
	code                     int
	raw                      string
}

func runCheck(t *testing.T, c corpusCase) checkOutput {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"config", "--check", "--config", corpusPath(c.file)}, c.args...)
	res := checkOutput{values: map[string]string{}, origins: map[string]string{}}
	res.code = run(args, &out, &errOut)
	res.raw = out.String() + errOut.String()
	section := ""
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "Effective settings"):
			section = "effective"
		case strings.HasPrefix(line, "Ignored keys"):
			section = "ignored"
		case strings.HasPrefix(line, "  error:   "):
			res.errors = append(res.errors, strings.TrimPrefix(line, "  error:   "))
		case strings.HasPrefix(line, "  warning: "):
			res.warnings = append(res.warnings, strings.TrimPrefix(line, "  warning: "))
		case section == "effective":
			if m := effectiveRow.FindStringSubmatch(line); m != nil {
				res.values[m[1]], res.origins[m[1]] = strings.TrimSpace(m[2]), m[3]
			}
		case section == "ignored" && ignoredRow.MatchString(line):
			res.ignore = append(res.ignore, strings.Join(strings.Fields(line), " "))
		}
	}
	return res
}

func setCaseEnv(t *testing.T, c corpusCase) {
	for _, name := range unsetEnv {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for k, v := range c.env {
		t.Setenv(k, v)
	}
}

// Each configuration of the corpus, through muster config --check (the
// CLI's own code path): the effective values and their origins, every
// error and no other, the warnings and the ignored keys.
func TestSpringCorpus_configCheck(t *testing.T) {
	for _, c := range corpus() {
		t.Run(c.name, func(t *testing.T) {
			setCaseEnv(t, c)
			res := runCheck(t, c)
			if wantFail := len(c.errors) > 0; (res.code != 0) != wantFail {
				t.Fatalf("exit %d, want failure %v:\n%s", res.code, wantFail, res.raw)
			}
			if len(res.errors) != len(c.errors) {
				t.Errorf("%d errors, want %d:\n%s", len(res.errors), len(c.errors), strings.Join(res.errors, "\n"))
			}
			for _, want := range c.errors {
				if !containsPart(res.errors, want) {
					t.Errorf("no error %q in:\n%s", want, strings.Join(res.errors, "\n"))
				}
			}
			for key, want := range c.want {
				if got, ok := res.values[key]; !ok || got != want {
					t.Errorf("%s = %q (listed %v), want %q", key, got, ok, want)
				}
			}
			for key, want := range c.origins {
				if !strings.Contains(res.origins[key], want) {
					t.Errorf("%s comes from %q, want …%s…", key, res.origins[key], want)
				}
			}
			for _, want := range c.warnings {
				if !containsPart(res.warnings, want) {
					t.Errorf("no warning %q in:\n%s", want, strings.Join(res.warnings, "\n"))
				}
			}
			for _, want := range c.ignored {
				if !containsPart(res.ignore, want) {
					t.Errorf("%q not listed as ignored:\n%s", want, strings.Join(res.ignore, "\n"))
				}
			}
			for _, secret := range []string{"change-me-please", "bXktc2VjcmV0"} {
				if strings.Contains(res.raw, secret) {
					t.Errorf("the check shows a secret (%s…)", secret)
				}
			}
		})
	}
}

// Each valid configuration of the corpus starts a node (loopback, free
// ports) that is ready and answers registry reads at once: the self URL
// of defaultZone (http://${eureka.instance.hostname}:${server.port}/eureka/)
// is recognised as this node, not an unreachable peer.
func TestSpringCorpus_startsANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	for _, c := range corpus() {
		if !c.start {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			setCaseEnv(t, c)
			port := freeTCPPort(t)
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cf configFlags
			cf.register(fs)
			args := append([]string{"--config", corpusPath(c.file)}, c.args...)
			args = append(args, c.startArgs...)
			args = append(args, "--server.port="+strconv.Itoa(port), "--server.address=127.0.0.1", "--eureka.instance.ip-address=127.0.0.1",
				"--cluster.bind-addr=127.0.0.1", "--cluster.bind-port=0")
			if err := parseConfigArgs(fs, &cf, args); err != nil {
				t.Fatal(err)
			}
			s, _, err := settings.Load(cf.request(os.Environ()))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			startSettings(t, c.name, s)
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			if code := getAs(t, base+"/readyz", ""); code != 200 {
				t.Errorf("/readyz: %d", code)
			}
			if code := getAs(t, base+"/eureka/apps", c.user); code != 200 {
				t.Errorf("GET /eureka/apps: %d, want 200 at once", code)
			}
			if c.check != nil {
				c.check(t, base)
			}
		})
	}
}

// corpusPath is a case's file (or comma list of files) in testdata/spring.
func corpusPath(files string) string {
	parts := strings.Split(files, ",")
	for i, f := range parts {
		parts[i] = filepath.Join("testdata", "spring", f)
	}
	return strings.Join(parts, ",")
}

func getBody(t *testing.T, url, user string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name, pass, ok := strings.Cut(user, ":"); ok {
		req.SetBasicAuth(name, pass)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func containsPart(list []string, part string) bool {
	for _, s := range list {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

func getAs(t *testing.T, url, user string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name, pass, ok := strings.Cut(user, ":"); ok {
		req.SetBasicAuth(name, pass)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

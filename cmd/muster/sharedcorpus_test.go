package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-registry/muster/settings"
)

// sharedSpringConfigs is ../shared/spring-configs beside the repository:
// real Spring Eureka server files of public projects (its README and
// SOURCES.md say which), read-only.
func sharedSpringConfigs(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "spring-configs")
	if d := os.Getenv("MUSTER_SPRING_CONFIGS"); d != "" {
		dir = d
	}
	var files []string
	for _, pattern := range []string{"*.yml", "*.yaml", "*.properties"} {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("SKIP: no Spring configuration files in %s (set MUSTER_SPRING_CONFIGS)", dir)
	}
	return files
}

// sharedCorpusUnknown are the files that carry keys Spring's beans do not
// have (08: eureka.client.server.*; 11: the plain Netflix server's
// Archaius keys), and a key each must be warned about.
var sharedCorpusUnknown = map[string]string{
	"08-piggymetrics-registry-bootstrap.yml": `unknown setting "eureka.client.server.waitTimeInMsWhenSyncEmpty" (did you mean "eureka.server.wait-time-in-ms-when-sync-empty"?)`,
	"11-netflix-eureka-server.properties":    `unknown setting "eureka.waitTimeInMsWhenSyncEmpty" (did you mean "eureka.server.wait-time-in-ms-when-sync-empty"?)`,
}

// sharedCorpusArgs keep a file's start on loopback and deterministic: the
// node's own URL as its peer (recognised as itself), no gossip, and an
// unreachable Config Server for petclinic's optional import.
func sharedCorpusArgs(port int) []string {
	p := strconv.Itoa(port)
	return []string{"--server.port=" + p, "--server.address=127.0.0.1", "--eureka.instance.ip-address=127.0.0.1",
		"--eureka.instance.hostname=127.0.0.1", "--eureka.client.service-url.defaultZone=http://127.0.0.1:" + p + "/eureka/",
		"--cluster.enabled=false", "--CONFIG_SERVER_URL=http://127.0.0.1:1/"}
}

// Every file of ../shared/spring-configs, as Spring itself would start
// it: muster config --check passes, the files with keys Spring does not
// know say so (and only they), and muster serve's load starts a node that
// serves the registry to the file's own user.
func TestSharedSpringConfigs_startAsSpringWould(t *testing.T) {
	for _, file := range sharedSpringConfigs(t) {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			for _, v := range unsetEnv {
				t.Setenv(v, "")
				os.Unsetenv(v)
			}
			port := freeTCPPort(t)
			var out, errOut bytes.Buffer
			code := run(append([]string{"config", "--check", "--config", file}, sharedCorpusArgs(port)...), &out, &errOut)
			if code != 0 {
				t.Fatalf("config --check: exit %d:\n%s%s", code, out.String(), errOut.String())
			}
			warned := strings.Contains(out.String(), "unknown setting")
			if want, ok := sharedCorpusUnknown[name]; ok && !strings.Contains(out.String(), want) {
				t.Errorf("no warning %q:\n%s", want, out.String())
			} else if !ok && warned {
				t.Errorf("a key of a file Spring reads whole is called unknown:\n%s", out.String())
			}

			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cf configFlags
			cf.register(fs)
			if err := parseConfigArgs(fs, &cf, append([]string{"--config", file}, sharedCorpusArgs(port)...)); err != nil {
				t.Fatal(err)
			}
			s, _, err := settings.Load(cf.request(os.Environ()))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if name == "01-spring-cloud-samples-eureka.yml" && s.SpringUserName != "user" {
				t.Errorf("spring-cloud-samples: user %q, want Spring Boot's user", s.SpringUserName)
			}
			startSettings(t, name, s)
			user := ""
			if s.SpringUserPassword != "" {
				user = s.SpringUserName + ":" + s.SpringUserPassword
			}
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			if code := getAs(t, base+"/eureka/apps", user); code != 200 {
				t.Errorf("GET /eureka/apps as the file's user: %d, want 200", code)
			}
		})
	}
}

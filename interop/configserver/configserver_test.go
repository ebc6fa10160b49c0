package configserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

const (
	cfgUser     = "cfg"
	cfgPassword = "cfg-s3cret-pw"
)

// configServer is a running Spring Cloud Config Server serving the files
// of dir (its native backend) to the user cfgUser.
type configServer struct {
	port int
	dir  string
}

func (c *configServer) url(withUser bool) string {
	if withUser {
		return fmt.Sprintf("http://%s:%s@127.0.0.1:%d", cfgUser, cfgPassword, c.port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", c.port)
}

// startConfigServer builds (once, cached) and starts the Config Server on
// a free loopback port with files written to a folder of its own.
func startConfigServer(t *testing.T, files map[string]string) *configServer {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("SKIP: no java on PATH (scripts/test.sh installs it as root)")
	}
	built := interoptest.Built(t, interoptest.Source(t, "interop/spring/config-server"))
	jar := filepath.Join(built, "target", "config-server.jar")
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cs := &configServer{port: interoptest.FreePort(t), dir: dir}
	cmd := exec.Command("java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-jar", jar,
		"--server.port="+strconv.Itoa(cs.port), "--server.address=127.0.0.1",
		"--spring.profiles.active=native",
		"--spring.cloud.config.server.native.search-locations=file:"+dir+"/",
		"--spring.security.user.name="+cfgUser, "--spring.security.user.password="+cfgPassword)
	proc := interoptest.Start(t, "config server", cmd)
	client := &http.Client{Timeout: 5 * time.Second}
	interoptest.WaitReady(t, proc, "the Config Server", 240*time.Second, "the Config Server answers", func() error {
		req, _ := http.NewRequest(http.MethodGet, cs.url(false)+"/application/default", nil)
		req.SetBasicAuth(cfgUser, cfgPassword)
		return interoptest.StatusOK(client.Do(req))
	})
	return cs
}

// muster runs the muster binary to its end and returns its output.
func muster(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(interoptest.Binary(t), args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// cleanEnv is the environment without the Spring variables a developer's
// shell may carry.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SPRING_") && !strings.HasPrefix(kv, "EUREKA_") && !strings.HasPrefix(kv, "MUSTER_") && !strings.HasPrefix(kv, "SERVER_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The files the Config Server serves: the application's own, its peer1
// profile's, and application.yml, which the server gives every
// application. The profile file wins, then the application's, then
// application.yml.
var serverFiles = map[string]string{
	"application.yml": `eureka:
  instance:
    metadata-map:
      shared: from-application-yml
      source: from-application-yml
`,
	"registry.yml": `eureka:
  server:
    enable-self-preservation: false
    renewal-percent-threshold: 0.6
  instance:
    metadata-map:
      source: from-registry-yml
`,
	"registry-peer1.yml": `eureka:
  server:
    renewal-percent-threshold: 0.7
  instance:
    metadata-map:
      profile: peer1-from-config-server
`,
}

// muster config --check and muster serve read a node's settings from the
// Config Server as a Spring app does: /{application}/{profile}, the
// property sources in order, basic auth from the import's URL.
func TestConfigServer_serveAndCheck(t *testing.T) {
	cs := startConfigServer(t, serverFiles)
	dir := t.TempDir()
	app := writeFile(t, dir, "application.yml", `spring:
  application:
    name: registry
  config:
    import: configserver:`+cs.url(true)+`
eureka:
  server:
    renewal-percent-threshold: 0.5
`)

	out, code := muster(t, "config", "--check", "--config", app, "--profile", "peer1")
	if code != 0 {
		t.Fatalf("config --check: exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"eureka.server.renewal-percent-threshold",
		"configserver:http://cfg:******@127.0.0.1:" + strconv.Itoa(cs.port) + "/registry/peer1 [",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config --check does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, cfgPassword) {
		t.Errorf("config --check shows the Config Server's password:\n%s", out)
	}
	row := lineWith(out, "  eureka.server.renewal-percent-threshold ")
	if !strings.Contains(row, "= 0.7") || !strings.Contains(row, "registry-peer1.yml") {
		t.Errorf("renewal-percent-threshold: %q, want 0.7 from the peer1 file of the Config Server", row)
	}
	row = lineWith(out, "  eureka.server.enable-self-preservation ")
	if !strings.Contains(row, "= false") || !strings.Contains(row, "registry.yml") {
		t.Errorf("enable-self-preservation: %q, want false from registry.yml of the Config Server", row)
	}

	// muster serve: the node registers itself (Spring's default) with the
	// metadata the Config Server gave.
	port := interoptest.FreePort(t)
	cmd := exec.Command(interoptest.Binary(t), "serve", "--config", app, "--profile", "peer1",
		"--server.port="+strconv.Itoa(port), "--server.address=127.0.0.1", "--cluster.enabled=false",
		"--eureka.instance.hostname=127.0.0.1", "--eureka.instance.ip-address=127.0.0.1")
	cmd.Env = cleanEnv()
	proc := interoptest.Start(t, "muster", cmd)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	var md map[string]string
	testwait.For(t, 60*time.Second, "muster serves its own registration", func() error {
		if proc.Exited() {
			t.Fatalf("muster serve exited:\n%s", proc.Out.Tail(3000))
		}
		var err error
		md, err = selfMetadata(base + "/eureka/apps/REGISTRY")
		return err
	})
	for k, want := range map[string]string{"source": "from-registry-yml", "shared": "from-application-yml", "profile": "peer1-from-config-server"} {
		if md[k] != want {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, md[k], want, md)
		}
	}
	if got := proc.Out.Match(0, cfgPassword); len(got) > 0 {
		t.Errorf("the log shows the Config Server's password: %v", got)
	}
}

// Credentials from spring.cloud.config.username/password and the server
// from spring.cloud.config.uri; a wrong password is refused unless the
// import is optional; a server that is down stops the start with
// fail-fast after its retries, and is skipped with a warning when the
// import is optional.
func TestConfigServer_credentialsFailFastAndOptional(t *testing.T) {
	cs := startConfigServer(t, serverFiles)
	dir := t.TempDir()
	props := writeFile(t, dir, "props.yml", `spring:
  application:
    name: registry
  config:
    import: "configserver:"
  cloud:
    config:
      uri: `+cs.url(false)+`
      username: `+cfgUser+`
      password: ${CFG_PASSWORD:`+cfgPassword+`}
`)
	out, code := muster(t, "config", "--check", "--config", props)
	if code != 0 || !strings.Contains(lineWith(out, "  eureka.server.renewal-percent-threshold "), "0.6") {
		t.Fatalf("credentials from spring.cloud.config.*: exit %d:\n%s", code, out)
	}
	out, code = muster(t, "config", "--check", "--config", props, "--CFG_PASSWORD=wrong-password")
	if code == 0 || !strings.Contains(out, "401") || !strings.Contains(out, "optional:configserver:") || strings.Contains(out, "wrong-password") {
		t.Errorf("a wrong password: exit %d, want a refusal naming 401 and optional: (without the password):\n%s", code, out)
	}

	// Spring Cloud's older bootstrap: bootstrap.yml names the server, no
	// import; a folder location reads bootstrap.yml, then application.yml.
	boot := t.TempDir()
	writeFile(t, boot, "bootstrap.yml", `spring:
  application:
    name: registry
  cloud:
    config:
      uri: `+cs.url(true)+`
`)
	writeFile(t, boot, "application.yml", "server:\n  port: 8761\n")
	out, code = muster(t, "config", "--check", "--config", boot+"/", "--profile", "peer1")
	if row := lineWith(out, "  eureka.server.renewal-percent-threshold "); code != 0 || !strings.Contains(row, "= 0.7") {
		t.Errorf("bootstrap.yml's spring.cloud.config.uri: exit %d, row %q:\n%s", code, row, out)
	}
	if files := lineWith(out, "Files read:"); !strings.Contains(files, "bootstrap.yml, "+filepath.Join(boot, "application.yml")) {
		t.Errorf("files %q, want bootstrap.yml then application.yml", files)
	}

	down := fmt.Sprintf("http://127.0.0.1:%d", interoptest.FreePort(t))
	failFast := writeFile(t, dir, "failfast.yml", `spring:
  config:
    import: optional:configserver:`+down+`
  cloud:
    config:
      fail-fast: true
      retry:
        max-attempts: 3
        initial-interval: 50
`)
	out, code = muster(t, "config", "--check", "--config", failFast)
	if code == 0 || !strings.Contains(out, "spring.cloud.config.fail-fast is true (3 attempt(s)") {
		t.Errorf("fail-fast with the server down: exit %d:\n%s", code, out)
	}
	optional := writeFile(t, dir, "optional.yml", "spring.config.import: optional:configserver:"+down+"\n")
	out, code = muster(t, "config", "--check", "--config", optional)
	if code != 0 || !strings.Contains(out, "the import is optional: starting without it") {
		t.Errorf("optional with the server down: exit %d, want a start with a warning:\n%s", code, out)
	}
}

func lineWith(text, part string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, part) {
			return l
		}
	}
	return ""
}

// selfMetadata reads the metadata of the only instance of an app.
func selfMetadata(url string) (map[string]string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	var body struct {
		Application struct {
			Instance []struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"instance"`
		} `json:"application"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if len(body.Application.Instance) != 1 {
		return nil, fmt.Errorf("%d instances", len(body.Application.Instance))
	}
	return body.Application.Instance[0].Metadata, nil
}

package springconf

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeConfigServer answers /{name}/{profiles}[/{label}] as a Config
// Server does, counting the calls and checking the credentials.
type fakeConfigServer struct {
	mu       sync.Mutex
	paths    []string
	auth     []string
	failures int // answer 503 to this many calls first
	body     string
}

func (f *fakeConfigServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.URL.EscapedPath())
	u, p, _ := r.BasicAuth()
	f.auth = append(f.auth, u+":"+p)
	if r.Header.Get("Accept") != "application/json" {
		http.Error(w, "want Accept: application/json", http.StatusNotAcceptable)
		return
	}
	if f.failures > 0 {
		f.failures--
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/missing") {
		http.NotFound(w, r)
		return
	}
	if u != "cfg" || p != "s3cret" {
		w.Header().Set("WWW-Authenticate", `Basic realm="config"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(f.body))
}

const environmentJSON = `{"name":"registry","profiles":["peer1"],"label":null,"version":null,"state":null,
 "propertySources":[
  {"name":"file:/cfg/registry-peer1.yml","source":{"server.port":8762,"eureka.instance.hostname":"peer1","eureka.server.enable-self-preservation":false}},
  {"name":"file:/cfg/registry.yml","source":{"server.port":8761,"eureka.instance.hostname":"registry","eureka.client.service-url.defaultZone":"http://${eureka.instance.hostname}:${server.port}/eureka/","nothing":null}}
 ]}`

func TestLoad_configServerImport(t *testing.T) {
	fake := &fakeConfigServer{body: environmentJSON}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	withURLUser := strings.Replace(srv.URL, "http://", "http://cfg:s3cret@", 1)
	p := write(t, dir, "application.yml", `spring:
  application:
    name: registry
  config:
    import: configserver:`+withURLUser+`
  cloud:
    config:
      label: release/2.0
server:
  port: 1
`)
	c := mustLoad(t, p, Options{Profiles: []string{"peer1"}})
	want(t, c, "server.port", "8762", "[file:/cfg/registry-peer1.yml]")
	want(t, c, "eureka.server.enable-self-preservation", "false", "")
	want(t, c, "eureka.client.service-url.defaultZone", "http://peer1:8762/eureka/", "[file:/cfg/registry.yml]")
	if got := fake.paths[0]; got != "/registry/peer1/release%28_%292.0" {
		t.Errorf("path %s, want /registry/peer1/release(_)2.0", got)
	}
	for _, f := range c.Files {
		if strings.Contains(f, "s3cret") {
			t.Errorf("files read show the password: %s", f)
		}
	}
	v, _ := c.Get("server.port")
	if strings.Contains(v.Origin.String(), "s3cret") {
		t.Errorf("origin shows the password: %s", v.Origin)
	}

	// The credentials from spring.cloud.config.username/password, the
	// name from spring.cloud.config.name, the default profile.
	p = write(t, dir, "props.yml", `spring.config.import: "configserver:"
spring.cloud.config:
  uri: `+srv.URL+`
  name: other
  username: cfg
  password: s3cret
`)
	mustLoad(t, p, Options{})
	if got := fake.paths[len(fake.paths)-1]; got != "/other/default" {
		t.Errorf("path %s, want /other/default", got)
	}
	if got := fake.auth[len(fake.auth)-1]; got != "cfg:s3cret" {
		t.Errorf("credentials %s", got)
	}
}

func TestLoad_configServerFailures(t *testing.T) {
	fake := &fakeConfigServer{body: environmentJSON}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	good := strings.Replace(srv.URL, "http://", "http://cfg:s3cret@", 1)
	bad := strings.Replace(srv.URL, "http://", "http://cfg:wrong@", 1)

	// Not optional: the load fails, naming the status and the credentials
	// (never the password).
	p := write(t, dir, "a.yml", "spring.config.import: configserver:"+bad+"\n")
	_, err := Load(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "optional:configserver:") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password, not optional: %v", err)
	}
	// Optional: a note, and the file's own values.
	p = write(t, dir, "b.yml", "server.port: 1\nspring.config.import: optional:configserver:"+bad+"\n")
	c := mustLoad(t, p, Options{})
	want(t, c, "server.port", "1", "b.yml:1")
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "optional") {
		t.Errorf("notes %v, want one saying the optional import was skipped", c.Notes)
	}
	// fail-fast wins over optional, and retries as configured: the
	// waits grow by the multiplier up to max-interval.
	fake.failures = 100
	var waits []time.Duration
	p = write(t, dir, "c.yml", `spring.config.import: optional:configserver:`+good+`
spring.cloud.config.fail-fast: true
spring.cloud.config.retry:
  max-attempts: 4
  initial-interval: 100
  multiplier: 2
  max-interval: 300
`)
	before := len(fake.paths)
	_, err = Load(p, Options{Sleep: func(d time.Duration) { waits = append(waits, d) }})
	if err == nil || !strings.Contains(err.Error(), "fail-fast") || !strings.Contains(err.Error(), "503") {
		t.Errorf("fail-fast: %v", err)
	}
	if calls := len(fake.paths) - before; calls != 4 {
		t.Errorf("%d calls, want 4 (max-attempts)", calls)
	}
	if got := fmtDurations(waits); got != "100ms,200ms,300ms" {
		t.Errorf("waits %s, want 100ms,200ms,300ms", got)
	}
	// A server that comes up while the client retries is used.
	fake.failures = 2
	waits = nil
	c = mustLoad(t, p, Options{Sleep: func(d time.Duration) { waits = append(waits, d) }})
	want(t, c, "server.port", "8762", "registry-peer1.yml]")
	if len(waits) != 2 {
		t.Errorf("waits %v, want 2", waits)
	}
	// Without fail-fast there is one attempt.
	fake.failures = 1
	p = write(t, dir, "d.yml", "spring.config.import: optional:configserver:"+good+"\n")
	before = len(fake.paths)
	c = mustLoad(t, p, Options{Sleep: func(time.Duration) { t.Error("slept without fail-fast") }})
	if calls := len(fake.paths) - before; calls != 1 || len(c.Notes) != 1 {
		t.Errorf("%d calls, notes %v: want one call and a note", calls, c.Notes)
	}
	// Several URIs: the first that answers.
	fake.failures = 0
	p = write(t, dir, "e.yml", "spring.config.import: configserver:http://127.0.0.1:1;"+good+"\n")
	c = mustLoad(t, p, Options{})
	want(t, c, "server.port", "8762", "")
	// A label list: the next label when one is not found.
	p = write(t, dir, "g.yml", "spring.config.import: configserver:"+good+"\nspring.cloud.config.label: missing, main\n")
	before = len(fake.paths)
	mustLoad(t, p, Options{})
	if got := strings.Join(fake.paths[before:], " "); got != "/application/default/missing /application/default/main" {
		t.Errorf("label list: paths %s", got)
	}
	// Not JSON.
	junk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer junk.Close()
	p = write(t, dir, "f.yml", "spring.config.import: configserver:"+junk.URL+"\n")
	if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), "not a Config Server environment") {
		t.Errorf("an HTML answer: %v", err)
	}
}

func fmtDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Spring Cloud's older bootstrap: spring.cloud.config.uri in bootstrap.yml,
// no import; the server's sources win over application.yml.
func TestLoad_configServerFromBootstrap(t *testing.T) {
	fake := &fakeConfigServer{body: environmentJSON}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	write(t, dir, "bootstrap.yml", "spring:\n  application:\n    name: registry\n  cloud:\n    config:\n      uri: "+srv.URL+"\n      username: cfg\n      password: s3cret\n")
	app := write(t, dir, "application.yml", "server:\n  port: 1\n")
	c := mustLoad(t, app, Options{Profiles: []string{"peer1"}})
	want(t, c, "server.port", "8762", "registry-peer1.yml]")
	if got := fake.paths[len(fake.paths)-1]; got != "/registry/peer1" {
		t.Errorf("path %s", got)
	}
	// Without the server it is optional: a note, and the files.
	srv.Close()
	c = mustLoad(t, app, Options{})
	want(t, c, "server.port", "1", "application.yml:2")
	if len(c.Notes) != 1 {
		t.Errorf("notes %v", c.Notes)
	}
	// spring.cloud.config.enabled: false turns it off.
	write(t, dir, "bootstrap.yml", "spring.cloud.config:\n  uri: "+srv.URL+"\n  enabled: false\n")
	if c := mustLoad(t, app, Options{}); len(c.Notes) != 0 {
		t.Errorf("enabled false: notes %v", c.Notes)
	}
}

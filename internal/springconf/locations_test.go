package springconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad_locationsListsFoldersAndOptional(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a.yml", "server:\n  port: 1\neureka:\n  instance:\n    hostname: a\n")
	b := write(t, dir, "b.properties", "server.port=2\n")
	conf := filepath.Join(dir, "conf")
	if err := os.Mkdir(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, conf, "application.yml", "spring.application.name: from-folder\nserver.port: 3\n")
	c := mustLoad(t, a+", file:"+b+",optional:"+filepath.Join(dir, "absent.yml"), Options{})
	want(t, c, "server.port", "2", "b.properties:1")
	want(t, c, "eureka.instance.hostname", "a", "a.yml:5")
	c = mustLoad(t, a, Options{AdditionalLocations: conf + "/"})
	want(t, c, "server.port", "3", "conf/application.yml:2")
	if len(c.Files) != 2 {
		t.Errorf("files %v, want a.yml and conf/application.yml", c.Files)
	}
	write(t, conf, "registry.yml", "server.port: 4\n")
	c = mustLoad(t, conf, Options{Overrides: map[string]string{"spring.config.name": "registry"}})
	want(t, c, "server.port", "4", "conf/registry.yml:1")
	if _, err := Load(a+","+filepath.Join(dir, "absent.yml"), Options{}); err == nil || !strings.Contains(err.Error(), "absent.yml") {
		t.Errorf("a missing location that is not optional: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nothing")+"/", Options{}); err == nil || !strings.Contains(err.Error(), "optional:") {
		t.Errorf("a missing folder: %v, want a hint at optional:", err)
	}
	if c := mustLoad(t, "optional:"+filepath.Join(dir, "nothing")+"/", Options{}); len(c.Values) != 0 {
		t.Errorf("an absent optional folder: %v", c.Values)
	}
}

func TestLoad_bootstrapBeforeApplication(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "bootstrap.yml", "spring:\n  application:\n    name: registry\nserver:\n  port: 8000\n")
	app := write(t, dir, "application.yml", "server:\n  port: 8761\n")
	for _, loc := range []string{app, dir} {
		c := mustLoad(t, loc, Options{})
		want(t, c, "spring.application.name", "registry", "bootstrap.yml:3")
		want(t, c, "server.port", "8761", "application.yml:2")
		if len(c.Files) != 2 || !strings.HasSuffix(c.Files[0], "bootstrap.yml") {
			t.Errorf("%s: files %v, want bootstrap.yml first", loc, c.Files)
		}
	}
}

func TestLoad_imports(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "more"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "more/peers.yml", "eureka:\n  client:\n    service-url:\n      defaultZone: http://peer:8761/eureka/\nserver:\n  port: 9000\n")
	write(t, dir, "prod.properties", "server.port=9100\n")
	main := write(t, dir, "application.yml", `spring:
  config:
    import: file:more/peers.yml, optional:file:./absent.yml
server:
  port: 8761
---
spring:
  config:
    activate:
      on-profile: prod
    import: optional:file:prod.properties
`)
	c := mustLoad(t, main, Options{})
	want(t, c, "eureka.client.service-url.defaultZone", "http://peer:8761/eureka/", "more/peers.yml:4")
	// The import wins over the document that imports it.
	want(t, c, "server.port", "9000", "more/peers.yml:6")
	c = mustLoad(t, main, Options{Profiles: []string{"prod"}})
	want(t, c, "server.port", "9100", "prod.properties:1")
	other := write(t, dir, "other.yml", "spring.config.import: optional:configtree:/etc/config/\n")
	if c := mustLoad(t, other, Options{}); len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "configtree") {
		t.Errorf("an optional configtree: import: notes %v", c.Notes)
	}
	other = write(t, dir, "other2.yml", "spring.config.import: vault://secret/app\n")
	if _, err := Load(other, Options{}); err == nil || !strings.Contains(err.Error(), "does not read vault: locations") {
		t.Errorf("a vault: import: %v", err)
	}
	bad := write(t, dir, "bad.yml", "spring.config.import: file:absent.yml\n")
	if _, err := Load(bad, Options{}); err == nil || !strings.Contains(err.Error(), "spring.config.import") {
		t.Errorf("a missing import that is not optional: %v", err)
	}
}

func TestLoad_profileGroupsAndIncludesInProfileDocuments(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", `spring:
  profiles:
    group:
      prod: [proddb, prodmq]
server:
  port: 1
---
spring:
  config:
    activate:
      on-profile: proddb
eureka:
  instance:
    hostname: db
---
spring:
  profiles: prodmq
  profiles.include: extra
---
spring:
  profiles: extra
server:
  port: 2
`)
	c := mustLoad(t, p, Options{Profiles: []string{"prod"}})
	if got := strings.Join(c.Profiles, ","); got != "prod,proddb,prodmq,extra" {
		t.Errorf("profiles %s, want prod,proddb,prodmq,extra", got)
	}
	want(t, c, "eureka.instance.hostname", "db", "")
	want(t, c, "server.port", "2", "")
}

func TestLoad_unfilteredMavenToken(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", "info:\n  app:\n    name: registry\n    version: @project.version@\n")
	_, err := Load(p, Options{})
	if err == nil || !strings.Contains(err.Error(), "@project.version@") || !strings.Contains(err.Error(), "Maven resource filtering") ||
		!strings.Contains(err.Error(), "application.yml:4") {
		t.Errorf("error %v, want the token, its line and Maven resource filtering", err)
	}
}

func TestLoad_referencedKeys(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "application.yml", "eureka:\n  password: secret\n  client:\n    service-url:\n      defaultZone: http://user:${eureka.password}@peer/eureka/\n")
	c := mustLoad(t, p, Options{})
	if !c.Referenced[Fold("eureka.password")] {
		t.Errorf("referenced %v, want eureka.password", c.Referenced)
	}
	if c.Referenced[Fold("eureka.client.service-url.defaultZone")] {
		t.Errorf("referenced %v: the key that holds the placeholder is not read by one", c.Referenced)
	}
}

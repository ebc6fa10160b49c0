package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/muster-registry/muster/settings"
)

func mustLoad(t *testing.T, file string, env, sets []string) *settings.Settings {
	t.Helper()
	s, _, err := settings.LoadSettings(file, env, sets)
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

func TestLoadSettings_clientDisabledAndSelfRegistrationURLs(t *testing.T) {
	file := writeFile(t, "application.yml", `eureka:
  client:
    enabled: false
    register-with-eureka: true
    service-url:
      defaultZone: http://peer:8761/eureka/
  instance:
    status-page-url-path: /actuator/info
    health-check-url-path: /actuator/health
`)
	s := mustLoad(t, file, nil, nil)
	if s.RegisterWithEureka || len(s.ServiceURLs) != 0 {
		t.Errorf("eureka.client.enabled false: register %v, peers %v", s.RegisterWithEureka, s.ServiceURLs)
	}
	inst := selfInstance(s, "h", "127.0.0.1", 8761, time.Now())
	if inst.StatusPageURL != "http://h:8761/actuator/info" || inst.HealthCheckURL != "http://h:8761/actuator/health" || inst.HomePageURL != "http://h:8761/" {
		t.Errorf("self-registration URLs: %s %s %s", inst.StatusPageURL, inst.HealthCheckURL, inst.HomePageURL)
	}
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// Prometheus discovers its targets from a node with authentication on,
// through eureka_sd_configs with basic_auth, as the read user. Skipped when
// no prometheus binary is installed.
func TestPrometheusEurekaSD_basicAuth(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed: skipping the eureka_sd_configs test")
	}
	if testing.Short() {
		t.Skip("starts a prometheus process")
	}
	n := newSecuredNode(t, peerSecret, true)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o-1"))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, pw string
		wantTargets    bool
	}{
		{"read user", "reader", readerPW, true},
		{"wrong password", "reader", "nope", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			promURL := startPrometheus(t, bin, fmt.Sprintf(`
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: eureka
    eureka_sd_configs:
      - server: %s/eureka
        refresh_interval: 1s
        basic_auth:
          username: %s
          password: %s
`, n.http.URL, tc.user, tc.pw))
			// With the right password, wait for the target; with a wrong
			// one, for the node to have refused prometheus (then no target
			// can have come from it).
			deadline := time.Now().Add(20 * time.Second)
			refusedBefore := badPasswords(t, n)
			var apps []string
			for time.Now().Before(deadline) {
				apps = discoveredApps(t, promURL)
				if tc.wantTargets && len(apps) > 0 || !tc.wantTargets && badPasswords(t, n) > refusedBefore {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			switch {
			case tc.wantTargets && (len(apps) != 1 || apps[0] != "ORDERS"):
				t.Fatalf("prometheus discovered apps %v, want [ORDERS]", apps)
			case !tc.wantTargets && badPasswords(t, n) == refusedBefore:
				t.Fatal("the node never refused prometheus' wrong password")
			case !tc.wantTargets && len(apps) != 0:
				t.Fatalf("prometheus discovered %v with a wrong password", apps)
			}
		})
	}
}

func badPasswords(t *testing.T, n *testNode) float64 {
	t.Helper()
	m := n.do(t, "GET", "/metrics", "", basic("admin", adminPW)...)
	for _, l := range strings.Split(m.Body, "\n") {
		if v, ok := strings.CutPrefix(l, `muster_auth_failures_total{reason="bad_password"} `); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func startPrometheus(t *testing.T, bin, config string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not become ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// discoveredApps lists the __meta_eureka_app_name of prometheus' active
// targets.
func discoveredApps(t *testing.T, promURL string) []string {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/targets?state=active")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			ActiveTargets []struct {
				DiscoveredLabels map[string]string `json:"discoveredLabels"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var apps []string
	for _, tg := range body.Data.ActiveTargets {
		apps = append(apps, tg.DiscoveredLabels["__meta_eureka_app_name"])
	}
	return apps
}

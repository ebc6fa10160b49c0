package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, timeout, what, cond)
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func portFree(port string) bool {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// The README's first command: a node with built-in defaults serves the
// dashboard and the API on :8761, and stops cleanly on SIGTERM.
func TestServe_defaultsServeOn8761(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if !portFree("8761") || !portFree("7946") {
		t.Skip("port 8761 or 7946 is in use on this machine")
	}
	bin := filepath.Join(t.TempDir(), "muster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, 20*time.Second, "GET :8761/readyz", func() bool {
		code, _, err := httpGet("http://127.0.0.1:8761/readyz")
		return err == nil && code == 200
	})
	code, body, err := httpGet("http://127.0.0.1:8761/")
	if err != nil || code != 200 || !strings.Contains(body, "Instances currently registered with Eureka") {
		t.Fatalf("dashboard: %d %v", code, err)
	}
	code, body, err = httpGet("http://127.0.0.1:8761/eureka/apps")
	if err != nil || code != 200 || !strings.HasPrefix(body, "<applications>") {
		t.Fatalf("GET /eureka/apps: %d %v %.80q", code, err, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit 15 s after SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Errorf("no shutdown in the log:\n%s", logs.String())
	}
}

func TestRun_usageAndErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 {
		t.Errorf("no arguments: exit %d, want 2", code)
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--set", "server.port=x"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "server.port") {
		t.Errorf("bad setting: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	if code := run([]string{"config"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "eureka.server.enable-self-preservation = true") {
		t.Errorf("config: exit %d", code)
	}
}

func TestHealth(t *testing.T) {
	n := startNode(t, "health", "cluster.enabled=false")
	var out bytes.Buffer
	if err := healthCmd([]string{"--url", "http://" + n.Addr() + "/readyz"}, &out); err != nil {
		t.Fatalf("health of a ready node: %v", err)
	}
	if err := healthCmd([]string{"--url", "http://" + n.Addr() + "/nope", "--timeout", "1s"}, &out); err == nil {
		t.Fatal("health of a 404 succeeded")
	}
}

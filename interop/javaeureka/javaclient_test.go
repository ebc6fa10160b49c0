package javaeureka

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// javaEureka is the folder of the Java Eureka client and server, or the
// reason the tests cannot use it.
func javaEureka(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MUSTER_JAVA_EUREKA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "java-eureka")
	}
	if _, err := os.Stat(filepath.Join(dir, "client", "run.sh")); err != nil {
		t.Skipf("no Java Eureka driver at %s (set MUSTER_JAVA_EUREKA): %v", dir, err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java on PATH (scripts/test.sh installs it as root through ../shared/java-eureka/install.sh)")
	}
	if out, err := exec.Command(filepath.Join(dir, "classpath.sh")).CombinedOutput(); err != nil {
		t.Skipf("the Java Eureka libraries are not installed: %s", bytes.TrimSpace(out))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// musterBinary builds cmd/muster once per test binary run.
func musterBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(buildDir, "muster")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/muster").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/muster: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNode runs a standalone Muster node on loopback and returns its
// Eureka base URL once /readyz answers 200. It stops with the test.
func startNode(t *testing.T, sets ...string) string {
	t.Helper()
	return newMusterNode(t, sets...).start().url()
}

// runDriver runs the real DiscoveryClient driver against url and returns
// its output; it fails the test unless every check passed.
func runDriver(t *testing.T, dir, url string, args ...string) string {
	t.Helper()
	return runDriverCmd(t, exec.CommandContext, dir, url, nil, args...)
}

// runDriverExpecting is runDriver where exactly the checks named in
// wantFailed fail (each a prefix of a FAIL line's check), as they fail
// against the Java server with the same arguments.
func runDriverExpecting(t *testing.T, dir, url string, wantFailed []string, args ...string) string {
	t.Helper()
	return runDriverCmd(t, exec.CommandContext, dir, url, wantFailed, args...)
}

// runDriverCmd is runDriverExpecting with the driver's command made by
// command (exec.CommandContext, or one that wraps run.sh).
func runDriverCmd(t *testing.T, command func(ctx context.Context, name string, args ...string) *exec.Cmd, dir, url string, wantFailed []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := command(ctx, filepath.Join(dir, "client", "run.sh"), append([]string{"--url", url}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	text := string(out)
	summary := regexp.MustCompile(`==== (\d+) passed, (\d+) failed ====`).FindStringSubmatch(text)
	var fails []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "FAIL") {
			fails = append(fails, line)
		}
	}
	expected := len(fails) == len(wantFailed)
	for i := 0; expected && i < len(fails); i++ {
		expected = strings.HasPrefix(fails[i], "FAIL "+wantFailed[i])
	}
	wantErr := len(wantFailed) > 0
	if (err != nil) != wantErr || summary == nil || summary[2] != strconv.Itoa(len(wantFailed)) || summary[1] == "0" || !expected {
		t.Fatalf("Java driver against %s: %v, summary %v\nfailed checks (want %q):\n%s\noutput tail:\n%s",
			url, err, summary, wantFailed, strings.Join(fails, "\n"), tail(out, 3000))
	}
	return text
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// The fixed-script driver's own runs (every codec, gzip, the compact form,
// the re-registration after a heartbeat 404) moved to interop/spring, on
// eureka-client 1.10 and 2.0 from Maven Central; the DNS test still runs
// the driver through runDriverCmd.

var (
	buildDir  string
	buildErr  error
	buildOnce sync.Once // one build of the muster binary for every test of the run
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "muster-javaeureka-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

package interoptest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// RepoRoot is the folder of the module's go.mod, found from the test's
// working directory upwards.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) && exists(filepath.Join(dir, "cmd", "muster")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod with cmd/muster above the working directory")
		}
		dir = parent
	}
}

// Source is a build source folder given relative to the repository root
// (interop/spring/boot4-client, say), as an absolute path.
func Source(t testing.TB, rel string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// Binary builds cmd/muster once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "muster-interop-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "muster")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/muster")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/muster: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// Node is one Muster process on a fixed loopback port. Every Start is a
// fresh process without a data dir (unless the settings name one): what a
// node restarted on a new host, or without its volume, looks like.
type Node struct {
	t      testing.TB
	Port   int
	Sets   []string // --set key=value, after the defaults Start gives
	Scheme string
	HTTP   *http.Client
	Proc   *Process
}

// NewNode is a node on a free loopback port, not yet started; it stops
// with the test.
func NewNode(t testing.TB, sets ...string) *Node {
	n := &Node{t: t, Port: FreePort(t), Sets: sets, Scheme: "http", HTTP: &http.Client{Timeout: 5 * time.Second}}
	t.Cleanup(n.Stop)
	return n
}

// UseTLS makes the node serve https with the given PEM pair; the test
// talks to it trusting caPEM.
func (n *Node) UseTLS(cert, key, caPEM string) {
	n.Scheme = "https"
	n.Sets = append(n.Sets, "server.ssl.certificate="+cert, "server.ssl.certificate-private-key="+key)
	pool := x509.NewCertPool()
	b, err := os.ReadFile(caPEM)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		n.t.Fatalf("CA %s: %v", caPEM, err)
	}
	n.HTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// Base is the node's scheme://127.0.0.1:port.
func (n *Node) Base() string { return n.Scheme + "://127.0.0.1:" + strconv.Itoa(n.Port) }

// URL is the node's Eureka base URL, as clients and peers list it.
func (n *Node) URL() string { return n.Base() + "/eureka/" }

// Start runs `muster serve` on the node's port, standalone and without
// self-registration unless Sets say otherwise, and waits until /readyz answers 200.
func (n *Node) Start() *Node {
	t := n.t
	t.Helper()
	args := []string{"serve",
		"--set", "server.port=" + strconv.Itoa(n.Port),
		"--set", "server.address=127.0.0.1",
		"--set", "cluster.enabled=false",
		"--set", "eureka.instance.hostname=127.0.0.1",
		// Spring's default registers the node itself; scenarios count
		// the clients' instances only (Sets may turn it back on).
		"--set", "eureka.client.register-with-eureka=false",
	}
	for _, s := range n.Sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = nodeEnv()
	n.Proc = Start(t, "muster :"+strconv.Itoa(n.Port), cmd)
	WaitReady(t, n.Proc, "muster on port "+strconv.Itoa(n.Port), 60*time.Second, "muster on "+n.Base()+" answers /readyz", func() error {
		return StatusOK(n.HTTP.Get(n.Base() + "/readyz"))
	})
	return n
}

// nodeEnv is the test's environment less MUSTER_INTEROP_CACHE: muster
// reads every MUSTER_* variable as a setting and refuses to start on one
// it does not know.
func nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUSTER_INTEROP_CACHE=") {
			env = append(env, kv)
		}
	}
	return env
}

// Stop ends the node gracefully, if it runs.
func (n *Node) Stop() {
	if n.Proc != nil {
		n.Proc.Stop()
		n.Proc = nil
	}
}

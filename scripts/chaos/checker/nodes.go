package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// node is one muster process in its namespace.
type node struct {
	i       int
	bin     string
	dir     string // logs and data dir of the run
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	paused  bool
	started int // how many times started
	// offset is the registry clock's offset for the next start
	// (muster.testing.clock-offset-ms): the clock fault.
	offset time.Duration
	extra  []string // more settings (-set)
}

func (n *node) name() string { return fmt.Sprintf("n%d", n.i) }
func (n *node) url() string  { return fmt.Sprintf("http://%s:8761", nodeIP(n.i)) }
func (n *node) dataDir() string {
	return filepath.Join(n.dir, n.name()+"-data")
}

// Chaos timings, as scripts/chaos/docker-compose.chaos.yml: renewals every
// second, leases of 6 s, eviction every second, a 5 s renewal window,
// anti-entropy every 5 s. The node registers itself, as by default (app
// MUSTER: the checks look at the CHK* apps only).
func (n *node) args() []string {
	var join []string
	for j := 1; j <= 3; j++ {
		if j != n.i {
			join = append(join, nodeIP(j)+":7946")
		}
	}
	set := []string{
		"server.port=8761",
		"eureka.instance.hostname=" + nodeIP(n.i),
		"cluster.enabled=true",
		"cluster.node-name=" + n.name(),
		"cluster.zone=z" + fmt.Sprint(n.i),
		"cluster.bind-addr=" + nodeIP(n.i),
		"cluster.advertise-addr=" + nodeIP(n.i),
		"cluster.join=" + strings.Join(join, ","),
		"eureka.server.eviction-interval-timer-in-ms=1000",
		"muster.measured-rate-window-ms=5000",
		"eureka.server.expected-client-renewal-interval-seconds=1",
		"eureka.server.wait-time-in-ms-when-sync-empty=10000",
		"muster.cold-start-wait-ms=3000",
		"eureka.server.registry-sync-retry-wait-ms=1000",
		"eureka.server.retention-time-in-m-s-in-delta-queue=30000",
		"eureka.server.delta-retention-timer-interval-in-ms=5000",
		"eureka.server.peer-node-read-timeout-ms=2000",
		"muster.anti-entropy-interval-ms=5000",
		"muster.data-dir=" + n.dataDir(),
		"muster.snapshot-interval-ms=1000",
		"muster.log.format=json",
	}
	if n.offset != 0 {
		set = append(set, fmt.Sprintf("muster.testing.clock-offset-ms=%d", n.offset.Milliseconds()))
	}
	set = append(set, n.extra...)
	args := []string{"netns", "exec", nodeNS(n.i), n.bin, "serve"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s already running", n.name())
	}
	if err := os.MkdirAll(n.dataDir(), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(n.dir, n.name()+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", n.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	n.started++
	fmt.Fprintf(logf, "=== checker: start #%d pid %d\n", n.started, cmd.Process.Pid)
	done := make(chan struct{})
	n.cmd, n.done, n.paused = cmd, done, false
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return nil
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s not running", n.name())
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return n.cmd.Process.Signal(sig)
}

// stop ends the process: SIGKILL at once, or SIGTERM and SIGKILL after
// grace; it returns once the process is gone.
func (n *node) stop(graceful bool, grace time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	if n.paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	if graceful {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	n.mu.Lock()
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
}

// waitServing waits until the node answers GET /eureka/apps with 200.
func (n *node) waitServing(timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, n.url()+"/eureka/apps", nil)
		req.Header.Set("Accept", "application/json")
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s does not serve reads after %v", n.name(), timeout)
}

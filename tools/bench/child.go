package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
)

// benchChild is a server under test running as a child process: the
// node package as `bench node`, or the bare echo server as `bench ceiling`,
// both this binary re-run.
type benchChild struct {
	proccontrol.Ready
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	done    chan struct{}
	// clientTLS is how load reaches a child that serves TLS; nil: plain.
	clientTLS *tls.Config
}

// benchCtl is the client for control requests and the odd single request.
var benchCtl = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true}}

// startChild starts a server under test and waits for its ready line: mode
// muster re-executes this binary as `bench node`, mode bare as
// `bench ceiling`.
func (e *benchEnv) startChild(name, mode string, args ...string) (*benchChild, error) {
	return e.startChildWait(name, mode, 90*time.Second, args...)
}

// startChildWait is startChild waiting up to wait for the ready line (a
// node that copies a large registry at start-up is ready only after it).
func (e *benchEnv) startChildWait(name, mode string, wait time.Duration, args ...string) (*benchChild, error) {
	exe := e.self
	var argv []string
	switch mode {
	case "muster":
		argv = append([]string{"node", "--name", name}, args...)
		for _, s := range e.sets {
			argv = append(argv, "--set", s)
		}
	case "bare":
		argv = append([]string{"ceiling", "--name", name}, args...)
	default:
		return nil, fmt.Errorf("bench: no server mode %q (muster or bare)", mode)
	}
	cmd := exec.Command(exe, argv...)
	logPath := filepath.Join(e.tmpDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	if e.verbose {
		cmd.Stderr = io.MultiWriter(logFile, os.Stderr)
	} else {
		cmd.Stderr = logFile
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	c := &benchChild{name: name, cmd: cmd, stdin: stdin, logPath: logPath, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			<-c.done
			return nil, fmt.Errorf("bench server %s exited before it was ready (log: %s)%s", name, logPath, benchTail(logPath))
		}
		if err := json.Unmarshal([]byte(line), &c.Ready); err != nil {
			c.stop()
			return nil, fmt.Errorf("bench server %s: bad ready line %q", name, line)
		}
	case <-time.After(wait):
		c.stop()
		return nil, fmt.Errorf("bench server %s not ready after %s (log: %s)", name, wait, logPath)
	}
	e.children = append(e.children, c)
	return c, nil
}

func benchTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return ""
	}
	return ":\n" + string(b)
}

// stop closes the child's stdin (it shuts down), and kills it if it has not
// exited within 10 s.
func (c *benchChild) stop() {
	if c == nil || c.cmd == nil {
		return
	}
	if c.stdin == nil { // a Java server (java.go)
		c.stopJava()
		return
	}
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// ctl sends a control request and returns the body.
func (c *benchChild) ctl(method, path string, body []byte, header ...string) ([]byte, error) {
	req, err := http.NewRequest(method, "http://"+c.Control+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := benchCtl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s control %s: %w", c.name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s control %s: %d %s", c.name, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// cpu is the child's CPU time so far.
func (c *benchChild) cpu() time.Duration {
	if c.Mode == "java" {
		return procCPU(c.PID)
	}
	b, err := c.ctl("GET", "/cpu", nil)
	if err != nil {
		return 0
	}
	s, _ := strconv.ParseFloat(string(b), 64)
	return time.Duration(s * float64(time.Second))
}

func (c *benchChild) mem(free bool) (proccontrol.Mem, error) {
	path := "/mem"
	if free {
		path += "?free=1"
	}
	var m proccontrol.Mem
	b, err := c.ctl("GET", path, nil)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// gc reads the child's collector counters (proccontrol.GC).
func (c *benchChild) gc() (proccontrol.GC, error) {
	var g proccontrol.GC
	b, err := c.ctl("GET", "/gc", nil)
	if err != nil {
		return g, err
	}
	return g, json.Unmarshal(b, &g)
}

type benchNodeStatus struct {
	Opened    bool `json:"opened"`
	Peers     int  `json:"peers"`
	Instances int  `json:"instances"`
	// Fleet is Instances but the nodes' own (each node registers itself
	// as its app, MUSTER, as a user's node does); Own is those.
	Fleet   int    `json:"fleet"`
	Own     int    `json:"own"`
	Version uint64 `json:"version"`
	// SyncSeconds is how long the node's syncUp ran, SyncInstances what it
	// copied.
	SyncSeconds   float64 `json:"syncSeconds"`
	SyncInstances int     `json:"syncInstances"`
}

func (c *benchChild) status() (benchNodeStatus, error) {
	var st benchNodeStatus
	b, err := c.ctl("GET", "/status", nil)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// metric reads one sample of the child's /metrics (name with labels, as
// printed); 0 when absent.
func (c *benchChild) metric(name string) float64 {
	v, _ := c.metrics(name)
	return v[0]
}

// metrics reads several samples in one scrape.
func (c *benchChild) metrics(names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	resp, err := benchCtl.Get("http://" + c.API + "/metrics")
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, n := range names {
			if rest, ok := strings.CutPrefix(line, n+" "); ok {
				out[i], _ = strconv.ParseFloat(strings.TrimSpace(rest), 64)
			}
		}
	}
	return out, sc.Err()
}

// api sends one request to the child's API and returns status and body
// (as received: gzip stays compressed).
func (c *benchChild) api(method, path string, body []byte, header ...string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+c.API+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := benchCtl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// profile saves a CPU profile of the child taken over d into path; it
// returns at once and the profile is written when done.
func (c *benchChild) profile(d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		b, err := c.ctl("GET", fmt.Sprintf("/profile?seconds=%d", int(d.Seconds())), nil)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		done <- err
	}()
	return done
}

// heapProfile saves a heap profile of the child into path.
func (c *benchChild) heapProfile(path string) error {
	b, err := c.ctl("GET", "/profile?kind=heap", nil)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

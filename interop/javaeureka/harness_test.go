package javaeureka

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// The processes these tests run: Muster nodes that can be stopped and
// started again on the same port, and long-running Java clients (the agent in
// testdata/agent, a real DiscoveryClient steered over stdin).

// stopProcess ends a process the test started: SIGINT first (a graceful
// shutdown), SIGKILL after a grace period.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// musterNode is one Muster process on a fixed loopback port. Every start
// is a fresh process without a data dir: what a node restarted on a new
// host, or without its volume, looks like.
type musterNode struct {
	t      *testing.T
	port   int
	sets   []string
	scheme string
	http   *http.Client
	cmd    *exec.Cmd
	done   chan struct{}
	logDir string
	logs   []string
}

func newMusterNode(t *testing.T, sets ...string) *musterNode {
	// The log directory is made before the cleanup is registered, so it
	// is removed after the cleanup has read the logs.
	n := &musterNode{t: t, port: freePort(t), sets: sets, scheme: "http", http: &http.Client{Timeout: 5 * time.Second},
		logDir: t.TempDir()}
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			for _, l := range n.logs {
				b, _ := os.ReadFile(l)
				t.Logf("muster log %s:\n%s", l, tail(b, 3000))
			}
		}
	})
	return n
}

// useTLS makes the node serve https with the given PEM pair; the test
// talks to it trusting caPEM.
func (n *musterNode) useTLS(cert, key, caPEM string) {
	n.scheme = "https"
	n.sets = append(n.sets, "server.ssl.certificate="+cert, "server.ssl.certificate-private-key="+key)
	pool := x509.NewCertPool()
	b, err := os.ReadFile(caPEM)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		n.t.Fatalf("CA %s: %v", caPEM, err)
	}
	n.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (n *musterNode) base() string { return n.scheme + "://127.0.0.1:" + strconv.Itoa(n.port) }

// url is the node's Eureka base URL, as clients and peers list it.
func (n *musterNode) url() string { return n.base() + "/eureka/" }

func (n *musterNode) start() *musterNode {
	t := n.t
	t.Helper()
	args := []string{"serve",
		"--set", "server.port=" + strconv.Itoa(n.port),
		"--set", "server.address=127.0.0.1",
		"--set", "cluster.enabled=false",
		"--set", "eureka.instance.hostname=127.0.0.1",
		// Spring's default registers the node itself; the scenarios
		// count the clients' instances only.
		"--set", "eureka.client.register-with-eureka=false",
	}
	for _, s := range n.sets {
		args = append(args, "--set", s)
	}
	n.cmd = exec.Command(musterBinary(t), args...)
	logFile, err := os.CreateTemp(n.logDir, "muster-*.log")
	if err != nil {
		t.Fatal(err)
	}
	n.logs = append(n.logs, logFile.Name())
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); logFile.Close(); close(done) }(n.cmd, n.done)
	testwait.For(t, 60*time.Second, "muster on "+n.base()+" answers /readyz", func() error {
		select {
		case <-n.done:
			t.Fatalf("muster on port %d exited at start", n.port)
		default:
		}
		resp, err := n.http.Get(n.base() + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d", resp.StatusCode)
		}
		return nil
	})
	return n
}

func (n *musterNode) stop() {
	if n.cmd != nil {
		stopProcess(n.cmd, n.done)
		n.cmd = nil
	}
}

// lineLog keeps every line a process printed, in order.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *lineLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since returns the lines from index i on.
func (l *lineLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i > len(l.lines) {
		i = len(l.lines)
	}
	return append([]string(nil), l.lines[i:]...)
}

func (l *lineLog) tail(n int) string {
	return tail([]byte(strings.Join(l.since(0), "\n")), n)
}

// startLogged starts cmd with its output collected line by line into out
// (and handed to onLine, if given); the channel closes when it exits.
func startLogged(t *testing.T, cmd *exec.Cmd, out *lineLog, onLine ...func(string)) chan struct{} {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			out.add(sc.Text())
			for _, f := range onLine {
				f(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
	return done
}

var (
	agentOnce    sync.Once
	agentClasses string
	agentErr     error
)

// agentClasspath compiles testdata/agent once per run against the Java
// Eureka jars, or skips when there is no compiler.
func agentClasspath(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no javac on PATH to compile the test's Java client agent (scripts/test.sh installs it: ../shared/java-eureka/install.sh --jdk)")
	}
	cp, err := exec.Command(filepath.Join(dir, "classpath.sh")).Output()
	if err != nil {
		t.Skipf("the Java Eureka libraries are not installed: %v", err)
	}
	agentOnce.Do(func() {
		classes := filepath.Join(buildDir, "agent-classes")
		out, err := exec.Command("javac", "--release", "8", "-nowarn", "-cp", strings.TrimSpace(string(cp)),
			"-d", classes, filepath.Join("testdata", "agent", "EurekaAgent.java")).CombinedOutput()
		if err != nil {
			agentErr = fmt.Errorf("javac testdata/agent: %v\n%s", err, out)
		}
		agentClasses = classes + ":" + filepath.Join(dir, "client", "conf") + ":" + strings.TrimSpace(string(cp))
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentClasses
}

// javaAgent is one running DiscoveryClient (testdata/agent/EurekaAgent.java).
type javaAgent struct {
	t       *testing.T
	app, id string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	done    chan struct{}
	out     *lineLog

	mu      sync.Mutex
	seq     int
	replies map[string]chan string
}

// startAgent runs a Java client registering app with serviceUrl urls (in
// that order) and extra --eureka.KEY=VALUE settings; javaOpts go to the
// JVM (a trust store, say). It returns once the client has registered
// and fetched its own instance back as UP.
func startAgent(t *testing.T, dir, app string, urls []string, javaOpts string, extra ...string) *javaAgent {
	t.Helper()
	cp := agentClasspath(t, dir)
	port := freePort(t) // data only: the instance's port in its registration
	a := &javaAgent{t: t, app: strings.ToUpper(app), id: "127.0.0.1:" + strings.ToLower(app) + ":" + strconv.Itoa(port),
		out: &lineLog{}, replies: map[string]chan string{}}
	args := []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.io.tmpdir=" + t.TempDir(),
		"-Dlog4j.configuration=file:" + filepath.Join(dir, "client", "conf", "log4j.properties"),
		"-Darchaius.dynamicPropertyFactory.registerConfigWithJMX=false"}
	args = append(args, strings.Fields(javaOpts)...)
	args = append(args, "-cp", cp, "musteragent.EurekaAgent",
		"--url="+strings.Join(urls, ","), "--app="+a.app, "--instance-id="+a.id, "--port="+strconv.Itoa(port))
	args = append(args, extra...)
	a.cmd = exec.Command("java", args...)
	stdin, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.stdin = stdin
	a.done = startLogged(t, a.cmd, a.out, a.dispatch)
	t.Cleanup(func() {
		a.stdin.Close()
		stopProcess(a.cmd, a.done)
		if t.Failed() {
			t.Logf("java client %s output tail:\n%s", a.id, a.out.tail(12000))
		}
	})
	a.waitSelf(60*time.Second, "UP")
	return a
}

var replyLine = regexp.MustCompile(`^reply (\d+) (.*)$`)

func (a *javaAgent) dispatch(line string) {
	m := replyLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	a.mu.Lock()
	ch := a.replies[m[1]]
	delete(a.replies, m[1])
	a.mu.Unlock()
	if ch != nil {
		ch <- m[2]
	}
}

// call sends one command to the agent and returns its reply.
func (a *javaAgent) call(command string) string {
	a.t.Helper()
	a.mu.Lock()
	a.seq++
	id := strconv.Itoa(a.seq)
	ch := make(chan string, 1)
	a.replies[id] = ch
	a.mu.Unlock()
	if _, err := fmt.Fprintf(a.stdin, "%s %s\n", id, command); err != nil {
		a.t.Fatalf("java client %s: sending %q: %v", a.id, command, err)
	}
	select {
	case r := <-ch:
		if strings.HasPrefix(r, "error") {
			a.t.Fatalf("java client %s: %q: %s", a.id, command, r)
		}
		return r
	case <-a.done:
		a.t.Fatalf("java client %s exited before answering %q", a.id, command)
	case <-time.After(30 * time.Second):
		a.t.Fatalf("java client %s did not answer %q", a.id, command)
	}
	return ""
}

// waitSelf waits until the client's own fetched registry shows its
// instance with the given status.
func (a *javaAgent) waitSelf(timeout time.Duration, status string) {
	a.t.Helper()
	testwait.For(a.t, timeout, "the Java client "+a.id+" fetches itself as "+status, func() error {
		select {
		case <-a.done:
			a.t.Fatalf("the Java client exited:\n%s", a.out.tail(4000))
		default:
		}
		for _, l := range a.out.since(0) {
			if strings.HasPrefix(l, "ready ") {
				got := a.call("find " + a.app + " " + a.id)
				if !strings.HasPrefix(got, "status="+status+" ") {
					return fmt.Errorf("its registry has: %s", got)
				}
				return nil
			}
		}
		return fmt.Errorf("not started yet")
	})
}

// wire returns the client's requests logged since line index from, as
// "METHOD URL -> STATUS".
func (a *javaAgent) wire(from int) []string {
	var w []string
	for _, l := range a.out.since(from) {
		if strings.HasPrefix(l, "wire ") {
			w = append(w, strings.TrimPrefix(l, "wire "))
		}
	}
	return w
}

// sawWire reports whether a request matching re was logged since from.
func (a *javaAgent) sawWire(from int, re string) bool {
	r := regexp.MustCompile(re)
	for _, w := range a.wire(from) {
		if r.MatchString(w) {
			return true
		}
	}
	return false
}

// instance is the part of a Eureka instance document the tests read.
type instance struct {
	Status           string            `json:"status"`
	OverriddenStatus string            `json:"overriddenStatus"`
	Overriddenstatus string            `json:"overriddenstatus"` // the Java server's legacy spelling
	Metadata         map[string]string `json:"metadata"`
	LeaseInfo        struct {
		LastRenewalTimestamp int64 `json:"lastRenewalTimestamp"`
	} `json:"leaseInfo"`
}

func (i instance) overridden() string {
	if i.OverriddenStatus != "" {
		return i.OverriddenStatus
	}
	return i.Overriddenstatus
}

// getInstance reads GET base/apps/APP/ID as JSON: the instance, or an
// error that says what the server answered.
func getInstance(c *http.Client, base, app, id string) (instance, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, _ := http.NewRequest(http.MethodGet, base+"apps/"+app+"/"+id, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return instance{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return instance{}, fmt.Errorf("GET %sapps/%s/%s: %d %s", base, app, id, resp.StatusCode, tail(b, 200))
	}
	var doc struct {
		Instance instance `json:"instance"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return instance{}, fmt.Errorf("GET %sapps/%s/%s: %v: %s", base, app, id, err, tail(b, 200))
	}
	return doc.Instance, nil
}

// waitInstance waits until base has the instance and check accepts it.
func waitInstance(t *testing.T, c *http.Client, base, app, id, what string, check func(instance) error) instance {
	t.Helper()
	var got instance
	testwait.For(t, 30*time.Second, what, func() error {
		i, err := getInstance(c, base, app, id)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(i); err != nil {
				return err
			}
		}
		got = i
		return nil
	})
	return got
}

// waitGone waits until base answers 404 for the instance.
func waitGone(t *testing.T, c *http.Client, base, app, id, what string) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	testwait.For(t, 30*time.Second, what, func() error {
		req, _ := http.NewRequest(http.MethodGet, base+"apps/"+app+"/"+id, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("GET instance %d", resp.StatusCode)
		}
		return nil
	})
}

func statusIs(want string) func(instance) error {
	return func(i instance) error {
		if i.Status != want {
			return fmt.Errorf("status %s (overridden %s), want %s", i.Status, i.overridden(), want)
		}
		return nil
	}
}

// send makes one request and returns its status.
func send(t *testing.T, method, url string, header ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// partitionProxy forwards TCP connections to a target until cut, when it
// drops every connection and refuses new ones (closes them at once): a
// client cut off from its server by the network, the server still up.
type partitionProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newPartitionProxy(t *testing.T, target string) *partitionProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *partitionProxy) addr() string { return p.ln.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *partitionProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

func (p *partitionProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
	}
}

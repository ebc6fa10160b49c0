package interoptest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// LineLog keeps every line a process printed, in order.
type LineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *LineLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

// Len is the number of lines so far: a mark for Since.
func (l *LineLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// Since returns the lines from index i on.
func (l *LineLog) Since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i > len(l.lines) {
		i = len(l.lines)
	}
	return append([]string(nil), l.lines[i:]...)
}

// Match returns the lines from index i on that match the regular expression re.
func (l *LineLog) Match(i int, re string) []string {
	rx := regexp.MustCompile(re)
	var out []string
	for _, s := range l.Since(i) {
		if rx.MatchString(s) {
			out = append(out, s)
		}
	}
	return out
}

// Tail is the last n bytes of the log.
func (l *LineLog) Tail(n int) string { return Tail(strings.Join(l.Since(0), "\n"), n) }

// Process is a started command whose output is kept line by line.
type Process struct {
	Cmd  *exec.Cmd
	Out  *LineLog
	Done chan struct{} // closed when the process has exited
}

// Start starts cmd with its output (stdout and stderr) collected into a
// LineLog, handing each line to onLine too, if given. The process is
// stopped when the test ends, and its log tail is printed if the test
// failed.
func Start(t testing.TB, name string, cmd *exec.Cmd, onLine ...func(string)) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, Out: &LineLog{}, Done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			p.Out.add(sc.Text())
			for _, f := range onLine {
				f(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(p.Done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log tail:\n%s", name, p.Out.Tail(4000))
		}
	})
	return p
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Stop ends the process: SIGINT first (a graceful shutdown, which is how
// a Spring app or a Muster node deregisters), SIGKILL after 15 s.
func (p *Process) Stop() {
	if p == nil || p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.Done:
	case <-time.After(15 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.Done
	}
}

// Kill ends the process at once, as a crash would: no deregistration.
func (p *Process) Kill() {
	if p == nil || p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Kill()
	<-p.Done
}

// FreePort is a loopback TCP port nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitReady polls ready until it returns nil, for at most limit (goal
// says what is awaited, for the timeout message). It fails the test at
// once, with p's log tail, if p exits first: a process that died at
// start will never answer.
func WaitReady(t testing.TB, p *Process, name string, limit time.Duration, goal string, ready func() error) {
	t.Helper()
	testwait.For(t, limit, goal, func() error {
		if p.Exited() {
			t.Fatalf("%s exited at start:\n%s", name, p.Out.Tail(4000))
		}
		return ready()
	})
}

// StatusOK is nil for a 200 answer, else an error saying what came back.
// It closes the body, so it takes a call's results as they are:
// StatusOK(client.Do(req)).
func StatusOK(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

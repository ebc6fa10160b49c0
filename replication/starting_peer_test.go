package replication

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// refused is the error net/http gives for a peer nothing listens on yet.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

// logLines are the JSON lines of a captured logger, as level and message.
func logLines(t *testing.T, buf *bytes.Buffer) [][2]string {
	t.Helper()
	var out [][2]string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lvl, _ := m["level"].(string)
		msg, _ := m["message"].(string)
		out = append(out, [2]string{lvl, msg})
	}
	return out
}

// A peer that is still starting (connection refused, then 503 while it
// opens) is logged once at info level, however many batches it refuses,
// and once more when it answers; a peer that answered before and then
// refuses is a failure again, logged as a warning.
func TestPeer_startingPeerLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	h := newHarness(t, func(c *Config) { c.Logger = zerolog.New(&buf).Level(zerolog.InfoLevel) })
	h.enqueue(hbFor("a"))
	answers := []error{refused(), refused(), refused(), &StatusError{Code: 503}, &StatusError{Code: 503}}
	for _, err := range answers {
		h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, err }
		h.deliver(h.mustStep(t))
		h.clk.Advance(h.idleStep(t)) // the backoff
	}
	lines := logLines(t, &buf)
	if len(lines) != 1 || lines[0][0] != "info" || !strings.Contains(lines[0][1], "not answering yet") {
		t.Fatalf("log of a starting peer refusing %d batches: %v, want one info line", len(answers), lines)
	}
	h.ft.respond = func(_ Peer, b Batch) (BatchResult, error) { return allOK(b), nil }
	h.deliver(h.mustStep(t))
	lines = logLines(t, &buf)
	if len(lines) != 2 || lines[1][0] != "info" || !strings.Contains(lines[1][1], "peer is up") {
		t.Fatalf("after the first answer: %v", lines)
	}

	buf.Reset()
	h.clk.Advance(time.Second)
	h.enqueue(hbFor("b"))
	h.ft.respond = func(Peer, Batch) (BatchResult, error) { return BatchResult{}, refused() }
	h.deliver(h.mustStep(t))
	if lines := logLines(t, &buf); len(lines) != 1 || lines[0][0] != "warn" {
		t.Fatalf("a peer that answered before, then refuses: %v, want one warning", lines)
	}
}

func TestPeerStarting(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused(), true},
		{&StatusError{Code: 503}, true},
		{&StatusError{Code: 403}, false},
		{errors.New("tls: bad certificate"), false},
		{nil, false},
	} {
		if got := PeerStarting(tc.err); got != tc.want {
			t.Errorf("PeerStarting(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// Package testlog is the log sink of tests that read what a node or a
// cluster logged: a buffer its goroutines may all write to at once, and
// the JSON lines (zerolog's) in it.
package testlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is an io.Writer safe for concurrent writers.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines is the JSON log lines written so far whose message is msg,
// decoded; a line that is not JSON fails tb.
func (l *Buffer) Lines(tb testing.TB, msg string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			tb.Fatalf("log line %q: %v", line, err)
		}
		if m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

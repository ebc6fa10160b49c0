package cluster

import (
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Log keys (STYLE.md §5).
const (
	keyComponent      = "component"
	keyNode           = "node"
	keyPeer           = "peer"
	keyZone           = "zone"
	keyURL            = "url"
	keyAddr           = "addr"
	keyKind           = "kind"
	keyState          = "state"
	keyPrevState      = "prev_state"
	keySeeds          = "seeds"
	keyAttempt        = "attempt"
	keyRetryIn        = "retry_in"
	keySuppressed     = "suppressed"
	keyNodesContacted = "nodes_contacted"
	keySource         = "source"
	keyEncrypted      = "encrypted"
	keyGraceful       = "graceful"
	keyAlivePeers     = "alive_peers"
)

// secretKeyHint is appended to every error that looks like two nodes using
// different secret keys (or one using none): memberlist's own words for it
// ("No installed keys could decrypt the message") do not name the setting.
const secretKeyHint = "is cluster.secret-key the same on every node?"

// keyMismatchPhrases are fragments of memberlist's error texts for a key
// or encryption mismatch (memberlist: security.go, net.go readStream).
var keyMismatchPhrases = []string{
	"decrypt", // "no installed keys could decrypt the message", "Decrypt packet failed"
	"encryption is configured but remote state is not encrypted",
	"remote state is encrypted and encryption is not configured",
}

// looksLikeKeyMismatch reports whether an error text from memberlist
// points at differing secret keys.
func looksLikeKeyMismatch(s string) bool {
	s = strings.ToLower(s)
	for _, p := range keyMismatchPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// logGate stops all logging from memberlist's goroutines once Shutdown has
// finished: memberlist can still fire a suspicion timer or finish a stream
// afterwards, and a test's logger must not be written after the test ends.
type logGate struct {
	// mu guards closed; do holds it shared while logging, so close waits
	// for in-flight log calls.
	mu     sync.RWMutex
	closed bool
}

func (g *logGate) do(f func()) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		f()
	}
}

func (g *logGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// memberlistWriter is the io.Writer behind memberlist's *log.Logger. The
// standard logger calls Write once per line; each line becomes one zerolog
// event with source=memberlist at the level of its "[ERR]", "[WARN]",
// "[INFO]" or "[DEBUG]" prefix. Key-mismatch errors get secretKeyHint.
// memberlist's "Suspect <name> has failed" line also goes to onSuspect
// (see suspect.go). Write never blocks on anything but the log output.
type memberlistWriter struct {
	log       zerolog.Logger
	gate      *logGate
	onSuspect func(name string) // may be nil
}

func (w *memberlistWriter) Write(p []byte) (int, error) {
	level, msg := parseMemberlistLine(string(p))
	if looksLikeKeyMismatch(msg) {
		// memberlist's own "failed to join" line stays at its level: the
		// join loop reports the same error at Warn, rate-limited.
		if !strings.HasPrefix(msg, "failed to join ") {
			level = max(level, zerolog.WarnLevel)
		}
		msg += " (" + secretKeyHint + ")"
	}
	w.gate.do(func() {
		w.log.WithLevel(level).Str(keySource, "memberlist").Msg(msg)
	})
	if name, ok := suspectedNode(msg); ok && w.onSuspect != nil {
		w.onSuspect(name) // outside gate.do: it logs through the gate itself
	}
	return len(p), nil
}

// memberlistLevels maps memberlist's level prefixes to zerolog levels.
var memberlistLevels = []struct {
	prefix string
	level  zerolog.Level
}{
	{"[ERR]", zerolog.ErrorLevel},
	{"[ERROR]", zerolog.ErrorLevel},
	{"[WARN]", zerolog.WarnLevel},
	{"[INFO]", zerolog.InfoLevel},
	{"[DEBUG]", zerolog.DebugLevel},
	{"[TRACE]", zerolog.TraceLevel},
	{"Err:", zerolog.ErrorLevel}, // net.go: "Err: Could not set the deadline"
}

// parseMemberlistLine splits one memberlist log line into a level and a
// message without the level prefix, the "memberlist: " prefix and the
// trailing newline. Lines without a known prefix are Info.
func parseMemberlistLine(line string) (zerolog.Level, string) {
	line = strings.TrimRight(line, "\r\n")
	level := zerolog.InfoLevel
	for _, l := range memberlistLevels {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			level, line = l.level, rest
			break
		}
	}
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}

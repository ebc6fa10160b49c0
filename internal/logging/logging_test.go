package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew_jsonLinesAtLevel(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "warn", "auto") // a buffer is no terminal: JSON
	log.Info().Msg("dropped")
	log.Warn().Str("k", "v").Msg("kept")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want only the warning, got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not a JSON line: %q", lines[0])
	}
	ts, _ := rec["time"].(string)
	if rec["message"] != "kept" || rec["k"] != "v" || !strings.Contains(ts, ".") {
		t.Fatalf("record %v: want message, field and a millisecond timestamp", rec)
	}
}

func TestNew_badLevelIsInfoAndConsoleOnRequest(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "loud", "console")
	log.Debug().Msg("hidden")
	log.Info().Msg("shown")
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, "shown") || strings.HasPrefix(out, "{") {
		t.Fatalf("console output at info: %q", out)
	}
}

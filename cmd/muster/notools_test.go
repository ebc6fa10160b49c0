package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The server binary links no tool: the benchmark, the load generator and the
// simulated clients live under tools/ and are their own commands, and the
// benchmark's process control (internal/proccontrol) is linked by the bench
// alone. Checked over the whole dependency graph, not just the direct
// imports.
func TestMuster_linksNoTool(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH to list the dependency graph")
	}
	const module = "github.com/muster-registry/muster"
	out, err := exec.Command("go", "list", "-deps", module+"/cmd/muster").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	// The list must be the real graph, or the check below proves nothing.
	for _, want := range []string{module + "/registry", module + "/httpapi", module + "/node", module + "/cmd/muster"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s; got %d packages", want, len(deps))
		}
	}
	for _, d := range deps {
		if strings.HasPrefix(d, module+"/tools/") || strings.HasPrefix(d, module+"/scripts/") || d == module+"/internal/proccontrol" {
			t.Errorf("cmd/muster depends on %s, a tool", d)
		}
	}
}

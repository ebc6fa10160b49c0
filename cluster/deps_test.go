package cluster_test

import (
	"os/exec"
	"strings"
	"testing"
)

// modulePath is Muster's module; cluster may import none of its packages
// (STYLE.md §1: cmd/muster turns members into replication peers).
const modulePath = "github.com/muster-registry/muster"

func TestDeps_noProjectImports(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	self := modulePath + "/cluster"
	seen := false
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == self:
			seen = true
		case pkg == modulePath || strings.HasPrefix(pkg, modulePath+"/"):
			t.Errorf("cluster depends on %s; it may import no other Muster package (cmd/muster wires cluster to the rest)", pkg)
		}
	}
	if !seen {
		t.Fatalf("go list -deps did not list %s; output:\n%s", self, out)
	}
}

package auth_test

import (
	"os/exec"
	"strings"
	"testing"
)

// auth is a leaf: httpapi and cmd/muster import it, it imports no project
// package (ARCHITECTURE.md, "Security sits at the edges").
func TestDeps_authImportsNoProjectPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/muster-registry/muster/") && dep != "github.com/muster-registry/muster/auth" {
			t.Errorf("auth imports %s; it must stay a leaf package", dep)
		}
	}
}

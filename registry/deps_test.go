package registry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The registry is the core: it must not import any other project package
// (ARCHITECTURE.md, "Packages and the way data flows").
func TestDeps_registryImportsNoProjectPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/muster-registry/muster/") && dep != "github.com/muster-registry/muster/registry" {
			t.Errorf("registry imports %s; the core may import no other project package", dep)
		}
	}
}

package settings

import (
	"os"
	"strings"
	"testing"
)

// docs/spring-config.md lists every Spring key Muster accepts without
// using, with what Muster does instead.
func TestSpringConfigDoc_listsEverySpringKey(t *testing.T) {
	b, err := os.ReadFile("../docs/spring-config.md")
	if err != nil {
		t.Fatal(err)
	}
	for key := range springKeys {
		if !strings.Contains(string(b), "| `"+key+"` |") {
			t.Errorf("docs/spring-config.md lacks a row for %s", key)
		}
	}
}

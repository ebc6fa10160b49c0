package keystoretest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata with keytool")

// TestMake_update rewrites the committed keystores:
// go test ./internal/keystoretest/ -run Update -update
func TestMake_update(t *testing.T) {
	if !*update {
		t.Skip("without -update")
	}
	dir := Fixtures().Dir
	tmp := Make(t, t.TempDir())
	entries, err := os.ReadDir(tmp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(tmp.Path(e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFixtures_complete(t *testing.T) {
	for _, name := range []string{"ca.pem", "node.p12", "node.jks", "legacy.p12", "client.p12", "trust.p12", "trust.jks", "twokeys.p12"} {
		if _, err := os.Stat(Fixtures().Path(name)); err != nil {
			t.Error(err)
		}
	}
}

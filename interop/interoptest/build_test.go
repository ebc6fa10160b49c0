package interoptest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHashTree_changesWithSourcesNotWithBuildOutput(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pom.xml", "<project/>")
	write("src/main/java/A.java", "class A {}")
	a, err := hashTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	write("target/classes/A.class", "built")
	write("node_modules/x/index.js", "installed")
	if b, _ := hashTree(dir); b != a {
		t.Error("build output changed the source hash")
	}
	write("src/main/java/A.java", "class A { int x; }")
	if c, _ := hashTree(dir); c == a {
		t.Error("a changed source kept the same hash")
	}
	if k, ok := KindOf(dir); !ok || k != Maven {
		t.Errorf("KindOf = %q, %v; want maven", k, ok)
	}
}

func TestRegistryUnreachable_tellsNetworkFromOwnFailures(t *testing.T) {
	for out, want := range map[string]bool{
		"Could not transfer artifact x:y:pom:1 from/to central: java.net.UnknownHostException: repo": true,
		"npm ERR! code ENOTFOUND": true,
		"Failed to establish a new connection: [Errno 111] Connection refused": true,
		"Could not find artifact org.example:nope:jar:9.9 in central":          false,
		"[ERROR] COMPILATION ERROR : cannot find symbol":                       false,
		"ERROR: No matching distribution found for py-eureka-client==99":       false,
	} {
		if _, got := registryUnreachable(out); got != want {
			t.Errorf("registryUnreachable(%q) = %v, want %v", out, got, want)
		}
	}
}

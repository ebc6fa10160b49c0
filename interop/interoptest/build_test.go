package interoptest

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// A folder a pom.xml takes sources from (${project.basedir}/../…) is part
// of the module's hash: a change there rebuilds every module that uses it.
func TestSharedDirs_inTheSourceHash(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("app/pom.xml", `<project><build><sourceDirectory>${project.basedir}/../shared/java</sourceDirectory>
<x>${project.basedir}/src/main/java</x><y>${project.basedir}/../shared/java</y></build></project>`)
	write("shared/java/A.java", "class A {}")
	write("shared/other/B.java", "class B {}")
	src := filepath.Join(root, "app")
	shared, err := sharedDirs(src, Maven)
	if err != nil || len(shared) != 1 || shared[0] != filepath.Join("shared", "java") {
		t.Fatalf("sharedDirs = %q, %v; want [shared/java]", shared, err)
	}
	a, err := hashSources(src, shared)
	if err != nil {
		t.Fatal(err)
	}
	write("shared/other/B.java", "class B { int x; }")
	if b, _ := hashSources(src, shared); b != a {
		t.Error("a folder the pom does not name changed the hash")
	}
	write("shared/java/A.java", "class A { int x; }")
	if c, _ := hashSources(src, shared); c == a {
		t.Error("a changed shared source kept the same hash")
	}
	write("app/pom.xml", `<project><build><sourceDirectory>${project.basedir}/../missing</sourceDirectory></build></project>`)
	if _, err := sharedDirs(src, Maven); err == nil {
		t.Error("a pom naming a missing folder was accepted")
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

func TestWireTap_recordsAndCuts(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	tap := NewWireTap(t, "http://"+ln.Addr().String())
	req, _ := http.NewRequest("PUT", tap.URL()+"/eureka/apps/A/i?status=UP", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := tap.Find(0, "PUT", "/eureka/apps/A")
	if len(got) != 1 || got[0].Status != http.StatusTeapot || got[0].RespType != "application/json" || got[0].Query != "status=UP" {
		t.Fatalf("exchanges: %v", tap.Dump(0))
	}
	tap.SetCut(true)
	if resp, err := http.Get(tap.URL() + "/x"); err == nil {
		resp.Body.Close()
		t.Fatalf("a cut tap answered %d", resp.StatusCode)
	}
}

func TestPruneOlderBuilds_keepsThisAndTheNewestOther(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, age time.Duration) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(d, ".muster-built")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(f, when, when); err != nil {
			t.Fatal(err)
		}
		return d
	}
	keep := mk("app-0000000000000001", 0)
	newer := mk("app-0000000000000002", time.Hour)
	old := mk("app-0000000000000003", 2*time.Hour)
	other := mk("app-client-0000000000000004", 3*time.Hour) // another source
	pruneOlderBuilds(root, "app", keep)
	for d, want := range map[string]bool{keep: true, newer: true, old: false, other: true} {
		if got := exists(d); got != want {
			t.Errorf("%s exists %v, want %v", filepath.Base(d), got, want)
		}
	}
}

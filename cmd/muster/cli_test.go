package main

import (
	"bytes"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestRun_helpExitsZeroEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"}, {"serve", "-h"}, {"health", "--help"}, {"status", "--help"}, {"members", "--help"},
		{"config", "--help"}, {"k8s-zone", "--help"}, {"tls", "--help"}, {"tls", "ca", "--help"}, {"tls", "cert", "--help"},
		{"help"}, {"--help"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 {
			t.Errorf("muster %s: exit %d, want 0 (stderr %s)", strings.Join(args, " "), code, errOut.String())
		}
		if out.Len()+errOut.Len() == 0 || !strings.Contains(strings.ToLower(out.String()+errOut.String()), "usage") {
			t.Errorf("muster %s: no usage printed", strings.Join(args, " "))
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", "--no-such-flag"}, &out, &errOut); code == 0 {
		t.Error("serve --no-such-flag: exit 0")
	}
}

func TestParseConfigArgs_springCommandLine(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cf configFlags
	cf.register(fs)
	verbose := fs.Bool("verbose", false, "")
	err := parseConfigArgs(fs, &cf, []string{
		"--server.port=8762", "--eureka.instance.hostname", "peer1", "--config", "a.yml", "--verbose",
		"--spring.profiles.active=peer1,eu", "--profile", "x", "--set", "cluster.enabled=false", "-set=muster.log.level=debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"server.port=8762", "eureka.instance.hostname=peer1", "cluster.enabled=false", "muster.log.level=debug"}; !reflect.DeepEqual([]string(cf.sets), want) {
		t.Errorf("sets %v, want %v", cf.sets, want)
	}
	if cf.file != "a.yml" || !*verbose || !reflect.DeepEqual([]string(cf.profiles), []string{"peer1,eu", "x"}) {
		t.Errorf("file %q verbose %v profiles %v", cf.file, *verbose, cf.profiles)
	}
	cf = configFlags{}
	// The loader reads Spring's location list (file:, optional:, folders).
	if err := parseConfigArgs(fs, &cf, []string{"--spring.config.location=file:/etc/eureka.yml,optional:/etc/muster/",
		"--spring.config.additional-location=/a/", "--spring.config.additional-location", "/b.yml"}); err != nil ||
		cf.file != "file:/etc/eureka.yml,optional:/etc/muster/" || cf.additional != "/a/,/b.yml" {
		t.Errorf("spring.config.location: %q, additional %q, %v", cf.file, cf.additional, err)
	}
	if err := parseConfigArgs(fs, &cf, []string{"--server.port"}); err == nil {
		t.Error("--server.port without a value: no error")
	}
}

// --url takes host:port on every command that calls a node.
func TestNodeURL_hostPortEverywhere(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ready"))
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	var out, errOut bytes.Buffer
	if code := run([]string{"health", "--url", hostPort}, &out, &errOut); code != 0 || out.String() != "ready" {
		t.Errorf("health --url %s: exit %d, out %q, err %q", hostPort, code, out.String(), errOut.String())
	}
	for _, tc := range []struct{ raw, path, want string }{
		{"127.0.0.1:8761", "/readyz", "http://127.0.0.1:8761/readyz"},
		{"https://h:1/", "/readyz", "https://h:1/readyz"},
		{"u:p@h:1", "/admin/status", "http://u:p@h:1/admin/status"},
		{"h:1/admin/status", "/readyz", "http://h:1/admin/status"},
	} {
		u, err := nodeURL(tc.raw, "http", tc.path)
		if err != nil || u.String() != tc.want {
			t.Errorf("nodeURL(%q) = %v, %v; want %s", tc.raw, u, err, tc.want)
		}
	}
	if _, err := nodeURL("ftp://h:1", "http", "/"); err == nil {
		t.Error("ftp: no error")
	}
}

func TestConfigCheck_missingFileAndNoCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"config", "--check", "--config", "/nonexistent/application.yml"}, &out, &errOut); code == 0 || !strings.Contains(out.String(), "/nonexistent/application.yml") {
		t.Errorf("missing file: exit %d, out %q", code, out.String())
	}
	// --config alone checks too (it used to be ignored, exit 0).
	out.Reset()
	file := writeFile(t, "application.yml", "cluster.colour: blue\n")
	if code := run([]string{"config", "--config", file}, &out, &errOut); code == 0 || !strings.Contains(out.String(), "cluster.colour") {
		t.Errorf("config --config with a typo: exit %d, out %q", code, out.String())
	}
}

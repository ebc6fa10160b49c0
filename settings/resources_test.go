package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveResource(t *testing.T) {
	base := t.TempDir()
	extra := filepath.Join(base, "extra")
	for _, f := range []string{"resources/server.jks", "config/ca.pem", "both.pem", "resources/both.pem", "extra/both.pem"} {
		p := filepath.Join(base, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dirs := classpathDirs(filepath.Join(base, "application.yml"), nil)
	withExtra := classpathDirs(filepath.Join(base, "application.yml"), []string{"extra"})
	for _, tc := range []struct {
		value string
		dirs  []string
		want  string
		err   string
	}{
		{"classpath:server.jks", dirs, filepath.Join(base, "resources", "server.jks"), ""},
		{"classpath:/ca.pem", dirs, filepath.Join(base, "config", "ca.pem"), ""},
		{"CLASSPATH:ca.pem", dirs, filepath.Join(base, "config", "ca.pem"), ""},
		{"classpath:both.pem", dirs, filepath.Join(base, "both.pem"), ""},       // the file's directory before resources/
		{"classpath:both.pem", withExtra, filepath.Join(extra, "both.pem"), ""}, // muster.classpath first
		{"classpath:nope.jks", dirs, "", filepath.Join(base, "config", "nope.jks")},
		{"classpath:", dirs, "", "names no file"},
		{"file:/etc/muster/server.jks", dirs, "/etc/muster/server.jks", ""},
		{"file:///etc/muster/server.jks", dirs, "/etc/muster/server.jks", ""},
		{"file://localhost/etc/x.jks", dirs, "/etc/x.jks", ""},
		{"file://otherhost/x.jks", dirs, "", "a local file"},
		{"file:certs/server.jks", dirs, "certs/server.jks", ""},
		{"/etc/muster/server.jks", dirs, "/etc/muster/server.jks", ""},
	} {
		got, err := resolveResource(tc.value, tc.dirs)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want one naming %q", tc.value, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.value, got, err, tc.want)
		}
	}
}

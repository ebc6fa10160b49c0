package redact_test

import (
	"strings"
	"testing"

	"github.com/muster-registry/muster/internal/redact"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"http://node-a:8761/eureka/", "http://node-a:8761/eureka/"},
		{"http://admin:s3cret@node-a:8761/eureka/", "http://admin:xxxxx@node-a:8761/eureka/"},
		{"http://admin@node-a:8761/", "http://admin@node-a:8761/"},
		// Left as given, not re-encoded, when there is nothing to hide.
		{"http://node-a:8761/a%2Fb", "http://node-a:8761/a%2Fb"},
		// Does not parse (bad port, bad escape) and still loses the password.
		{"http://admin:s3cret@node-a:port/", "http://xxxxx@node-a:port/"},
		{"http://us@er:s3%zzcret@node-a/", "http://xxxxx@node-a/"},
		{"http://node-a:port/", "http://node-a:port/"},
		{"%zzadmin:s3cret@node-a", redact.Unparsable},
		{"", ""},
	} {
		got := redact.URL(tc.raw)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("URL(%q) = %q keeps the password", tc.raw, got)
		}
	}
}

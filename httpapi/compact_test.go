package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// X-Eureka-Accept is read as the Java server reads it (EurekaAccept.
// fromString): "compact" in any case asks for the compact form, any other
// value or none for the full one; the answer varies on it.
func TestGetApps_eurekaAcceptHeader(t *testing.T) {
	n := newTestNode(t)
	in := registrytest.NewInstance("ORDERS", "o1", registrytest.WithMetadata(map[string]string{"zone": "a"}))
	if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		accept  string
		compact bool
	}{{"", false}, {"full", false}, {"mini", false}, {"compact", true}, {"COMPACT", true}, {"Compact", true}} {
		for _, path := range []string{"/eureka/apps", "/eureka/apps/delta", "/eureka/apps/ORDERS", "/eureka/vips/" + in.VIPAddress} {
			headers := []string{"Accept", "application/json"}
			if c.accept != "" {
				headers = append(headers, "X-Eureka-Accept", c.accept)
			}
			r := n.do(t, http.MethodGet, path, "", headers...)
			if r.code != http.StatusOK {
				t.Fatalf("GET %s (X-Eureka-Accept %q): %d %s", path, c.accept, r.code, r.body)
			}
			// Only the full form carries metadata and leaseInfo.
			full := strings.Contains(r.body, `"leaseInfo"`) && strings.Contains(r.body, `"zone":"a"`)
			if full == c.compact || !strings.Contains(r.body, `"instanceId":"o1"`) {
				t.Errorf("GET %s (X-Eureka-Accept %q): compact %v, want %v: %s", path, c.accept, !full, c.compact, r.body)
			}
			if !strings.Contains(strings.Join(r.header.Values("Vary"), ","), "X-Eureka-Accept") {
				t.Errorf("GET %s: Vary %q does not name X-Eureka-Accept", path, r.header.Values("Vary"))
			}
		}
	}
	// A single instance has one form only, as on the Java server.
	r := n.do(t, http.MethodGet, "/eureka/apps/ORDERS/o1", "", "Accept", "application/json", "X-Eureka-Accept", "compact")
	if !strings.Contains(r.body, `"leaseInfo"`) {
		t.Errorf("GET instance with X-Eureka-Accept compact: %s", r.body)
	}
}

// Every form is cached apart, and a change encodes the changed app once per
// form and variant: the full and the compact form, JSON and XML, plain and
// gzip are 8 encodings of one app (an app of more than a few instances is
// compressed on its own), and nothing more for other apps or repeated
// reads.
func TestGetApps_compactOneEncodingPerChangedPiece(t *testing.T) {
	n := newTestNode(t)
	for a := range 5 {
		for i := range 8 {
			in := registrytest.NewInstance(fmt.Sprintf("APP-%d", a), fmt.Sprintf("a%d-i%d", a, i))
			if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
		}
	}
	encodings := func() int {
		for _, line := range strings.Split(n.do(t, http.MethodGet, "/metrics", "").body, "\n") {
			if v, ok := strings.CutPrefix(line, "muster_payload_encodings_total "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return int(f)
			}
		}
		t.Fatal("muster_payload_encodings_total missing from /metrics")
		return 0
	}
	fetchAll := func() {
		for _, form := range docForms {
			for _, gz := range []bool{false, true} {
				fetchRaw(t, n, "/eureka/apps", form, gz)
			}
		}
	}
	fetchAll()
	before := encodings()
	fetchAll()
	if got := encodings(); got != before {
		t.Fatalf("reads of an unchanged registry encoded %d pieces", got-before)
	}
	if _, err := n.reg.Apply(registry.StatusOp("APP-2", "a2-i3", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	fetchAll()
	fetchAll()
	if got := encodings() - before; got != 8 {
		t.Fatalf("a change in one app encoded %d pieces across the 8 variants, want 8", got)
	}
	if b := gunzipOrFail(t, fetchRaw(t, n, "/eureka/apps", docForm{compact: true}, true)); !strings.Contains(string(b), `"status":"OUT_OF_SERVICE"`) {
		t.Fatalf("compact document after the change: %s", b)
	}
}

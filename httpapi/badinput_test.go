package httpapi_test

import (
	"testing"
)

// Why: a heartbeat 404 with a text body made the Java client count a
// transport error and never register again (issue 22). The 404 that asks a
// client to register again is empty, as the Java server's is.
func TestHeartbeat404_isEmpty(t *testing.T) {
	n := newTestNode(t)
	for _, base := range []string{"/eureka", "/eureka/v2", "/v2"} {
		for _, accept := range []string{"", "application/json", "application/xml"} {
			var headers []string
			if accept != "" {
				headers = []string{"Accept", accept}
			}
			// The empty answer's type is the one asked for: Spring's
			// WebClient cannot read even an empty application/xml body
			// when it asked JSON, and then never registers again.
			wantType := "application/xml"
			if accept == "application/json" {
				wantType = "application/json"
			}
			r := n.do(t, "PUT", base+"/apps/ORDERS/gone?status=UP&lastDirtyTimestamp=1", "", headers...)
			if r.Code != 404 || r.Body != "" || r.Header.Get("Content-Type") != wantType {
				t.Errorf("%s heartbeat of an unknown instance (Accept %q): %d %q %q, want an empty %s 404",
					base, accept, r.Code, r.Header.Get("Content-Type"), r.Body, wantType)
			}
			if r.Reason() == "" {
				t.Errorf("%s: no X-Muster-Error reason", base)
			}
		}
	}
	// Routes outside Eureka's keep a readable text body.
	if r := n.do(t, "GET", "/console/apps/NOPE", ""); r.Code != 404 || r.Body == "" {
		t.Errorf("console 404: %d %q, want a text reason", r.Code, r.Body)
	}
}

package httpapi_test

import (
	"strings"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// Under a context path every route moves (escaped instance ids
// included), the probes answer at the root too, and the dashboard's
// links, assets and pages carry the path.
func TestServer_contextPath(t *testing.T) {
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.ContextPath = "/register" })
	if r := n.do(t, "POST", "/register/eureka/apps/ORDERS", springBody, jsonHeaders()...); r.Code != 204 {
		t.Fatalf("register under the path: %d %s", r.Code, r.Reason())
	}
	for path, want := range map[string]int{
		"/register/eureka/apps/ORDERS":                        200,
		"/register/eureka/apps/ORDERS/host-a%3Aorders%3A8080": 200,
		"/register/eureka/v2/apps/ORDERS":                     200,
		"/register/":                                          200,
		"/register/console/instances":                         200,
		"/register/static/muster.css":                         200,
		"/register/metrics":                                   200,
		"/readyz":                                             200,
		"/livez":                                              200,
		"/eureka/apps/ORDERS":                                 404,
		"/console/instances":                                  404,
		"/metrics":                                            404,
		"/registerx":                                          404,
	} {
		if r := n.do(t, "GET", path, "", "Accept", "application/json"); r.Code != want {
			t.Errorf("GET %s: %d, want %d", path, r.Code, want)
		}
	}
	page := n.do(t, "GET", "/register/console/instances", "").Body
	for _, want := range []string{`href="/register/static/muster.css"`, `src="/register/static/console.js"`, `data-base="/register"`,
		`href="/register/console/apps/ORDERS"`, `action="/register/console/instances"`} {
		if !strings.Contains(page, want) {
			t.Errorf("instances page lacks %s", want)
		}
	}
	if strings.Contains(page, `href="/console`) || strings.Contains(page, `href="/static`) {
		t.Errorf("instances page links outside the context path:\n%.3000s", page)
	}
}

func TestConfig_contextPathValidated(t *testing.T) {
	for _, bad := range []string{"register", "/register/", "/a b", "/a?b"} {
		c := httpapi.DefaultConfig()
		c.ContextPath = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "ContextPath") {
			t.Errorf("ContextPath %q: %v", bad, err)
		}
	}
}

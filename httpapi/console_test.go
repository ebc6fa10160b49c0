package httpapi_test

// The console through the assembled server: its actions by role with
// authentication on. The console's own tests are httpapi/console's.

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/muster-registry/muster/internal/testhttp"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// newConsoleClient is a browser on n's console (headers: its
// credentials, say).
func newConsoleClient(t *testing.T, n *testNode, headers ...string) *testhttp.Browser {
	return &testhttp.Browser{TB: t, Base: n.http.URL, Headers: headers}
}

func statusOf(t *testing.T, n *testNode, app, id string) registry.Status {
	t.Helper()
	r := n.do(t, "GET", "/eureka/apps/"+app+"/"+id, "", append([]string{"Accept", "application/json"}, basic("admin", adminPW)...)...)
	if r.Code == 404 {
		return ""
	}
	m := regexp.MustCompile(`"status":"([A-Z_]+)"`).FindStringSubmatch(r.Body)
	if r.Code != 200 || m == nil {
		t.Fatalf("GET instance: %d %s", r.Code, r.Body)
	}
	return registry.Status(m[1])
}

func TestConsole_actionsNeedAdmin(t *testing.T) {
	n := newSecuredNode(t, "", true)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP-00", "app-00-i000"))); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ name, pw string }{{"reader", readerPW}, {"writer", writerPW}} {
		cc := newConsoleClient(t, n, basic(u.name, u.pw)...)
		if r := cc.Get("/console/apps/APP-00"); r.Code != 200 || strings.Contains(r.Body, `class="act"`) {
			t.Errorf("%s: app page %d, or it shows actions", u.name, r.Code)
		}
		if r := cc.Get("/console/confirm?action=cancel&app=APP-00&id=app-00-i000"); r.Code != http.StatusForbidden {
			t.Errorf("%s: confirm %d, want 403", u.name, r.Code)
		}
		if r := cc.PostForm("/console/actions", url.Values{"action": {"cancel"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {"x"}}); r.Code != http.StatusForbidden {
			t.Errorf("%s: POST %d, want 403", u.name, r.Code)
		}
	}
	if r := n.do(t, "GET", "/", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("dashboard without credentials: %d", r.Code)
	}
	admin := newConsoleClient(t, n, basic("admin", adminPW)...)
	if r := admin.Get("/console/apps/APP-00"); !strings.Contains(r.Body, `class="act"`) || strings.Contains(r.Body, `id="open-banner"`) {
		t.Error("admin: app page lacks the actions, or shows the open banner on a secured node")
	}
	token := admin.ConsoleCSRF("out-of-service", "APP-00", "app-00-i000")
	form := url.Values{"action": {"out-of-service"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}
	if r := admin.PostForm("/console/actions", form); r.Code != http.StatusSeeOther {
		t.Fatalf("admin action: %d %s", r.Code, r.Body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusOutOfService {
		t.Fatalf("status %s", st)
	}
}

// The console's Drain and Undrain: confirmed, CSRF-checked, and the
// drained instance shown with its receipt.
func TestConsole_drainAndUndrain(t *testing.T) {
	n := newSecuredNode(t, "", true)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP-00", "app-00-i000"))); err != nil {
		t.Fatal(err)
	}
	admin := newConsoleClient(t, n, basic("admin", adminPW)...)
	if r := admin.Get("/console/apps/APP-00"); !strings.Contains(r.Body, `data-action="drain"`) {
		t.Fatal("app page lacks the drain action")
	}
	if r := admin.PostForm("/console/actions", url.Values{"action": {"drain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {"x"}}); r.Code != http.StatusForbidden {
		t.Fatalf("drain without the form's token: %d", r.Code)
	}
	token := admin.ConsoleCSRF("drain", "APP-00", "app-00-i000")
	if r := admin.PostForm("/console/actions", url.Values{"action": {"drain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}); r.Code != http.StatusSeeOther {
		t.Fatalf("drain: %d %s", r.Code, r.Body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusOutOfService {
		t.Fatalf("drained: %s", st)
	}
	r := admin.Get("/console/apps/APP-00")
	if !strings.Contains(r.Body, "drained ") || !strings.Contains(r.Body, "readers confirmed on 1 nodes") || !strings.Contains(r.Body, `data-action="undrain"`) {
		t.Fatalf("app page of a drained instance:\n%s", r.Body)
	}
	token = admin.ConsoleCSRF("undrain", "APP-00", "app-00-i000")
	if r := admin.PostForm("/console/actions", url.Values{"action": {"undrain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}); r.Code != http.StatusSeeOther {
		t.Fatalf("undrain: %d %s", r.Code, r.Body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusUp || len(n.reg.Drained()) != 0 {
		t.Fatalf("undrained: %s", st)
	}
}

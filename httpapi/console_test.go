package httpapi_test

// The console through the assembled server: its actions by role with
// authentication on. The console's own tests are httpapi/console's.

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// consoleClient keeps the console's cookie, as a browser does.
type consoleClient struct {
	t       *testing.T
	n       *testNode
	cookie  string
	headers []string
}

func (cc *consoleClient) get(path string) response {
	cc.t.Helper()
	h := append([]string{}, cc.headers...)
	if cc.cookie != "" {
		h = append(h, "Cookie", cc.cookie)
	}
	r := cc.n.do(cc.t, "GET", path, "", h...)
	if sc := r.header.Get("Set-Cookie"); sc != "" {
		cc.cookie = strings.SplitN(sc, ";", 2)[0]
	}
	return r
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// confirm opens the confirmation page and returns its CSRF token.
func (cc *consoleClient) confirm(action, app, id string) string {
	cc.t.Helper()
	r := cc.get("/console/confirm?action=" + action + "&app=" + app + "&id=" + id)
	m := csrfRE.FindStringSubmatch(r.body)
	if r.code != 200 || m == nil {
		cc.t.Fatalf("confirm page: %d %s", r.code, r.body)
	}
	return m[1]
}

func (cc *consoleClient) post(form url.Values, extra ...string) response {
	cc.t.Helper()
	h := append(append([]string{"Content-Type", "application/x-www-form-urlencoded"}, cc.headers...), extra...)
	if cc.cookie != "" {
		h = append(h, "Cookie", cc.cookie)
	}
	return cc.n.do(cc.t, "POST", "/console/actions", form.Encode(), h...)
}

func statusOf(t *testing.T, n *testNode, app, id string) registry.Status {
	t.Helper()
	r := n.do(t, "GET", "/eureka/apps/"+app+"/"+id, "", append([]string{"Accept", "application/json"}, basic("admin", adminPW)...)...)
	if r.code == 404 {
		return ""
	}
	m := regexp.MustCompile(`"status":"([A-Z_]+)"`).FindStringSubmatch(r.body)
	if r.code != 200 || m == nil {
		t.Fatalf("GET instance: %d %s", r.code, r.body)
	}
	return registry.Status(m[1])
}

func TestConsole_actionsNeedAdmin(t *testing.T) {
	n := newSecuredNode(t, "", true)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP-00", "app-00-i000"))); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ name, pw string }{{"reader", readerPW}, {"writer", writerPW}} {
		cc := &consoleClient{t: t, n: n, headers: basic(u.name, u.pw)}
		if r := cc.get("/console/apps/APP-00"); r.code != 200 || strings.Contains(r.body, `class="act"`) {
			t.Errorf("%s: app page %d, or it shows actions", u.name, r.code)
		}
		if r := cc.get("/console/confirm?action=cancel&app=APP-00&id=app-00-i000"); r.code != http.StatusForbidden {
			t.Errorf("%s: confirm %d, want 403", u.name, r.code)
		}
		if r := cc.post(url.Values{"action": {"cancel"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {"x"}}); r.code != http.StatusForbidden {
			t.Errorf("%s: POST %d, want 403", u.name, r.code)
		}
	}
	if r := n.do(t, "GET", "/", ""); r.code != http.StatusUnauthorized {
		t.Errorf("dashboard without credentials: %d", r.code)
	}
	admin := &consoleClient{t: t, n: n, headers: basic("admin", adminPW)}
	if r := admin.get("/console/apps/APP-00"); !strings.Contains(r.body, `class="act"`) || strings.Contains(r.body, `id="open-banner"`) {
		t.Error("admin: app page lacks the actions, or shows the open banner on a secured node")
	}
	token := admin.confirm("out-of-service", "APP-00", "app-00-i000")
	form := url.Values{"action": {"out-of-service"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}
	if r := admin.post(form); r.code != http.StatusSeeOther {
		t.Fatalf("admin action: %d %s", r.code, r.body)
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
	admin := &consoleClient{t: t, n: n, headers: basic("admin", adminPW)}
	if r := admin.get("/console/apps/APP-00"); !strings.Contains(r.body, `data-action="drain"`) {
		t.Fatal("app page lacks the drain action")
	}
	if r := admin.post(url.Values{"action": {"drain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {"x"}}); r.code != http.StatusForbidden {
		t.Fatalf("drain without the form's token: %d", r.code)
	}
	token := admin.confirm("drain", "APP-00", "app-00-i000")
	if r := admin.post(url.Values{"action": {"drain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}); r.code != http.StatusSeeOther {
		t.Fatalf("drain: %d %s", r.code, r.body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusOutOfService {
		t.Fatalf("drained: %s", st)
	}
	r := admin.get("/console/apps/APP-00")
	if !strings.Contains(r.body, "drained ") || !strings.Contains(r.body, "readers confirmed on 1 nodes") || !strings.Contains(r.body, `data-action="undrain"`) {
		t.Fatalf("app page of a drained instance:\n%s", r.body)
	}
	token = admin.confirm("undrain", "APP-00", "app-00-i000")
	if r := admin.post(url.Values{"action": {"undrain"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}); r.code != http.StatusSeeOther {
		t.Fatalf("undrain: %d %s", r.code, r.body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusUp || len(n.reg.Drained()) != 0 {
		t.Fatalf("undrained: %s", st)
	}
}

package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testhttp"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// fillConsole registers apps APP-00…APP-(apps-1), each with perApp
// instances spread over zones a, b and c; every third instance is DOWN and
// the first instance of each app carries version=2.
func fillConsole(t testing.TB, reg *registry.Registry, apps, perApp int) {
	t.Helper()
	for a := range apps {
		app := fmt.Sprintf("APP-%02d", a)
		for i := range perApp {
			id := fmt.Sprintf("%s-i%03d", strings.ToLower(app), i)
			md := map[string]string{"zone": string(rune('a' + i%3)), "version": "1"}
			if i == 0 {
				md["version"] = "2"
			}
			in := registrytest.NewInstance(app, id, registrytest.WithMetadata(md))
			in.IPAddr = fmt.Sprintf("10.%d.%d.%d", a/250, a%250, i)
			if i%3 == 1 {
				in.Status = registry.StatusDown
			}
			if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var rowRE = regexp.MustCompile(`<tr class="(app|instance)-row"`)

func rows(body string) int { return len(rowRE.FindAllString(body, -1)) }

func TestConsole_overviewFiltersAndPages(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 60, 3)

	r := n.do(t, "GET", "/", "")
	if r.Code != 200 || rows(r.Body) != 50 || !strings.Contains(r.Body, "page 1 of 2 (60)") {
		t.Fatalf("overview: %d, %d rows", r.Code, rows(r.Body))
	}
	for _, want := range []string{"DS Replicas", "General Info", `id="open-banner"`, `id="sp-chart"`, `href="/console/apps/APP-00"`,
		`<span class="ok"><b>UP</b> (2)</span>`, `<span class="bad"><b>DOWN</b> (1)</span>`, "a (1), b (1), c (1)"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if p2 := n.do(t, "GET", "/?page=2", ""); rows(p2.Body) != 10 || !strings.Contains(p2.Body, "APP-59") || strings.Contains(p2.Body, ">APP-00<") {
		t.Errorf("page 2: %d rows", rows(p2.Body))
	}
	// App search is a case-insensitive substring.
	if r := n.do(t, "GET", "/?app=app-1", ""); rows(r.Body) != 10 || !strings.Contains(r.Body, "APP-19") {
		t.Errorf("app=app-1: %d rows", rows(r.Body))
	}
	// Instance-level filters count the matching instances only.
	r = n.do(t, "GET", "/?status=DOWN&zone=b", "")
	if rows(r.Body) != 50 || !strings.Contains(r.Body, `<span class="bad"><b>DOWN</b> (1)</span>`) || strings.Contains(r.Body, "<b>UP</b>") ||
		!strings.Contains(r.Body, "60 matching instances") {
		t.Errorf("status=DOWN&zone=b: %d rows", rows(r.Body))
	}
	if r := n.do(t, "GET", "/?host=10.0.7.", ""); rows(r.Body) != 1 || !strings.Contains(r.Body, "APP-07") {
		t.Errorf("host=10.0.7.: %d rows", rows(r.Body))
	}
	if r := n.do(t, "GET", "/?meta=version%3D3", ""); rows(r.Body) != 0 || !strings.Contains(r.Body, `id="no-apps"`) {
		t.Errorf("meta=version=3: %d rows", rows(r.Body))
	}
	// The old route and the new one serve the same page.
	if r := n.do(t, "GET", "/dashboard", ""); r.Code != 200 || !strings.Contains(r.Body, "System Status") {
		t.Errorf("/dashboard: %d", r.Code)
	}
}

func TestConsole_instancesFiltersAndPages(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 3, 30)

	r := n.do(t, "GET", "/console/apps/app-01?size=10&page=2", "")
	if r.Code != 200 || rows(r.Body) != 10 || !strings.Contains(r.Body, "page 2 of 3 (30)") ||
		!strings.Contains(r.Body, "app-01-i010") || strings.Contains(r.Body, "app-01-i009") {
		t.Fatalf("app page 2: %d, %d rows", r.Code, rows(r.Body))
	}
	for _, want := range []string{"host-app-01-i010:8080", "10.0.1.10", "zone=b", "version=1", "Lease age", "Last renewal", "this node"} {
		if !strings.Contains(r.Body, want) {
			t.Errorf("app page lacks %q", want)
		}
	}
	// A page past the end shows the last page.
	if r := n.do(t, "GET", "/console/apps/APP-01?size=10&page=99", ""); rows(r.Body) != 10 || !strings.Contains(r.Body, "page 3 of 3") {
		t.Errorf("page 99: %d rows", rows(r.Body))
	}
	cases := []struct {
		query string
		want  int
	}{
		{"status=DOWN", 30},                      // 10 per app
		{"status=down&zone=b", 30},               // every DOWN one is in zone b (i%3 == 1)
		{"zone=a&app=APP-02", 10},                // app filter on the all-apps list
		{"host=HOST-APP-00-I00", 10},             // host names match in any case
		{"meta=version%3D2", 3},                  // the first of each app
		{"meta=version", 90},                     // key present
		{"host=10.0.2.&status=UP&size=500", 20},  // IP substring
		{"meta=version%3D2&status=DOWN", 0},      // nothing
		{"app=APP-0&status=STARTING&zone=a", 0},  // nothing
		{"host=10.0.0.&meta=zone%3Dc&size=3", 3}, // page of 10 matches
	}
	for _, c := range cases {
		r := n.do(t, "GET", "/console/instances?"+c.query, "")
		if r.Code != 200 {
			t.Errorf("%s: %d %s", c.query, r.Code, r.Body)
			continue
		}
		if got := rows(r.Body); got != min(c.want, 50) && !strings.Contains(c.query, "size=3") {
			t.Errorf("%s: %d rows, want %d", c.query, got, c.want)
		}
	}
	if r := n.do(t, "GET", "/console/instances?host=10.0.0.&meta=zone%3Dc&size=3", ""); !strings.Contains(r.Body, "page 1 of 4 (10)") {
		t.Error("host+meta: want 10 matches over 4 pages of 3")
	}
	if r := n.do(t, "GET", "/console/apps/NOPE", ""); r.Code != 404 {
		t.Errorf("unknown app: %d", r.Code)
	}
}

func TestConsole_badInput(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 1)
	for _, path := range []string{
		"/?status=BOGUS", "/?page=0", "/?size=0", "/?size=501", "/?page=x", "/?page=-1",
		"/console/instances?meta=%3Dx", "/console/instances?host=" + strings.Repeat("x", 300),
		"/console/confirm?action=explode&app=APP-00&id=app-00-i000",
	} {
		if r := n.do(t, "GET", path, ""); r.Code != 400 {
			t.Errorf("%s: %d, want 400", path, r.Code)
		}
	}
	if r := n.do(t, "GET", "/console/confirm?action=cancel&app=APP-00&id=nobody", ""); r.Code != 404 {
		t.Errorf("confirm of an unknown instance: %d", r.Code)
	}
	if r := n.do(t, "GET", "/static/nothing.js", ""); r.Code != 404 {
		t.Errorf("unknown asset: %d", r.Code)
	}
}

func TestConsole_gzipWhenAsked(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 20, 5)
	for _, path := range []string{"/", "/console/apps/APP-03", "/static/console.js", "/static/muster.css"} {
		plain := n.do(t, "GET", path, "")
		if plain.Code != 200 || plain.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s without Accept-Encoding: %d %q", path, plain.Code, plain.Header.Get("Content-Encoding"))
		}
		zipped := n.do(t, "GET", path, "", "Accept-Encoding", "gzip, deflate")
		if zipped.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(zipped.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("%s with Accept-Encoding gzip: %q", path, zipped.Header.Get("Content-Encoding"))
		}
		if len(zipped.Body) != len(plain.Body) && path != "/" { // "/" shows the current memory use
			t.Errorf("%s: gzipped body decodes to %d bytes, plain is %d", path, len(zipped.Body), len(plain.Body))
		}
	}
}

func TestConsole_summaryIsVersioned(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 2)
	r := n.do(t, "GET", "/console/api/summary", "")
	m := regexp.MustCompile(`"index":"([0-9.]+)"`).FindStringSubmatch(r.Body)
	if r.Code != 200 || m == nil || !strings.Contains(r.Body, `"instances":2`) {
		t.Fatalf("summary: %d %s", r.Code, r.Body)
	}
	if again := n.do(t, "GET", "/console/api/summary?index="+m[1], ""); again.Code != http.StatusNotModified {
		t.Fatalf("unchanged registry: %d, want 304", again.Code)
	}
	// The page's live part carries the same index.
	if p := n.do(t, "GET", "/?partial=1", ""); p.Header.Get("X-Console-Index") != m[1] || strings.Contains(p.Body, "<html") {
		t.Errorf("partial: index %q, want %q", p.Header.Get("X-Console-Index"), m[1])
	}
	fillConsole(t, n.reg, 2, 2) // one app more
	if changed := n.do(t, "GET", "/console/api/summary?index="+m[1], ""); changed.Code != 200 || !strings.Contains(changed.Body, `"instances":4`) {
		t.Fatalf("after a register: %d %s", changed.Code, changed.Body)
	}
	// A sample of the chart changes it too.
	r = n.do(t, "GET", "/console/api/summary", "")
	idx := regexp.MustCompile(`"index":"([0-9.]+)"`).FindStringSubmatch(r.Body)[1]
	n.console.Sample()
	if r := n.do(t, "GET", "/console/api/summary?index="+idx, ""); r.Code != 200 {
		t.Errorf("after a sample: %d, want 200", r.Code)
	}
}

// newConsoleClient is a browser on n's console (headers: its
// credentials, say).
func newConsoleClient(t *testing.T, n *testNode, headers ...string) *testhttp.Browser {
	return &testhttp.Browser{TB: t, Base: n.http.URL, Headers: headers}
}

func TestConsole_actionsOpenNodeFromLoopback(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 2)
	// What replication would read: the registry's change stream.
	cur := n.reg.Subscribe()
	defer cur.Close()
	var changes []registry.Event
	readChanges := func() {
		evs, _ := cur.Read(nil)
		changes = append(changes, evs...)
	}
	cc := newConsoleClient(t, n)
	token := cc.ConsoleCSRF("out-of-service", "APP-00", "app-00-i000")
	form := url.Values{"action": {"out-of-service"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {token}}

	// Refusals change nothing.
	noToken := url.Values{"action": {"out-of-service"}, "app": {"APP-00"}, "id": {"app-00-i000"}}
	for name, r := range map[string]response{
		"no token":           cc.PostForm("/console/actions", noToken),
		"wrong token":        cc.PostForm("/console/actions", url.Values{"action": {"out-of-service"}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {strings.Repeat("0", 64)}}),
		"cross-site fetch":   cc.PostForm("/console/actions", form, "Sec-Fetch-Site", "cross-site"),
		"foreign origin":     cc.PostForm("/console/actions", form, "Origin", "https://evil.example"),
		"token, no cookie":   newConsoleClient(t, n).PostForm("/console/actions", form),
		"token, new session": (&testhttp.Browser{TB: t, Base: n.http.URL, Cookie: "muster_console=" + strings.Repeat("ab", 32)}).PostForm("/console/actions", form),
	} {
		if r.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.Code)
		}
	}
	readChanges()
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusUp || len(changes) != 0 {
		t.Fatalf("a refused action changed the registry: %s, %d changes", st, len(changes))
	}
	if r := n.do(t, "GET", "/console/actions", ""); r.Code != http.StatusMethodNotAllowed && r.Code != http.StatusNotFound {
		t.Errorf("GET /console/actions: %d", r.Code)
	}

	r := cc.PostForm("/console/actions", form, "Origin", n.http.URL, "Sec-Fetch-Site", "same-origin")
	if r.Code != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/console/apps/APP-00?done=out-of-service") {
		t.Fatalf("action: %d %s %s", r.Code, r.Header.Get("Location"), r.Body)
	}
	if st := statusOf(t, n, "APP-00", "app-00-i000"); st != registry.StatusOutOfService {
		t.Fatalf("status after out-of-service: %s", st)
	}
	// The change went to the stream replication reads, as a client's
	// PUT .../status would.
	readChanges()
	if len(changes) != 1 || changes[0].Kind != registry.OpStatus || changes[0].Origin != registry.OriginClient {
		t.Fatalf("changes: %+v", changes)
	}
	if page := cc.Get(r.Header.Get("Location")); !strings.Contains(page.Body, `id="flash"`) || !strings.Contains(page.Body, "OUT_OF_SERVICE") {
		t.Error("app page after the action lacks the flash or the new status")
	}
	// A link cannot make the page claim an action: the flash is signed.
	if page := cc.Get("/console/apps/APP-00?done=cancel&id=app-00-i001&sig=00"); strings.Contains(page.Body, `id="flash"`) {
		t.Error("an unsigned flash was shown")
	}

	for _, step := range []struct {
		action string
		want   registry.Status
	}{{"up", registry.StatusUp}, {"remove-override", registry.StatusUnknown}, {"cancel", ""}} {
		tok := cc.ConsoleCSRF(step.action, "APP-00", "app-00-i000")
		if r := cc.PostForm("/console/actions", url.Values{"action": {step.action}, "app": {"APP-00"}, "id": {"app-00-i000"}, "csrf": {tok}}); r.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", step.action, r.Code, r.Body)
		}
		if st := statusOf(t, n, "APP-00", "app-00-i000"); st != step.want {
			t.Fatalf("after %s: %q, want %q", step.action, st, step.want)
		}
	}
	readChanges()
	if last := changes[len(changes)-1]; last.Kind != registry.OpCancel || last.Origin != registry.OriginClient {
		t.Errorf("last change %s from %s, want a client's cancel", last.Kind, last.Origin)
	}
}

func TestConsole_actionsPolicyWithoutAuth(t *testing.T) {
	// From a non-loopback address (served in-process, so RemoteAddr can be
	// anything), the default policy refuses.
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 1)
	req := httptest.NewRequest("GET", "/console/confirm?action=cancel&app=APP-00&id=app-00-i000", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	w := httptest.NewRecorder()
	n.handler.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "loopback") {
		t.Errorf("remote confirm with policy loopback: %d %s", w.Code, w.Body)
	}
	req = httptest.NewRequest("GET", "/console/apps/APP-00", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	w = httptest.NewRecorder()
	n.handler.ServeHTTP(w, req)
	if w.Code != 200 || strings.Contains(w.Body.String(), `class="act"`) || !strings.Contains(w.Body.String(), `id="no-actions"`) {
		t.Errorf("remote app page shows actions: %d", w.Code)
	}

	none := newTestNode(t, func(_ *registry.Config, h *Config) { h.Actions = ActionsNobody })
	fillConsole(t, none.reg, 1, 1)
	if r := none.do(t, "GET", "/console/confirm?action=cancel&app=APP-00&id=app-00-i000", ""); r.Code != http.StatusForbidden {
		t.Errorf("policy none: %d", r.Code)
	}
	if r := none.do(t, "POST", "/console/actions", "action=cancel&app=APP-00&id=app-00-i000", "Content-Type", "application/x-www-form-urlencoded"); r.Code != http.StatusForbidden {
		t.Errorf("policy none, POST: %d", r.Code)
	}
	if none.reg.Len() != 1 {
		t.Error("refused action cancelled the instance")
	}
	if ActionsPolicy("everyone").Valid() {
		t.Error("an unknown actions policy was accepted")
	}
}

func TestConsole_originOfInstances(t *testing.T) {
	n := newTestNode(t)
	// A client's register, as the Eureka API applies it.
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "local-1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "remote-1")).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	body := n.do(t, "GET", "/console/apps/ORDERS", "").Body
	local := regexp.MustCompile(`(?s)data-id="local-1">.*?</tr>`).FindString(body)
	remote := regexp.MustCompile(`(?s)data-id="remote-1">.*?</tr>`).FindString(body)
	if !strings.Contains(local, "<td>this node</td>") || !strings.Contains(remote, "<td>a peer</td>") {
		t.Errorf("origin: local row %q, remote row %q", local, remote)
	}
}

func TestConsole_selfPreservationHistory(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 3, 10) // 30 instances, 60 renewals expected a minute, threshold 51
	renew := func(apps ...string) {
		for _, app := range apps {
			for i := range 10 {
				if _, err := n.reg.Apply(registry.RenewOp(app, fmt.Sprintf("%s-i%03d", strings.ToLower(app), i))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Five healthy minutes, then APP-01 stops renewing and APP-02 renews
	// half as often: 60 → 30 renewals a minute, below 51.
	for step := range 60 {
		n.clock.Advance(10 * time.Second)
		if step%3 == 0 {
			switch {
			case step < 30:
				renew("APP-00", "APP-01", "APP-02")
			case step%6 == 0:
				renew("APP-00", "APP-02")
			default:
				renew("APP-00")
			}
		}
		n.console.Sample()
	}
	body := n.do(t, "GET", "/", "").Body
	if !strings.Contains(body, `id="self-preservation">ACTIVE`) {
		t.Fatal("self-preservation is not active at the end of the scenario")
	}
	ep := regexp.MustCompile(`(?s)<table id="sp-episodes">.*?</table>`).FindString(body)
	if ep == "" || !strings.Contains(ep, "still below") || !strings.Contains(ep, "<td>yes</td>") {
		t.Fatalf("episodes table: %q", ep)
	}
	i1, i2 := strings.Index(ep, ">APP-01<"), strings.Index(ep, ">APP-02<")
	if i1 < 0 || i2 < 0 || i1 > i2 || strings.Contains(ep, ">APP-00<") {
		t.Errorf("drops: want APP-01 (stopped) before APP-02 (halved) and no APP-00: %q", ep)
	}
	if !strings.Contains(ep, "APP-01</a> 20 → 0") || !strings.Contains(ep, "APP-02</a> 20 → 10") {
		t.Errorf("APP-01's drop is not 20 → 0 a minute: %q", ep)
	}
	for id, points := range map[string]int{"chart-threshold": 60, "chart-expected": 60,
		// The first window's renewals are not known: 5 samples of 60 are left out.
		"chart-renews": 55} {
		m := regexp.MustCompile(`<path id="` + id + `" class="\w+" d="(M[0-9. L]+)"/>`).FindStringSubmatch(body)
		if m == nil || strings.Count(m[1], "M") != 1 || strings.Count(m[1], "L") != points-1 {
			t.Errorf("chart path %s missing or not %d points: %.80q", id, points, m)
		}
	}
	if !strings.Contains(body, `class="sp-active"`) {
		t.Error("the chart does not shade the active period")
	}

	// The history is a ring of an hour.
	for range 400 {
		n.clock.Advance(10 * time.Second)
		n.console.Sample()
	}
	body = n.do(t, "GET", "/", "").Body
	m := regexp.MustCompile(`<path id="chart-renews" class="\w+" d="(M[0-9. L]+)"/>`).FindStringSubmatch(body)
	if m == nil || strings.Count(m[1], "L") != 359 {
		t.Errorf("after 460 samples the chart should hold 360")
	}
}

// From 10k instances a view may show the previous version while the new
// one is built; its live index names the version shown, so the next poll
// sees the change, and an app that is not in it yet is looked up fresh.
func TestConsole_largeRegistryViewsCatchUp(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 100, 100)
	if r := n.do(t, "GET", "/?partial=1", ""); r.Code != 200 || !strings.HasPrefix(r.Header.Get("X-Console-Index"), fmt.Sprint(n.reg.Version())+".") {
		t.Fatalf("first view: %d, index %q at version %d", r.Code, r.Header.Get("X-Console-Index"), n.reg.Version())
	}
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("LATECOMER", "l-1"))); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", "/?partial=1", "")
	shown := r.Header.Get("X-Console-Index")
	current := fmt.Sprint(n.reg.Version()) + "."
	if !strings.HasPrefix(shown, current) {
		// The previous version: the live endpoint must not call it current.
		if s := n.do(t, "GET", "/console/api/summary?index="+shown, ""); s.Code != 200 {
			t.Fatalf("page shows %s, registry is at %s: summary answered %d, want 200", shown, current, s.Code)
		}
	}
	if r := n.do(t, "GET", "/console/apps/LATECOMER", ""); r.Code != 200 || !strings.Contains(r.Body, `data-id="l-1"`) {
		t.Fatalf("the new app's page: %d", r.Code)
	}
}

func TestConsole_actionFormIsBounded(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 1)
	body := "action=cancel&app=APP-00&id=app-00-i000&pad=" + strings.Repeat("x", 64<<10)
	if r := n.do(t, "POST", "/console/actions", body, "Content-Type", "application/x-www-form-urlencoded"); r.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("64 KiB action form: %d, want 413", r.Code)
	}
	if n.reg.Len() != 1 {
		t.Error("a refused action changed the registry")
	}
}

// A metadata key holding "=" must not let key=value match across it.
func TestConsole_metaFilterIsExact(t *testing.T) {
	n := newTestNode(t)
	for id, md := range map[string]map[string]string{
		"odd":   {"a=b": "c"},
		"plain": {"a": "b=c"},
		"other": {"a": "b", "x": "y"},
	} {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("META", id, registrytest.WithMetadata(md)))); err != nil {
			t.Fatal(err)
		}
	}
	for query, want := range map[string][]string{
		"meta=a%3Db%3Dc": {"plain"},
		"meta=a%3Db":     {"other"},
		"meta=a":         {"other", "plain"},
		"meta=a%3Db%3D":  {},
		"meta=x%3Dy":     {"other"},
	} {
		body := n.do(t, "GET", "/console/apps/META?"+query, "").Body
		var got []string
		for _, m := range regexp.MustCompile(`data-id="(\w+)"`).FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
}

func TestConsole_linksKeepTheSearch(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 60, 3)
	body := n.do(t, "GET", "/?status=DOWN&zone=b", "").Body
	if !strings.Contains(body, `href="/console/instances?status=DOWN&amp;zone=b"`) {
		t.Errorf("the matching-instances link lost the search: %s", regexp.MustCompile(`<a id="matching"[^>]*>`).FindString(body))
	}
	if !strings.Contains(body, `href="/console/apps/APP-00?status=DOWN&amp;zone=b"`) {
		t.Errorf("app links lost the search")
	}
	if !strings.Contains(body, `href="/?page=2&amp;status=DOWN&amp;zone=b"`) {
		t.Errorf("the next-page link lost the search: %s", regexp.MustCompile(`<a id="next"[^>]*>`).FindString(body))
	}
}

// Whatever clients put in their metadata, a page stays small: long values
// are clipped, and beyond 64 zones the form has a text field, not a menu.
func TestConsole_pagesStaySmallWithHostileMetadata(t *testing.T) {
	n := newTestNode(t)
	for i := range 200 {
		md := map[string]string{"zone": fmt.Sprintf("zone-%03d", i)}
		for k := range 10 {
			md[fmt.Sprintf("k%d", k)] = strings.Repeat("x", 3000)
		}
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("BIG", fmt.Sprintf("b%03d", i), registrytest.WithMetadata(md)))); err != nil {
			t.Fatal(err)
		}
	}
	r := n.do(t, "GET", "/console/apps/BIG", "")
	if r.Code != 200 || len(r.Body) > 100<<10 {
		t.Fatalf("app page: %d, %d bytes", r.Code, len(r.Body))
	}
	if !strings.Contains(r.Body, `<input name="zone"`) || strings.Contains(r.Body, `<select name="zone"`) {
		t.Error("200 zones: want a text field for the zone")
	}
	if !strings.Contains(r.Body, "…") || !strings.Contains(r.Body, "+5 more") {
		t.Error("long metadata not clipped, or entries beyond 6 not summed up")
	}
	if r := n.do(t, "GET", "/console/apps/BIG?zone=zone-007", ""); rows(r.Body) != 1 {
		t.Errorf("zone typed in: %d rows", rows(r.Body))
	}
}

// The console shows when an instance last renewed from its live lease:
// snapshots keep the renewal times of each app's last change, and an app
// whose instances only heartbeat does not change.
func TestConsole_lastRenewalIsLive(t *testing.T) {
	n := newTestNode(t)
	fillConsole(t, n.reg, 1, 1)
	_ = n.do(t, "GET", "/console/apps/APP-00", "") // the snapshot is taken now
	n.clock.Advance(10 * time.Minute)
	if _, err := n.reg.Apply(registry.RenewOp("APP-00", "app-00-i000")); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", "/console/apps/APP-00", "")
	if r.Code != 200 || !strings.Contains(r.Body, "0s ago") || strings.Contains(r.Body, "10m ago") {
		t.Fatalf("app page after a heartbeat: %d, want the renewal 0s ago:\n%s", r.Code, r.Body)
	}
}

package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// persistentBody is Spring's registration body of app/id with
// eureka.instance.metadata-map.muster.lease set to lease.
func persistentBody(app, id, lease string) string {
	return strings.Replace(registerBody(app, id), `"metadata":{"management.port":"8080"}`,
		`"metadata":{"management.port":"8080","muster.lease":"`+lease+`"}`, 1)
}

// A registration with the marker is stored as any other and its lease
// never expires; a bad marker value and a metadata write of the key are
// 400s that change nothing; cancel removes it.
func TestPersistent_registerOverHTTP(t *testing.T) {
	n := newTestNode(t)
	if r := n.do(t, "POST", "/eureka/apps/DB", persistentBody("DB", "db-1", "PERSISTENT"), jsonHeaders()...); r.Code != 204 {
		t.Fatalf("register = %d %q", r.Code, r.Reason())
	}
	if r := n.do(t, "POST", "/eureka/apps/DB", registerBody("DB", "db-0"), jsonHeaders()...); r.Code != 204 {
		t.Fatalf("ordinary register = %d %q", r.Code, r.Reason())
	}
	before := n.reg.Snapshot().Version
	if r := n.do(t, "POST", "/eureka/apps/DB", persistentBody("DB", "db-2", "persistant"), jsonHeaders()...); r.Code != 400 ||
		!strings.Contains(r.Reason(), "muster.lease") {
		t.Fatalf("misspelt marker = %d %q, want 400 naming muster.lease", r.Code, r.Reason())
	}
	if r := n.do(t, "PUT", "/eureka/apps/DB/db-1/metadata?muster.lease=persistent", "", jsonHeaders()...); r.Code != 400 {
		t.Fatalf("metadata write of the marker = %d %q, want 400", r.Code, r.Reason())
	}
	if after := n.reg.Snapshot().Version; after != before {
		t.Fatal("a refused write changed the registry")
	}
	if r := n.do(t, "GET", "/admin/status", ""); !strings.Contains(r.Body, `"persistentInstances": 1`) {
		t.Errorf("/admin/status does not count the persistent instance: %s", r.Body)
	}
	if r := n.do(t, "GET", "/console/apps/DB", ""); r.Code != 200 || !strings.Contains(r.Body, "none needed (persistent)") {
		t.Errorf("console app page: %d, no persistent label", r.Code)
	}
	n.clock.Advance(3*90*time.Second + time.Minute)
	n.reg.EvictExpired()
	n.clock.Advance(time.Minute)
	n.reg.EvictExpired()
	if r := n.do(t, "GET", "/eureka/apps/DB/db-0", "", jsonHeaders()...); r.Code != 404 {
		t.Fatalf("the ordinary instance that never renewed: %d, want 404 (evicted)", r.Code)
	}
	r := n.do(t, "GET", "/eureka/apps/DB/db-1", "", jsonHeaders()...)
	if r.Code != 200 || !strings.Contains(r.Body, `"muster.lease":"PERSISTENT"`) || !strings.Contains(r.Body, `"durationInSecs":90`) {
		t.Fatalf("after 3 leases without heartbeats: %d %s", r.Code, r.Body)
	}
	if r := n.do(t, "DELETE", "/eureka/apps/DB/db-1", "", jsonHeaders()...); r.Code != 200 {
		t.Fatalf("cancel = %d", r.Code)
	}
	if r := n.do(t, "GET", "/eureka/apps/DB/db-1", "", jsonHeaders()...); r.Code != 404 {
		t.Fatalf("after cancel: %d", r.Code)
	}
}

// With auth on, a reader cannot register one (as no registration), the
// caps answer 403 naming the key, per app and per user, and the owner is
// the user: another writer still has room.
func TestPersistent_capsAndRoles(t *testing.T) {
	n := newSecuredNode(t, "", true, func(r *registry.Config, _ *httpapi.Config) {
		r.Limits.MaxPersistentPerApp = 2
		r.Limits.MaxPersistentPerUser = 2
	})
	writer, hashed, reader := basic("writer", writerPW), basic("hashed", hashedPW), basic("reader", readerPW)
	reg := func(app, id string, user []string) response {
		return n.do(t, "POST", "/eureka/apps/"+app, persistentBody(app, id, "persistent"), with(jsonHeaders(), user)...)
	}
	if r := reg("DB", "db-1", reader); r.Code != 403 {
		t.Fatalf("reader = %d, want 403", r.Code)
	}
	for _, id := range []string{"db-1", "db-2", "db-1"} { // the repeat counts once
		if r := reg("DB", id, writer); r.Code != 204 {
			t.Fatalf("writer %s = %d %q", id, r.Code, r.Reason())
		}
	}
	if r := reg("DB", "db-3", hashed); r.Code != 403 || !strings.Contains(r.Reason(), "muster.max-persistent-per-app") {
		t.Fatalf("third of the app = %d %q, want 403 naming the key", r.Code, r.Reason())
	}
	if r := reg("CACHE", "c-1", writer); r.Code != 403 || !strings.Contains(r.Reason(), "muster.max-persistent-per-user") ||
		!strings.Contains(r.Reason(), `user "writer"`) {
		t.Fatalf("writer's third = %d %q, want 403 naming the key and the user", r.Code, r.Reason())
	}
	if r := reg("CACHE", "c-1", hashed); r.Code != 204 {
		t.Fatalf("another user = %d %q", r.Code, r.Reason())
	}
	// An ordinary registration is held to neither cap.
	if r := n.do(t, "POST", "/eureka/apps/DB", registerBody("DB", "db-9"), with(jsonHeaders(), writer)...); r.Code != 204 {
		t.Fatalf("ordinary registration = %d %q", r.Code, r.Reason())
	}
	if got := n.reg.PersistentCount(); got != 3 {
		t.Fatalf("PersistentCount = %d, want 3", got)
	}
}

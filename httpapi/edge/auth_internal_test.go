package edge

import (
	"fmt"
	"testing"
	"time"
)

func TestAccessFor(t *testing.T) {
	for _, tc := range []struct {
		method, route string
		want          access
	}{
		{"GET", "/livez", accessOpen},
		{"GET", "/readyz", accessOpen},
		{"GET", "/", accessRead},
		{"GET", "/dashboard", accessRead},
		{"GET", "/static/*", accessRead},
		{"GET", "/metrics", accessRead},
		{"GET", "/eureka/watch", accessRead},
		{"GET", "/admin/status", accessAdmin},
		{"GET", "/admin/anything-added-later", accessAdmin},
		{"GET", "/something-new", accessAdmin},
		{"POST", "/eureka/peerreplication/batch", accessPeer},
		{"POST", "/eureka/v2/peerreplication/batch", accessPeer},
		{"POST", "/v2/peerreplication/batch", accessPeer},
		{"GET", "/eureka/apps", accessRead},
		{"GET", "/eureka/v2/apps/:app/:id", accessRead},
		{"GET", "/v2/vips/:vip", accessRead},
		{"POST", "/eureka/apps/:app", accessWrite},
		{"PUT", "/eureka/apps/:app/:id", accessWrite},
		{"DELETE", "/eureka/v2/apps/:app/:id/status", accessWrite},
		{"PUT", "/eureka/apps/:app/:id/metadata", accessWrite},
		{"POST", "/eureka/something-new", accessAdmin},
	} {
		if got := accessFor(tc.method, tc.route); got != tc.want {
			t.Errorf("accessFor(%s %s) = %d, want %d", tc.method, tc.route, got, tc.want)
		}
	}
}

func TestSourceLimiter_allow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := newSourceLimiter(time.Minute, 3)
	if _, ok := l.allow("a", t0); !ok {
		t.Fatal("first event held back")
	}
	for i := 1; i <= 4; i++ {
		if _, ok := l.allow("a", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("event %d within the minute let through", i)
		}
	}
	if _, ok := l.allow("b", t0); !ok {
		t.Fatal("another source held back")
	}
	if n, ok := l.allow("a", t0.Add(time.Minute)); !ok || n != 4 {
		t.Fatalf("after a minute: allowed %v, held back %d, want true and 4", ok, n)
	}
	for i := 0; i < 100; i++ {
		l.allow(fmt.Sprintf("src-%d", i), t0)
	}
	if len(l.last) > 3 {
		t.Errorf("tracks %d sources, limit 3", len(l.last))
	}
}

package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// A read right after a change carries the version of what it shows, so a
// client that waits on that index is held. The reads come at once after
// each register, without waiting for the watch hub to catch up: the index
// comes from the snapshot the body comes from, not from the hub.
func TestWatch_readAfterChangeCarriesItsVersion(t *testing.T) {
	n, timers := newWatchNode(t)
	for round, app := range []string{"ORDERS", "BILLING", "ORDERS"} {
		n.register(t, app, fmt.Sprintf("%s-%d", strings.ToLower(app), round))
		version := n.reg.Version()
		for _, path := range []string{"/eureka/apps/" + app, "/eureka/apps", "/eureka/apps/delta", "/eureka/vips/" + strings.ToLower(app)} {
			r := n.do(t, "GET", path, "", "Accept", "application/json")
			idx := indexOf(t, r)
			// The change just made is app's newest and the registry's: every
			// view that shows it is at the registry's version.
			if r.code != 200 || idx != version || !strings.Contains(r.body, fmt.Sprintf(`"%s-%d"`, strings.ToLower(app), round)) {
				t.Fatalf("round %d GET %s right after the change: %d index %d, want 200 with the instance at index %d\n%s", round, path, r.code, idx, version, r.body)
			}
			before := len(timers.started())
			held := n.async(fmt.Sprintf("%s?index=%d&wait=30s", path, idx), "Accept", "application/json")
			eventually(t, "the request is held", func() bool { return len(timers.started()) == before+1 && n.srv.WatchersHeld() == 1 })
			select {
			case got := <-held:
				t.Fatalf("round %d GET %s?index=%d answered before its wait: %d index %s", round, path, idx, got.code, got.header.Get(httpapi.HeaderIndex))
			default:
			}
			timers.fire()
			if got := receive(t, held); got.code != 200 || indexOf(t, got) != idx || got.body != r.body {
				t.Fatalf("round %d GET %s after the wait: %d index %d, want the same answer at %d", round, path, got.code, indexOf(t, got), idx)
			}
		}
	}
}

// muster.watch.max-watchers watchers, each on the index its own read
// returned right after a change, are all held; one more is answered at
// once.
func TestWatch_maxWatchersAreHeldAfterAChange(t *testing.T) {
	const limit = 5
	n, timers := newWatchNode(t, func(_ *registry.Config, h *httpapi.Config) { h.WatchMaxWatchers = limit })
	n.register(t, "ORDERS", "o1")
	idx := indexOf(t, n.do(t, "GET", "/eureka/apps/ORDERS", ""))
	if idx != n.reg.Version() {
		t.Fatalf("read after the register: index %d, want %d", idx, n.reg.Version())
	}
	var helds []<-chan response
	for range limit {
		helds = append(helds, n.async(fmt.Sprintf("/eureka/apps/ORDERS?index=%d&wait=30s", idx)))
	}
	eventually(t, "every watcher is held", func() bool { return n.srv.WatchersHeld() == limit && len(timers.started()) == limit })
	if r := n.do(t, "GET", fmt.Sprintf("/eureka/apps/ORDERS?index=%d&wait=30s", idx), ""); r.code != 200 || indexOf(t, r) != idx {
		t.Fatalf("watcher over the limit: %d index %d", r.code, indexOf(t, r))
	}
	// A change answers them all, with the new version.
	n.register(t, "ORDERS", "o2")
	for _, h := range helds {
		if r := receive(t, h); r.code != 200 || indexOf(t, r) != n.reg.Version() || !strings.Contains(r.body, "o2") {
			t.Fatalf("woken watcher: %d index %d, want the change at %d", r.code, indexOf(t, r), n.reg.Version())
		}
	}
}

// An app that does not exist reads at index 0 and a wait on 0 is held
// until it appears; one that went reads at 0 again.
func TestWatch_missingAppIsHeldUntilItAppears(t *testing.T) {
	n, timers := newWatchNode(t)
	r := n.do(t, "GET", "/eureka/apps/NEW", "")
	if r.code != 404 || indexOf(t, r) != 0 {
		t.Fatalf("missing app: %d index %d", r.code, indexOf(t, r))
	}
	held := n.async("/eureka/apps/NEW?index=0&wait=30s")
	eventually(t, "the request is held", func() bool { return len(timers.started()) == 1 })
	n.register(t, "NEW", "n1")
	if got := receive(t, held); got.code != 200 || indexOf(t, got) != n.reg.Version() {
		t.Fatalf("app appeared: %d index %d", got.code, indexOf(t, got))
	}
	if c := n.do(t, "DELETE", "/eureka/apps/NEW/n1", ""); c.code != 200 {
		t.Fatalf("cancel: %d", c.code)
	}
	if got := n.do(t, "GET", "/eureka/apps/NEW?index=1&wait=30s", ""); got.code != 404 || indexOf(t, got) != 0 {
		t.Fatalf("app gone: %d index %d", got.code, indexOf(t, got))
	}
}

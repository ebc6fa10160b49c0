package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/replication"
)

// A client's change on node A reaches node B through replication over HTTP
// and wakes the request a watcher holds on B; a change of another app does
// not.
func TestWatch_changeOnOneNodeWakesWatcherOnAnother(t *testing.T) {
	a, _ := newWatchNode(t)
	b, _ := newWatchNode(t)
	cfg := replication.DefaultConfig()
	cfg.Now = a.clock.Now
	cfg.Store = a.reg
	cfg.Transport = newPeerTransport(t, 5*time.Second)
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t))
	rep, err := replication.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep.SetPeers([]replication.Peer{{Name: "b", URL: b.http.URL + "/eureka/"}})
	flush := func() {
		t.Helper()
		if _, err := rep.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	a.register(t, "ORDERS", "o1")
	flush()
	eventually(t, "B's hub has the replicated change", func() bool { return b.srv.WatchAppVersion("ORDERS") == b.reg.Version() && b.reg.Version() > 0 })
	first := b.do(t, "GET", "/eureka/v2/apps/ORDERS", "", "Accept", "application/xml")
	idx := indexOf(t, first)
	held := b.async(fmt.Sprintf("/eureka/v2/apps/ORDERS?index=%d&wait=30s", idx), "Accept", "application/xml")
	eventually(t, "B holds the request", func() bool { w, _ := b.srv.WatchState("ORDERS"); return w == 1 })

	a.register(t, "BILLING", "b1")
	flush()
	eventually(t, "B applied the BILLING change", func() bool { return b.srv.WatchAppVersion("BILLING") > 0 })
	if w, armed := b.srv.WatchState("ORDERS"); w != 1 || !armed {
		t.Fatalf("B's ORDERS watcher woken by BILLING: waiters=%d armed=%v", w, armed)
	}

	a.register(t, "ORDERS", "o2")
	flush()
	r := receive(t, held)
	if r.code != 200 || !strings.Contains(r.body, "<instanceId>o2</instanceId>") || indexOf(t, r) <= idx {
		t.Fatalf("B's answer: %d index %d\n%s", r.code, indexOf(t, r), r.body)
	}
}

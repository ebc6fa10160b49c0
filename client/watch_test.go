package client_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
)

func ids(list []client.Instance) string {
	var out []string
	for _, in := range list {
		out = append(out, in.ID)
	}
	return strings.Join(out, ",")
}

// next waits for the watch's next list.
func next(t *testing.T, ch <-chan []client.Instance) []client.Instance {
	t.Helper()
	select {
	case list, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return list
	case <-time.After(10 * time.Second):
		t.Fatal("no list from the watch within 10 s")
	}
	return nil
}

func nothingPending(t *testing.T, ch <-chan []client.Instance) {
	t.Helper()
	select {
	case list := <-ch:
		t.Fatalf("unexpected list %q", ids(list))
	default:
	}
}

// TestWatch_polling: against a server that answers like Eureka (no
// X-Muster-Index, index and wait ignored), Watch polls every PollInterval
// and delivers only when the list changed.
func TestWatch_polling(t *testing.T) {
	checkGoroutines(t)
	stub, url := newAppStub(t, false)
	stub.set("ORDERS", "o-1")
	c, clk := newClient(t, servers(url), func(cfg *client.Config) { cfg.PollInterval = 15 * time.Second })
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := c.Watch(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(next(t, ch)); got != "o-1" {
		t.Fatalf("first list %q, want o-1", got)
	}

	// A change shows up at the next poll, not before.
	stub.set("ORDERS", "o-1", "o-2")
	clk.BlockUntil(t, 1)
	nothingPending(t, ch)
	clk.Advance(15 * time.Second)
	if got := ids(next(t, ch)); got != "o-1,o-2" {
		t.Fatalf("second list %q, want o-1,o-2", got)
	}

	// A poll that finds no change delivers nothing.
	clk.BlockUntil(t, 1)
	polls := stub.requestCount()
	clk.Advance(15 * time.Second)
	testwait.True(t, waitTimeout, "the next poll", func() bool { return stub.requestCount() == polls+1 })
	clk.BlockUntil(t, 1)
	nothingPending(t, ch)

	// The app loses every instance: 404, an empty list.
	stub.set("ORDERS")
	clk.Advance(15 * time.Second)
	if got := next(t, ch); got == nil || len(got) != 0 {
		t.Fatalf("list after the app emptied: %v, want empty", got)
	}
	for _, q := range stub.queryLog() {
		if q != "" {
			t.Fatalf("polling request carried %q; a server without X-Muster-Index gets plain requests", q)
		}
	}
	if s := c.Stats(); s.WatchHeld != 0 || s.WatchPolls < 4 {
		t.Fatalf("stats %+v", s)
	}
	cancel()
	for range ch { // closed when ctx ends
	}
}

// TestWatch_blocking: against a server that implements blocking fetches,
// Watch sends index and wait, and a change reaches it while its request is
// held, with no poll interval passing.
func TestWatch_blocking(t *testing.T) {
	checkGoroutines(t)
	stub, url := newAppStub(t, true)
	stub.set("ORDERS", "o-1")
	c, _ := newClient(t, servers(url), func(cfg *client.Config) { cfg.WatchWait = time.Minute })
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := c.Watch(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	first := next(t, ch)
	if ids(first) != "o-1" || first[0].Zone != "zone-a" || first[0].Port != 8080 || first[0].Status != client.StatusUp {
		t.Fatalf("first list %+v", first)
	}
	testwait.True(t, waitTimeout, "a held request", func() bool { return stub.heldNow() == 1 })

	for i, want := range []string{"o-1,o-2", "o-2", ""} {
		var set []string
		if want != "" {
			set = strings.Split(want, ",")
		}
		stub.set("ORDERS", set...)
		if got := ids(next(t, ch)); got != want {
			t.Fatalf("change %d: list %q, want %q", i, got, want)
		}
		testwait.True(t, waitTimeout, "the next held request", func() bool { return stub.heldNow() == 1 })
	}
	q := stub.queryLog()
	if q[0] != "" || q[1] != "index=2&wait=1m0s" || q[2] != "index=3&wait=1m0s" {
		t.Fatalf("queries %q, want a plain first request, then index=<last seen>&wait=1m0s", q)
	}
	if s := c.Stats(); s.WatchHeld < 3 || s.WatchPolls != 1 {
		t.Fatalf("stats %+v, want 1 plain request and the rest held", s)
	}
	cancel()
	for range ch {
	}
}

// TestWatch_blockingRefused: a server that sends X-Muster-Index but
// answers a held request 400 is polled from then on.
func TestWatch_blockingRefused(t *testing.T) {
	checkGoroutines(t)
	stub, url := newAppStub(t, true)
	stub.set("ORDERS", "o-1")
	stub.refuseIndex = true
	c, clk := newClient(t, servers(url))
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := c.Watch(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(next(t, ch)); got != "o-1" {
		t.Fatalf("first list %q", got)
	}
	clk.BlockUntil(t, 1) // polling now
	stub.set("ORDERS", "o-2")
	nothingPending(t, ch)
	clk.Advance(30 * time.Second)
	if got := ids(next(t, ch)); got != "o-2" {
		t.Fatalf("list after a poll %q, want o-2", got)
	}
	q := stub.queryLog()
	if len(q) != 4 || q[0] != "" || q[1] != "index=2&wait=30s" || q[2] != "" || q[3] != "" {
		t.Fatalf("queries %q, want one refused held request, then plain polls", q)
	}
	cancel()
	for range ch {
	}
}

// TestWatch_serverAnswersAtOnce: a server that sends X-Muster-Index but
// answers held requests at once, unchanged (over its watcher limit), is
// not asked in a tight loop: the watch backs off from RetryBackoff up to
// PollInterval.
func TestWatch_serverAnswersAtOnce(t *testing.T) {
	checkGoroutines(t)
	stub, url := newAppStub(t, true)
	stub.neverHold = true
	stub.set("ORDERS", "o-1")
	c, clk := newClient(t, servers(url))
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := c.Watch(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	for i, pause := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		clk.BlockUntil(t, 1)
		if got := stub.requestCount(); got != i+2 {
			t.Fatalf("%d requests, want %d: the watch did not wait", got, i+2)
		}
		clk.Advance(pause)
	}
	testwait.True(t, waitTimeout, "the request after the last pause", func() bool { return stub.requestCount() == 5 })
	cancel()
	for range ch {
	}
}

// TestWatch_muster watches an app on a real Muster node, which holds the
// watch's requests (blocking fetches): a registration is delivered while
// the client's clock stands still, so no poll can have fetched it. An
// unknown app is an empty list.
func TestWatch_muster(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	c, _ := newClient(t, servers(n.url))
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := c.Watch(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, ch); len(got) != 0 {
		t.Fatalf("first list %v, want empty", got)
	}
	testwait.True(t, waitTimeout, "the node to hold the watch's request", func() bool { return heldRequests(t, n) == 1 })
	r, err := c.Register(ctx, testInstance("orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	got := next(t, ch)
	if len(got) != 1 || got[0].ID != r.Instance().ID || got[0].Metadata["zone"] != "zone-a" || got[0].Zone != "zone-a" {
		t.Fatalf("list %+v", got)
	}
	if st := c.Stats(); st.WatchPolls != 1 || st.WatchHeld < 1 {
		t.Fatalf("stats %+v, want one plain request and then held ones", st)
	}
	// A status change of that instance is delivered the same way.
	if err := c.SetStatusOverride(ctx, "orders", r.Instance().ID, client.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ch); len(got) != 1 || got[0].Status != client.StatusOutOfService {
		t.Fatalf("after the override: %+v", got)
	}
	cancel()
	for range ch {
	}
	if _, err := c.Watch(context.Background(), " "); err == nil {
		t.Fatal("Watch of an empty app name accepted")
	}
}

// heldRequests reads the node's muster_watch_held_requests.
func heldRequests(t *testing.T, n *node) int {
	t.Helper()
	resp, err := http.Get(n.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "muster_watch_held_requests "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no muster_watch_held_requests in /metrics")
	return 0
}

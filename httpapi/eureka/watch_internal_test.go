package eureka

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
	"github.com/rs/zerolog"
)

// manualTimers stands in for the wait timers of held requests: they fire
// when the test says so.
type manualTimers struct {
	mu    sync.Mutex // guards waits and chans
	waits []time.Duration
	chans []chan time.Time
}

func (m *manualTimers) start(d time.Duration) (<-chan time.Time, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan time.Time, 1)
	m.waits = append(m.waits, d)
	m.chans = append(m.chans, ch)
	return ch, func() {}
}

// fire makes every timer started so far expire.
func (m *manualTimers) fire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ch := range m.chans {
		select {
		case ch <- time.Time{}:
		default:
		}
	}
}

func (m *manualTimers) started() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Duration(nil), m.waits...)
}

func newWatchNode(t *testing.T, opts ...func(*registry.Config, *Config)) (*testNode, *manualTimers) {
	t.Helper()
	timers := &manualTimers{}
	opts = append([]func(*registry.Config, *Config){func(_ *registry.Config, h *Config) {
		h.WatchTimer = timers.start
	}}, opts...)
	return newTestNode(t, opts...), timers
}

func instanceBody(app, id, vip string) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h-%s","app":%q,"ipAddr":"10.0.0.1","status":"UP",
 "port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
 "vipAddress":%q,"secureVipAddress":%q}}`, id, id, app, vip, vip)
}

func (n *testNode) register(t *testing.T, app, id string) {
	t.Helper()
	if r := n.do(t, "POST", "/eureka/apps/"+app, instanceBody(app, id, strings.ToLower(app)), jsonHeaders()...); r.code != 204 {
		t.Fatalf("register %s/%s: %d %s", app, id, r.code, r.body)
	}
}

func indexOf(t *testing.T, r response) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(r.header.Get(HeaderIndex), 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v (code %d)", HeaderIndex, r.header.Get(HeaderIndex), err, r.code)
	}
	return v
}

// async sends a request in the background; its response arrives on the
// channel (code 0 and the error in body when it failed).
func (n *testNode) async(path string, headers ...string) <-chan response {
	out := make(chan response, 1)
	go func() {
		req, _ := http.NewRequest("GET", n.http.URL+path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- response{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- response{resp.StatusCode, resp.Header, string(b)}
	}()
	return out
}

// eventually polls cond: it synchronises with the server's goroutines, it
// measures nothing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, 10*time.Second, what, cond)
}

func receive(t *testing.T, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		if r.code == 0 {
			t.Fatalf("request failed: %s", r.body)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	return response{}
}

func TestWatch_everyReadCarriesItsIndex(t *testing.T) {
	n, _ := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	n.register(t, "BILLING", "b1")
	version := n.reg.Version()
	eventually(t, "the hub has applied the changes", func() bool { return n.api.watch.appVersion("BILLING") == version })
	for _, base := range []string{"/eureka", "/eureka/v2"} {
		for _, accept := range [][]string{{"Accept", "application/json"}, {"Accept", "application/xml"}, {"Accept", "application/json", "Accept-Encoding", "gzip"}} {
			for path, want := range map[string]uint64{
				"/apps": version, "/apps/delta": version, "/vips/orders": version, "/svips/orders": version,
				"/apps/ORDERS": version - 1, "/apps/orders": version - 1, "/apps/BILLING": version, "/apps/NOPE": 0,
			} {
				r := n.do(t, "GET", base+path, "", accept...)
				if got := indexOf(t, r); got != want {
					t.Errorf("GET %s%s (%v): index %d, want %d", base, path, accept, got, want)
				}
			}
		}
	}
	// A plain request is answered as before: no timer, same body.
	plain := n.do(t, "GET", "/eureka/apps/ORDERS", "", "Accept", "application/json")
	if plain.code != 200 || !strings.Contains(plain.body, `"o1"`) {
		t.Fatalf("plain app read: %d %s", plain.code, plain.body)
	}
}

func TestWatch_appWatcherIsWokenByItsAppOnly(t *testing.T) {
	n, timers := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	n.register(t, "BILLING", "b1")
	eventually(t, "the hub has applied the changes", func() bool { return n.api.watch.appVersion("BILLING") == n.reg.Version() })
	first := n.do(t, "GET", "/eureka/apps/ORDERS", "", "Accept", "application/json")
	idx := indexOf(t, first)

	held := n.async(fmt.Sprintf("/eureka/apps/ORDERS?index=%d&wait=30s", idx), "Accept", "application/json")
	eventually(t, "the request is held", func() bool { w, _ := n.watchState("ORDERS"); return w == 1 })

	// Another app's change: applied by the hub, the watcher stays asleep.
	n.register(t, "BILLING", "b2")
	eventually(t, "the hub has applied the BILLING change", func() bool { return n.api.watch.appVersion("BILLING") == n.reg.Version() })
	if w, armed := n.watchState("ORDERS"); w != 1 || !armed {
		t.Fatalf("after a BILLING change the ORDERS watcher is waiters=%d armed=%v, want still waiting", w, armed)
	}
	select {
	case r := <-held:
		t.Fatalf("woken by another app's change: %d %s", r.code, r.body)
	default:
	}

	// Its own app's change answers it, with the new state and index.
	n.register(t, "ORDERS", "o2")
	r := receive(t, held)
	if r.code != 200 || !strings.Contains(r.body, `"o2"`) {
		t.Fatalf("woken answer: %d %s", r.code, r.body)
	}
	if got := indexOf(t, r); got != n.reg.Version() || got <= idx {
		t.Fatalf("woken answer index %d, want the new version %d", got, n.reg.Version())
	}
	if len(timers.started()) != 1 {
		t.Fatalf("timers started: %v", timers.started())
	}
}

func TestWatch_heldRequestEndsAtWait(t *testing.T) {
	n, timers := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.api.watch.appVersion("ORDERS") == n.reg.Version() })
	for _, path := range []string{"/eureka/apps/ORDERS", "/eureka/apps", "/eureka/apps/delta", "/eureka/vips/orders", "/eureka/v2/svips/orders"} {
		for _, accept := range []string{"application/json", "application/xml"} {
			plain := n.do(t, "GET", path, "", "Accept", accept)
			idx := indexOf(t, plain)
			before := len(timers.started())
			held := n.async(fmt.Sprintf("%s?index=%d&wait=20s", path, idx), "Accept", accept)
			eventually(t, "the request is held", func() bool { return len(timers.started()) == before+1 && n.watchersHeld() == 1 })
			if d := timers.started()[before]; d < 20*time.Second || d > 20*time.Second+20*time.Second/32 {
				t.Fatalf("%s: wait timer %v, want 20 s plus less than 1/32 jitter", path, d)
			}
			timers.fire()
			r := receive(t, held)
			if r.code != 200 || r.body != plain.body || indexOf(t, r) != idx {
				t.Fatalf("%s after wait: %d index %s, want the plain answer with index %d\n%s\nvs\n%s", path, r.code, r.header.Get(HeaderIndex), idx, r.body, plain.body)
			}
		}
	}
}

func TestWatch_registryWatcherWokenByAnyChange(t *testing.T) {
	n, _ := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	idx := indexOf(t, n.do(t, "GET", "/eureka/apps/delta", "", "Accept", "application/json"))
	held := n.async(fmt.Sprintf("/eureka/apps/delta?index=%d&wait=30s", idx), "Accept", "application/json", "Accept-Encoding", "gzip")
	eventually(t, "the request is held", func() bool { return n.watchersHeld() == 1 })
	n.register(t, "BILLING", "b1")
	r := receive(t, held)
	if r.code != 200 || r.header.Get("Content-Encoding") != "gzip" || indexOf(t, r) != idx+1 {
		t.Fatalf("delta watcher: %d %v", r.code, r.header)
	}
}

func TestWatch_badInputAndLimits(t *testing.T) {
	n, timers := newWatchNode(t, func(_ *registry.Config, h *Config) { h.WatchMaxWait = 10 * time.Second })
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.api.watch.appVersion("ORDERS") == n.reg.Version() })
	for _, q := range []string{"wait=abc&index=1", "wait=-1s&index=1", "wait=&index=1", "wait=30&index=1", "index=x&wait=1s", "index=-1&wait=1s", "index=1.5", "index=99999999999999999999999&wait=1s"} {
		for _, path := range []string{"/eureka/apps/ORDERS", "/eureka/apps", "/eureka/apps/delta", "/eureka/vips/orders"} {
			if r := n.do(t, "GET", path+"?"+q, ""); r.code != 400 || !strings.Contains(r.reason(), "must be") {
				t.Errorf("GET %s?%s: %d %q, want 400 with a reason", path, q, r.code, r.reason())
			}
		}
	}
	if n.reg.Version() != 1 {
		t.Fatal("bad input changed the registry")
	}
	// An index from the future (a restarted node): answered at once, with
	// the current version.
	for _, path := range []string{"/eureka/apps/ORDERS", "/eureka/apps"} {
		r := n.do(t, "GET", path+"?index=999&wait=30s", "")
		if r.code != 200 || indexOf(t, r) != 1 {
			t.Fatalf("future index on %s: %d index %d", path, r.code, indexOf(t, r))
		}
	}
	// An index from the past: at once too.
	if r := n.do(t, "GET", "/eureka/apps/ORDERS?index=0&wait=30s", ""); r.code != 200 || indexOf(t, r) != 1 {
		t.Fatalf("old index: %d", r.code)
	}
	if len(timers.started()) != 0 {
		t.Fatalf("requests that must be answered at once started timers: %v", timers.started())
	}
	// Above the maximum: clamped.
	held := n.async("/eureka/apps/ORDERS?index=1&wait=1h")
	eventually(t, "the request is held", func() bool { return len(timers.started()) == 1 })
	if d := timers.started()[0]; d < 10*time.Second || d > 10*time.Second+10*time.Second/32 {
		t.Fatalf("wait=1h held for %v, want the 10 s maximum", d)
	}
	timers.fire()
	receive(t, held)
}

func TestWatch_maxWatchers(t *testing.T) {
	n, timers := newWatchNode(t, func(_ *registry.Config, h *Config) { h.WatchMaxWatchers = 1 })
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.api.watch.appVersion("ORDERS") == n.reg.Version() })
	held := n.async("/eureka/apps/ORDERS?index=1&wait=30s")
	eventually(t, "the request is held", func() bool { return n.watchersHeld() == 1 })
	// Over the limit: as without wait.
	r := n.do(t, "GET", "/eureka/apps/ORDERS?index=1&wait=30s", "")
	if r.code != 200 || indexOf(t, r) != 1 {
		t.Fatalf("over the limit: %d", r.code)
	}
	if got := n.do(t, "GET", "/eureka/watch", ""); got.code != 503 {
		t.Fatalf("stream over the limit: %d", got.code)
	}
	m := n.do(t, "GET", "/metrics", "").body
	for _, want := range []string{"muster_watch_held_requests 1", "muster_watch_over_limit_total 2"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	timers.fire()
	receive(t, held)
}

func TestWatch_stopWatchesReleasesHeldRequests(t *testing.T) {
	n, _ := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.api.watch.appVersion("ORDERS") == n.reg.Version() })
	var helds []<-chan response
	for _, path := range []string{"/eureka/apps/ORDERS?index=1&wait=30s", "/eureka/apps?index=1&wait=30s", "/eureka/apps/NEW?index=0&wait=30s"} {
		helds = append(helds, n.async(path))
	}
	stream := n.openStream(t, "/eureka/watch")
	eventually(t, "the requests are held", func() bool { return n.watchersHeld() == 3 })
	n.api.StopWatches()
	for _, h := range helds {
		if r := receive(t, h); r.code != 200 && r.code != 404 {
			t.Fatalf("released request: %d", r.code)
		}
	}
	stream.waitEnd(t)
	// Later blocking fetches are answered at once; streams are refused.
	if r := n.do(t, "GET", "/eureka/apps/ORDERS?index=1&wait=30s", ""); r.code != 200 {
		t.Fatalf("after stop: %d", r.code)
	}
	if r := n.do(t, "GET", "/eureka/watch", ""); r.code != 503 {
		t.Fatalf("stream after stop: %d", r.code)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, name, data string
}

type streamReader struct {
	resp   *http.Response
	events chan sseEvent
	ended  chan struct{}
}

func (n *testNode) openStream(t *testing.T, path string, headers ...string) *streamReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", n.http.URL+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &streamReader{resp: resp, events: make(chan sseEvent, 1024), ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return s
}

func (s *streamReader) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return sseEvent{}
}

func (s *streamReader) waitEnd(t *testing.T) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
}

func TestWatchStream_eventsResumeAndResync(t *testing.T) {
	n, _ := newWatchNode(t, func(r *registry.Config, _ *Config) { r.OutboxSize = 8 })
	live := n.openStream(t, "/eureka/watch")
	if ev := live.next(t); ev.name != "open" || ev.id != "0" {
		t.Fatalf("first event %+v, want open at 0", ev)
	}
	filtered := n.openStream(t, "/eureka/watch?app=billing")
	filtered.next(t) // open
	n.register(t, "ORDERS", "o1")
	n.register(t, "BILLING", "b1")
	if r := n.do(t, "DELETE", "/eureka/apps/ORDERS/o1", ""); r.code != 200 {
		t.Fatalf("cancel: %d", r.code)
	}
	want := []sseEvent{{"1", "ADDED", `"instanceId":"o1"`}, {"2", "ADDED", `"instanceId":"b1"`}, {"3", "DELETED", `{"app":"ORDERS","instanceId":"o1"}`}}
	for _, w := range want {
		ev := live.next(t)
		if ev.id != w.id || ev.name != w.name || !strings.Contains(ev.data, w.data) {
			t.Fatalf("event %+v, want %+v", ev, w)
		}
	}
	if ev := filtered.next(t); ev.id != "2" || ev.name != "ADDED" || !strings.Contains(ev.data, `"app":"BILLING"`) {
		t.Fatalf("filtered stream: %+v", ev)
	}

	// Resume after 1: events 2 and 3 again, by index= or Last-Event-ID.
	for _, s := range []*streamReader{n.openStream(t, "/eureka/watch?index=1"), n.openStream(t, "/eureka/watch", "Last-Event-ID", "1")} {
		if ev := s.next(t); ev.name != "open" || ev.id != "1" {
			t.Fatalf("resumed stream opens with %+v", ev)
		}
		for _, w := range want[1:] {
			if ev := s.next(t); ev.id != w.id || ev.name != w.name {
				t.Fatalf("resumed event %+v, want %+v", ev, w)
			}
		}
	}

	// More changes than the node keeps (8): resuming from 1 is a resync,
	// then the stream goes on with what follows.
	for i := range 10 {
		n.register(t, "ORDERS", fmt.Sprintf("x%d", i))
	}
	for _, path := range []string{"/eureka/watch?index=1", "/eureka/watch?index=999"} {
		head := strconv.FormatUint(n.reg.Version(), 10)
		s := n.openStream(t, path)
		if ev := s.next(t); ev.name != "resync" || ev.id != head || !strings.Contains(ev.data, `"index":`+head) {
			t.Fatalf("%s: first event %+v, want resync at %s", path, ev, head)
		}
		n.register(t, "ORDERS", "after-"+path[len(path)-1:])
		if ev := s.next(t); ev.name != "ADDED" || !strings.Contains(ev.data, "after-") {
			t.Fatalf("%s: after resync %+v", path, ev)
		}
	}
	if r := n.do(t, "GET", "/eureka/watch?index=abc", ""); r.code != 400 {
		t.Fatalf("bad index: %d", r.code)
	}
}

// gatedWriter is a ResponseWriter whose first Write waits until the test
// releases it: a reader that stops reading, deterministically.
type gatedWriter struct {
	header  http.Header
	entered chan struct{} // closed when the first Write starts
	release chan struct{} // closed by the test
	mu      sync.Mutex    // guards body
	body    strings.Builder
	first   sync.Once
}

func (w *gatedWriter) Header() http.Header { return w.header }

func (w *gatedWriter) WriteHeader(int) {}

func (w *gatedWriter) Flush() {}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.first.Do(func() {
		close(w.entered)
		<-w.release
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(p)
}

func (w *gatedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.String()
}

// A stream reader that stops reading while more changes happen than the
// node keeps gets a resync event, then the changes after it: never a
// silent gap.
func TestWatchStream_slowReaderIsToldToResync(t *testing.T) {
	n, _ := newWatchNode(t, func(r *registry.Config, _ *Config) { r.OutboxSize = 4 })
	w := &gatedWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequest("GET", "/eureka/watch", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.handler.ServeHTTP(w, req)
	}()
	<-w.entered // the stream is open and stuck writing its first event
	for i := range 10 {
		n.register(t, "ORDERS", fmt.Sprintf("o%d", i))
	}
	close(w.release)
	eventually(t, "the stream says resync", func() bool { return strings.Contains(w.String(), "event: resync") })
	n.register(t, "ORDERS", "after")
	eventually(t, "the stream goes on after the resync", func() bool { return strings.Contains(w.String(), `"instanceId":"after"`) })
	cancel()
	<-done
	out := w.String()
	if strings.Contains(out, `"instanceId":"o0"`) {
		t.Fatalf("events the node no longer kept were sent:\n%s", out)
	}
	if i, j := strings.Index(out, "event: resync"), strings.Index(out, `"instanceId":"after"`); i < 0 || j < i || !strings.Contains(out, "id: 10\nevent: resync") {
		t.Fatalf("want open, resync at 10, then the later change:\n%s", out)
	}
}

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
			eventually(t, "the request is held", func() bool { return len(timers.started()) == before+1 && n.watchersHeld() == 1 })
			select {
			case got := <-held:
				t.Fatalf("round %d GET %s?index=%d answered before its wait: %d index %s", round, path, idx, got.code, got.header.Get(HeaderIndex))
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
	n, timers := newWatchNode(t, func(_ *registry.Config, h *Config) { h.WatchMaxWatchers = limit })
	n.register(t, "ORDERS", "o1")
	idx := indexOf(t, n.do(t, "GET", "/eureka/apps/ORDERS", ""))
	if idx != n.reg.Version() {
		t.Fatalf("read after the register: index %d, want %d", idx, n.reg.Version())
	}
	var helds []<-chan response
	for range limit {
		helds = append(helds, n.async(fmt.Sprintf("/eureka/apps/ORDERS?index=%d&wait=30s", idx)))
	}
	eventually(t, "every watcher is held", func() bool { return n.watchersHeld() == limit && len(timers.started()) == limit })
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

// A client's change on node A reaches node B through replication over HTTP
// and wakes the request a watcher holds on B; a change of another app does
// not.
func TestWatch_changeOnOneNodeWakesWatcherOnAnother(t *testing.T) {
	a, _ := newWatchNode(t)
	b, _ := newWatchNode(t)
	cfg := replication.DefaultConfig()
	cfg.Now = a.clock.Now
	cfg.Store = a.reg
	cfg.Transport = replicationtest.HTTPTransport(t, 5*time.Second)
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
	eventually(t, "B's hub has the replicated change", func() bool { return b.api.watch.appVersion("ORDERS") == b.reg.Version() && b.reg.Version() > 0 })
	first := b.do(t, "GET", "/eureka/v2/apps/ORDERS", "", "Accept", "application/xml")
	idx := indexOf(t, first)
	held := b.async(fmt.Sprintf("/eureka/v2/apps/ORDERS?index=%d&wait=30s", idx), "Accept", "application/xml")
	eventually(t, "B holds the request", func() bool { w, _ := b.watchState("ORDERS"); return w == 1 })

	a.register(t, "BILLING", "b1")
	flush()
	eventually(t, "B applied the BILLING change", func() bool { return b.api.watch.appVersion("BILLING") > 0 })
	if w, armed := b.watchState("ORDERS"); w != 1 || !armed {
		t.Fatalf("B's ORDERS watcher woken by BILLING: waiters=%d armed=%v", w, armed)
	}

	a.register(t, "ORDERS", "o2")
	flush()
	r := receive(t, held)
	if r.code != 200 || !strings.Contains(r.body, "<instanceId>o2</instanceId>") || indexOf(t, r) <= idx {
		t.Fatalf("B's answer: %d index %d\n%s", r.code, indexOf(t, r), r.body)
	}
}

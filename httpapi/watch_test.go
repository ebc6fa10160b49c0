package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
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

func newWatchNode(t *testing.T, opts ...func(*registry.Config, *httpapi.Config)) (*testNode, *manualTimers) {
	t.Helper()
	timers := &manualTimers{}
	opts = append([]func(*registry.Config, *httpapi.Config){func(_ *registry.Config, h *httpapi.Config) {
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
	v, err := strconv.ParseUint(r.header.Get(httpapi.HeaderIndex), 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v (code %d)", httpapi.HeaderIndex, r.header.Get(httpapi.HeaderIndex), err, r.code)
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
	eventually(t, "the hub has applied the changes", func() bool { return n.srv.WatchAppVersion("BILLING") == version })
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
	eventually(t, "the hub has applied the changes", func() bool { return n.srv.WatchAppVersion("BILLING") == n.reg.Version() })
	first := n.do(t, "GET", "/eureka/apps/ORDERS", "", "Accept", "application/json")
	idx := indexOf(t, first)

	held := n.async(fmt.Sprintf("/eureka/apps/ORDERS?index=%d&wait=30s", idx), "Accept", "application/json")
	eventually(t, "the request is held", func() bool { w, _ := n.srv.WatchState("ORDERS"); return w == 1 })

	// Another app's change: applied by the hub, the watcher stays asleep.
	n.register(t, "BILLING", "b2")
	eventually(t, "the hub has applied the BILLING change", func() bool { return n.srv.WatchAppVersion("BILLING") == n.reg.Version() })
	if w, armed := n.srv.WatchState("ORDERS"); w != 1 || !armed {
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
	eventually(t, "the hub has applied the change", func() bool { return n.srv.WatchAppVersion("ORDERS") == n.reg.Version() })
	for _, path := range []string{"/eureka/apps/ORDERS", "/eureka/apps", "/eureka/apps/delta", "/eureka/vips/orders", "/eureka/v2/svips/orders"} {
		for _, accept := range []string{"application/json", "application/xml"} {
			plain := n.do(t, "GET", path, "", "Accept", accept)
			idx := indexOf(t, plain)
			before := len(timers.started())
			held := n.async(fmt.Sprintf("%s?index=%d&wait=20s", path, idx), "Accept", accept)
			eventually(t, "the request is held", func() bool { return len(timers.started()) == before+1 && n.srv.WatchersHeld() == 1 })
			if d := timers.started()[before]; d < 20*time.Second || d > 20*time.Second+20*time.Second/32 {
				t.Fatalf("%s: wait timer %v, want 20 s plus less than 1/32 jitter", path, d)
			}
			timers.fire()
			r := receive(t, held)
			if r.code != 200 || r.body != plain.body || indexOf(t, r) != idx {
				t.Fatalf("%s after wait: %d index %s, want the plain answer with index %d\n%s\nvs\n%s", path, r.code, r.header.Get(httpapi.HeaderIndex), idx, r.body, plain.body)
			}
		}
	}
}

func TestWatch_registryWatcherWokenByAnyChange(t *testing.T) {
	n, _ := newWatchNode(t)
	n.register(t, "ORDERS", "o1")
	idx := indexOf(t, n.do(t, "GET", "/eureka/apps/delta", "", "Accept", "application/json"))
	held := n.async(fmt.Sprintf("/eureka/apps/delta?index=%d&wait=30s", idx), "Accept", "application/json", "Accept-Encoding", "gzip")
	eventually(t, "the request is held", func() bool { return n.srv.WatchersHeld() == 1 })
	n.register(t, "BILLING", "b1")
	r := receive(t, held)
	if r.code != 200 || r.header.Get("Content-Encoding") != "gzip" || indexOf(t, r) != idx+1 {
		t.Fatalf("delta watcher: %d %v", r.code, r.header)
	}
}

func TestWatch_badInputAndLimits(t *testing.T) {
	n, timers := newWatchNode(t, func(_ *registry.Config, h *httpapi.Config) { h.WatchMaxWait = 10 * time.Second })
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.srv.WatchAppVersion("ORDERS") == n.reg.Version() })
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
	n, timers := newWatchNode(t, func(_ *registry.Config, h *httpapi.Config) { h.WatchMaxWatchers = 1 })
	n.register(t, "ORDERS", "o1")
	eventually(t, "the hub has applied the change", func() bool { return n.srv.WatchAppVersion("ORDERS") == n.reg.Version() })
	held := n.async("/eureka/apps/ORDERS?index=1&wait=30s")
	eventually(t, "the request is held", func() bool { return n.srv.WatchersHeld() == 1 })
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
	eventually(t, "the hub has applied the change", func() bool { return n.srv.WatchAppVersion("ORDERS") == n.reg.Version() })
	var helds []<-chan response
	for _, path := range []string{"/eureka/apps/ORDERS?index=1&wait=30s", "/eureka/apps?index=1&wait=30s", "/eureka/apps/NEW?index=0&wait=30s"} {
		helds = append(helds, n.async(path))
	}
	stream := n.openStream(t, "/eureka/watch")
	eventually(t, "the requests are held", func() bool { return n.srv.WatchersHeld() == 3 })
	n.srv.StopWatches()
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
	n, _ := newWatchNode(t, func(r *registry.Config, _ *httpapi.Config) { r.OutboxSize = 8 })
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

// The watch stream is a read: readers may open it, nobody without
// credentials, and it carries the registry's content only to them.
func TestWatchStream_authAsReads(t *testing.T) {
	n := newSecuredNode(t, "", true)
	t.Cleanup(n.srv.StopWatches)
	if r := n.do(t, "GET", "/eureka/watch", ""); r.code != 401 {
		t.Fatalf("no credentials: %d", r.code)
	}
	if r := n.do(t, "GET", "/eureka/watch", "", basic("reader", "wrong")...); r.code != 401 {
		t.Fatalf("wrong password: %d", r.code)
	}
	s := n.openStream(t, "/eureka/watch", basic("reader", readerPW)...)
	if ev := s.next(t); ev.name != "open" {
		t.Fatalf("reader's stream: %+v", ev)
	}
	if r := n.do(t, "GET", "/eureka/apps?index=0&wait=1s", "", basic("reader", "wrong")...); r.code != 401 {
		t.Fatalf("blocking fetch without valid credentials: %d", r.code)
	}
}

// A graceful shutdown of the http.Server that HTTPServer builds answers
// held requests and ends streams at once, instead of waiting out their
// wait (or its own deadline).
func TestWatch_httpServerShutdownReleasesWatchers(t *testing.T) {
	n, _ := newWatchNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := n.srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	other := &testNode{srv: n.srv, reg: n.reg, clock: n.clock, http: &httptest.Server{URL: "http://" + ln.Addr().String()}}
	held := other.async("/eureka/apps/ORDERS?index=0&wait=60s")
	stream := other.openStream(t, "/eureka/watch")
	eventually(t, "the request is held", func() bool { return n.srv.WatchersHeld() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if r := receive(t, held); r.code != 404 || r.header.Get(httpapi.HeaderIndex) != "0" {
		t.Fatalf("held request after shutdown: %d %v", r.code, r.header)
	}
	stream.waitEnd(t)
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
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
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
	n, _ := newWatchNode(t, func(r *registry.Config, _ *httpapi.Config) { r.OutboxSize = 4 })
	w := &gatedWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequest("GET", "/eureka/watch", nil).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.srv.ServeHTTP(w, req)
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

package eureka_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/regions/regionstest"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// regionEvent is one server-sent event as an EventSource sees it: id is
// the last id set, by this event or an earlier one.
type regionEvent struct{ id, name, data string }

type regionStream struct {
	events chan regionEvent
	header http.Header
}

func openRegionStream(t *testing.T, url string, headers ...string) *regionStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	s := &regionStream{events: make(chan regionEvent, 256), header: resp.Header}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev regionEvent
		lastID := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.id = lastID
					s.events <- ev
				}
				ev = regionEvent{}
			case strings.HasPrefix(line, "id: "):
				lastID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return s
}

func (s *regionStream) next(t *testing.T) regionEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event")
	}
	return regionEvent{}
}

// The watch stream with regions= carries the named remote regions'
// changes beside the local ones, marked and whitelisted, with ids that are
// cursors over every source: resuming from one carries on in each, a plain
// number or a cursor whose remote changes are gone resyncs.
func TestRegions_watchStreamCarriesRemoteRegions(t *testing.T) {
	tr := startTwoRegions(t, whitelist("b", "ORDERS", "PAYMENTS"))
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	tr.step(t)
	base := "http://" + a.Addr() + "/eureka/watch"

	s := openRegionStream(t, base+"?regions=b")
	open := s.next(t)
	bv := a.regions.Views()[0].Version
	// The id ends with this node run's token.
	i := strings.Index(open.id, ";@=")
	if i < 0 || len(open.id) < i+5 {
		t.Fatalf("open id %q has no run token", open.id)
	}
	run := open.id[i:]
	if want := "0;b=" + utoa(bv) + run; open.name != "open" || open.id != want || open.data != `{"index":0,"regions":{"b":`+utoa(bv)+`}}` {
		t.Fatalf("open %+v, want id %s", open, want)
	}
	plain := openRegionStream(t, base)
	if ev := plain.next(t); ev.name != "open" || ev.id != "0" {
		t.Fatalf("plain stream opens with %+v", ev)
	}

	register(t, a, "ORDERS", "a1")
	if ev := s.next(t); ev.name != "ADDED" || ev.id != "1;b="+utoa(bv)+run || !strings.Contains(ev.data, `"instanceId":"a1"`) || strings.Contains(ev.data, "muster.region") {
		t.Fatalf("local event %+v", ev)
	}
	if ev := plain.next(t); ev.name != "ADDED" || ev.id != "1" {
		t.Fatalf("plain stream's local event %+v", ev)
	}

	// b's changes, whitelisted and marked; SECRET is not served.
	register(t, b, "ORDERS", "o2")
	register(t, b, "SECRET", "s1")
	tr.step(t)
	added := s.next(t)
	if added.name != "ADDED" || added.id != "1;b="+utoa(bv+1)+run || !strings.Contains(added.data, `"instanceId":"o2"`) || !strings.Contains(added.data, `"muster.region":"b"`) {
		t.Fatalf("b's o2: %+v", added)
	}
	iv, err := wire.DecodeInstanceJSON([]byte(`{"instance":` + added.data + `}`))
	if err != nil || iv.App != "ORDERS" {
		t.Fatalf("the event's data is not an instance: %v %s", err, added.data)
	}
	if code := call(t, "DELETE", "http://"+b.Addr()+"/eureka/apps/ORDERS/o1", ""); code != 200 {
		t.Fatalf("cancel o1 on b: %d", code)
	}
	tr.step(t)
	if ev := s.next(t); ev.name != "DELETED" || ev.id != "1;b="+utoa(bv+2)+run || ev.data != `{"app":"ORDERS","instanceId":"o1","region":"b"}` {
		t.Fatalf("b's o1 cancelled: %+v", ev)
	}

	// Resume after the o2 event: the open, then o1's DELETED again; by
	// Last-Event-ID, or index= encoded or not (Go's query parser drops a
	// pair with ';').
	for _, r := range []*regionStream{
		openRegionStream(t, base+"?regions=b", "Last-Event-ID", added.id),
		openRegionStream(t, base+"?regions=b&index="+strings.ReplaceAll(added.id, ";", "%3B")),
		openRegionStream(t, base+"?regions=b&index="+added.id),
	} {
		if ev := r.next(t); ev.name != "open" || ev.id != added.id {
			t.Fatalf("resumed open %+v", ev)
		}
		if ev := r.next(t); ev.name != "DELETED" || !strings.Contains(ev.data, `"instanceId":"o1"`) {
			t.Fatalf("resumed event %+v", ev)
		}
	}
	// A plain number on a regions stream: the remote position is unknown.
	r := openRegionStream(t, base+"?regions=b", "Last-Event-ID", "1")
	if ev := r.next(t); ev.name != "resync" || ev.id != "1;b="+utoa(bv+2)+run || !strings.Contains(ev.data, "regions=b") {
		t.Fatalf("plain number on a regions stream: %+v", ev)
	}
	// A cursor of another node (or an earlier run of this one) looks
	// valid by its numbers, but its token is not this run's: resync.
	other := strings.TrimSuffix(added.id, run) + ";@=othernode"
	r = openRegionStream(t, base+"?regions=b", "Last-Event-ID", other)
	if ev := r.next(t); ev.name != "resync" || ev.id != "1;b="+utoa(bv+2)+run {
		t.Fatalf("another node's cursor: %+v", ev)
	}
	// The app filter holds for remote changes too.
	paymentsOnly := openRegionStream(t, base+"?regions=b&app=payments")
	paymentsOnly.next(t) // open
	register(t, b, "ORDERS", "o3")
	register(t, b, "PAYMENTS", "p1")
	tr.step(t)
	if ev := paymentsOnly.next(t); ev.name != "ADDED" || !strings.Contains(ev.data, `"instanceId":"p1"`) || ev.id != "1;b="+utoa(bv+3)+run {
		t.Fatalf("app=payments: %+v", ev)
	}
	// Events of one fetch share a version: only the last carries the id.
	// (Nothing came between o1's DELETED and these.)
	first, second := s.next(t), s.next(t)
	if first.id != "1;b="+utoa(bv+2)+run || second.id != "1;b="+utoa(bv+3)+run {
		t.Fatalf("one fetch's events: %+v then %+v", first, second)
	}

	// Past the delta retention (3 minutes) b's early changes are gone: a
	// cursor from before them resyncs; a current one still resumes.
	for i := 0; i < 8; i++ {
		tr.step(t)
	}
	stale := openRegionStream(t, base+"?regions=b", "Last-Event-ID", open.id)
	if ev := stale.next(t); ev.name != "resync" || !strings.Contains(ev.data, "not kept") {
		t.Fatalf("a cursor past the retention: %+v", ev)
	}
	fresh := openRegionStream(t, base+"?regions=b", "Last-Event-ID", second.id)
	if ev := fresh.next(t); ev.name != "open" || ev.id != second.id {
		t.Fatalf("a current cursor: %+v", ev)
	}
	// A local change now is the next event of every stream: the plain one
	// got none of b's changes, app=payments not b's ORDERS/o3, the fresh
	// resume nothing it had seen, the first stream nothing more of b.
	register(t, a, "PAYMENTS", "mark")
	for name, st := range map[string]*regionStream{"plain": plain, "app=payments": paymentsOnly, "resumed": fresh, "first": s} {
		if ev := st.next(t); ev.name != "ADDED" || !strings.Contains(ev.data, `"instanceId":"mark"`) {
			t.Errorf("%s stream: next event %+v, want the local PAYMENTS/mark", name, ev)
		}
	}

	// Bad cursors are a 400.
	for _, id := range []string{"1;b", "1;b=x", "x;b=1", "1;=3"} {
		req, _ := http.NewRequest("GET", base+"?regions=b", nil)
		req.Header.Set("Last-Event-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("Last-Event-ID %q: %d, want 400", id, resp.StatusCode)
		}
	}
}

// A held GET /apps/{APP} of an app only a remote region serves wakes when
// that region's data for it changes, not only at the end of the wait.
func TestRegions_blockingAppFetchOfRemoteApp(t *testing.T) {
	tr := startTwoRegions(t)
	a, b := tr.a, tr.b
	register(t, b, "PAYMENTS", "p1")
	tr.step(t)
	get := func(q string) (string, http.Header) {
		req, _ := http.NewRequest("GET", "http://"+a.Addr()+"/eureka/apps/PAYMENTS"+q, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			t.Error(err)
			return "", nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("GET /apps/PAYMENTS%s: %d %s", q, resp.StatusCode, body)
		}
		return string(body), resp.Header
	}
	for _, q := range []string{"", "?regions=b"} {
		body, hdr := get(q)
		index := hdr.Get("X-Muster-Index")
		if !strings.Contains(body, `"p1"`) || index == "" || index == "0" {
			t.Fatalf("GET /apps/PAYMENTS%s on a: index %q, %s", q, index, body)
		}
		sep := "?"
		if q != "" {
			sep = "&"
		}
		held := make(chan string, 1)
		go func() {
			body, _ := get(q + sep + "wait=60s&index=" + index)
			held <- body
		}()
		waitFor(t, 10*time.Second, "the app fetch held", func() bool {
			return metricValue(t, a, "muster_watch_held_requests") == 1
		})
		// A change elsewhere in b does not answer it: if it did, the
		// answer below would lack the PAYMENTS instance added after it.
		register(t, b, "OTHER"+strings.TrimPrefix(q, "?regions="), "x1")
		tr.step(t)
		id := "p" + utoa(uint64(len(q)+2))
		register(t, b, "PAYMENTS", id)
		tr.step(t)
		select {
		case body := <-held:
			if !strings.Contains(body, `"`+id+`"`) {
				t.Fatalf("the held fetch answered without %s: %s", id, body)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the held GET /apps/PAYMENTS%s did not wake on b's change", q)
		}
	}
	// The app leaves b altogether: its index still grows (it does not fall
	// back to what it was before the app was served), the held fetch wakes
	// and gets 404.
	_, hdr := get("")
	held := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Get("http://" + a.Addr() + "/eureka/apps/PAYMENTS?wait=60s&index=" + hdr.Get("X-Muster-Index"))
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	waitFor(t, 10*time.Second, "the app fetch held", func() bool {
		return metricValue(t, a, "muster_watch_held_requests") == 1
	})
	for _, id := range []string{"p1", "p2", "p12"} {
		if code := call(t, "DELETE", "http://"+b.Addr()+"/eureka/apps/PAYMENTS/"+id, ""); code != 200 {
			t.Fatalf("cancel %s on b: %d", id, code)
		}
	}
	tr.step(t)
	select {
	case code := <-held:
		if code != 404 {
			t.Fatalf("the held fetch of the app that left b answered %d, want 404", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held GET /apps/PAYMENTS did not wake when the app left b")
	}
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

// The merged forms a client may ask for beyond /apps: the delta and the
// secure VIP in XML; a remote URL that never answers is left after
// remote-region-read-timeout-ms for the region's next URL, and with
// disable-delta-for-remote-regions every fetch is a full one.
func TestRegions_xmlDeltaSecureVIPAndSlowRemote(t *testing.T) {
	clock := registrytest.NewClock()
	b := regionNodeOf(t, "b", clock, nil)
	hang := make(chan struct{})
	var slowAsked atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowAsked.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	body := strings.Replace(instanceBody("ORDERS", "o1", 3600), `"vipAddress"`, `"secureVipAddress":"orders-secure","vipAddress"`, 1)
	if code := call(t, "POST", "http://"+b.Addr()+"/eureka/apps/ORDERS", body); code != 204 {
		t.Fatalf("register o1 on b: %d", code)
	}
	a := regionNodeOf(t, "a", clock, map[string]string{"b": slow.URL + "/eureka," + b.srv.URL + "/eureka"},
		func(c *regions.Config) { c.ReadTimeout, c.DisableDelta = 200*time.Millisecond, true })
	waitFor(t, 10*time.Second, "a fetched b past the silent first URL", func() bool { return a.regions.Views()[0].HasData })
	if slowAsked.Load() == 0 {
		t.Fatal("the silent first URL was never asked")
	}
	if st := a.regions.Fetchers()[0].Stats(); st.Errors != 0 || st.FullFetches != 1 {
		t.Fatalf("a's fetcher after the failover: %+v", st)
	}

	sdoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/svips/orders-secure?regions=b", true, nil)
	if ids := regionstest.CopyOf(sdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b]" || sdoc.Hashcode != "UP_1_" {
		t.Fatalf("XML svips with regions=b: %v %q", ids, sdoc.Hashcode)
	}
	if none, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/svips/orders-secure", true, map[string]string{"Accept": "application/xml"}); len(regionstest.CopyOf(none).IDs()) != 1 {
		// The plain request: transparent fallback, ORDERS unknown in a.
		t.Fatalf("plain XML svips: %v", regionstest.CopyOf(none).IDs())
	}
	full, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", true, nil)
	client := regionstest.CopyOf(full)
	register(t, b, "ORDERS", "o2")
	if code := call(t, "PUT", "http://"+b.Addr()+"/eureka/apps/ORDERS/o1/status?value=OUT_OF_SERVICE", ""); code != 200 {
		t.Fatalf("status on b: %d", code)
	}
	waitFor(t, 10*time.Second, "a's fetcher waiting", func() bool { return clock.Waiting() >= 1 })
	clock.Advance(30 * time.Second)
	waitFor(t, 15*time.Second, "a's second fetch", func() bool { return a.regions.Views()[0].Instances == 2 })
	d, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta?regions=b", true, nil)
	client.Apply(d, false)
	if fmt.Sprint(client.IDs()) != "[ORDERS/o1=OUT_OF_SERVICE@b ORDERS/o2=UP@b]" || client.Hashcode() != d.Hashcode || d.Hashcode != "OUT_OF_SERVICE_1_UP_1_" {
		t.Fatalf("XML delta with regions=b: %v, copy %q, delta %q", client.IDs(), client.Hashcode(), d.Hashcode)
	}
	if st := a.regions.Fetchers()[0].Stats(); st.DeltaFetches != 0 || st.FullFetches != 2 {
		t.Fatalf("with disable-delta-for-remote-regions every fetch is full: %+v", st)
	}
}

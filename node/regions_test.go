package node

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// manualClock is a regions.Clock that moves only when the test says:
// After's channels fire when Advance passes their deadline.
type manualClock struct {
	mu      sync.Mutex // guards now and waiters
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.UnixMilli(1718000000000)} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, clockWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

func (c *manualClock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// regionNode starts a standalone node of region name whose remote regions
// are remotes (region → base URL).
func regionNode(t *testing.T, name string, port int, clock *manualClock, remotes map[string]string, sets ...string) *Node {
	t.Helper()
	base := []string{
		"eureka.client.register-with-eureka=false", // tests count the instances they register
		"server.port=" + strconv.Itoa(port), "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.enabled=false", "eureka.server.wait-time-in-ms-when-sync-empty=0",
		"eureka.client.region=" + name,
	}
	for r, u := range remotes {
		base = append(base, "eureka.server.remote-region-urls-with-name."+r+"="+u)
	}
	s := mustLoad(t, "", nil, append(base, sets...))
	n, err := New(s, testLogger(t).With().Str("node", name).Logger(), Options{Memberlist: memberlist.DefaultLocalConfig(), RegionsClock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	waitOpened(t, n)
	return n
}

// fetchDoc GETs an applications document (JSON unless xml) with headers.
func fetchDoc(t *testing.T, u string, xml bool, hdr map[string]string) (*wire.Applications, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if !xml {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	var doc *wire.Applications
	if xml {
		doc, err = wire.DecodeApplicationsXML(b)
	} else {
		doc, err = wire.DecodeApplicationsJSON(b)
	}
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", u, err, b)
	}
	return doc, resp.Header
}

// clientCopy is what a Eureka client keeps: app → id → instance.
type clientCopy map[string]map[string]*registry.Instance

func copyOf(doc *wire.Applications) clientCopy {
	c := clientCopy{}
	c.apply(doc, true)
	return c
}

// apply is DiscoveryClient#updateDelta (or a full replace).
func (c clientCopy) apply(doc *wire.Applications, full bool) {
	for _, a := range doc.Apps {
		for _, iv := range a.Instances {
			m := c[a.Name]
			if m == nil {
				m = map[string]*registry.Instance{}
				c[a.Name] = m
			}
			if !full && iv.ActionType == registry.ActionDeleted {
				delete(m, iv.ID())
				continue
			}
			m[iv.ID()] = iv.Instance
		}
	}
}

func (c clientCopy) hashcode() string {
	var counts registry.StatusCounts
	for _, m := range c {
		for _, in := range m {
			counts.Add(in.Status)
		}
	}
	return counts.Hashcode()
}

// ids lists app/id=STATUS@region of the copy, sorted.
func (c clientCopy) ids() []string {
	var out []string
	for app, m := range c {
		for id, in := range m {
			r, _ := in.Metadata.Get(regions.MetadataKey)
			out = append(out, app+"/"+id+"="+string(in.Status)+"@"+r)
		}
	}
	sort.Strings(out)
	return out
}

func register(t *testing.T, n *Node, app, id string) {
	t.Helper()
	if code := call(t, "POST", "http://"+n.Addr()+"/eureka/apps/"+app, instanceBody(app, id, 3600)); code != 204 {
		t.Fatalf("register %s/%s on %s: %d", app, id, n.name, code)
	}
}

// twoRegions is region a and region b, each a remote of the other; a
// reaches b through a switch that can cut it off.
type twoRegions struct {
	a, b  *Node
	clock *manualClock
	cut   atomic.Bool
}

func startTwoRegions(t *testing.T, setsA ...string) *twoRegions {
	t.Helper()
	tr := &twoRegions{clock: newManualClock()}
	pa, pb := freeTCPPort(t), freeTCPPort(t)
	bURL, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(pb))
	proxy := httputil.NewSingleHostReverseProxy(bURL)
	toB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tr.cut.Load() {
			http.Error(w, "cut off", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(toB.Close)
	tr.a = regionNode(t, "a", pa, tr.clock, map[string]string{"b": toB.URL + "/eureka"}, setsA...)
	tr.b = regionNode(t, "b", pb, tr.clock, map[string]string{"a": "http://127.0.0.1:" + strconv.Itoa(pa) + "/eureka/"})
	return tr
}

// step moves the clock one fetch interval once both fetchers wait, and
// returns when both have fetched again and wait once more.
func (tr *twoRegions) step(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "both fetchers waiting", func() bool { return tr.clock.Waiting() == 2 })
	fa, fb := tr.a.regions.Fetchers()[0].Stats().Fetches, tr.b.regions.Fetchers()[0].Stats().Fetches
	tr.clock.Advance(30 * time.Second)
	waitFor(t, 10*time.Second, "both fetchers fetched", func() bool {
		return tr.a.regions.Fetchers()[0].Stats().Fetches > fa && tr.b.regions.Fetchers()[0].Stats().Fetches > fb && tr.clock.Waiting() == 2
	})
}

func TestRegions_twoRegionsServeEachOther(t *testing.T) {
	tr := startTwoRegions(t, "eureka.server.remote-region-app-whitelist.b=ORDERS,PAYMENTS",
		"muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	register(t, b, "SECRET", "s1")
	register(t, a, "ORDERS", "a1")
	tr.step(t)

	// A client of a asking regions=b: b's whitelisted instances merged
	// into a's same-named app, marked; SECRET not served.
	doc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	got := copyOf(doc)
	want := []string{"ORDERS/a1=UP@", "ORDERS/o1=UP@b"}
	if fmt.Sprint(got.ids()) != fmt.Sprint(want) {
		t.Fatalf("a's regions=b: %v, want %v", got.ids(), want)
	}
	if doc.Hashcode != "UP_2_" || got.hashcode() != doc.Hashcode {
		t.Fatalf("hashcode %q, copy's %q", doc.Hashcode, got.hashcode())
	}
	// The same in XML.
	xdoc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", true, nil)
	if x := copyOf(xdoc); fmt.Sprint(x.ids()) != fmt.Sprint(want) || xdoc.Hashcode != "UP_2_" {
		t.Fatalf("XML: %v %q", x.ids(), xdoc.Hashcode)
	}
	// b serves a's own instance only: a never hands b what it fetched
	// from b (no mirror of a mirror), and b's view of a holds a1 alone.
	bdoc, _ := fetchDoc(t, "http://"+b.Addr()+"/eureka/apps?regions=a", false, nil)
	if ids := copyOf(bdoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@a ORDERS/o1=UP@ SECRET/s1=UP@]" {
		t.Fatalf("b's regions=a: %v", ids)
	}
	// A server (DefaultServer) asking a plainly gets a's local instances.
	sdoc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, map[string]string{regions.HeaderIdentityName: regions.ServerIdentityName})
	if ids := copyOf(sdoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
		t.Fatalf("a to a server: %v", ids)
	}
	// Even when a server names a region: a server gets local data only.
	sdoc, _ = fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, map[string]string{regions.HeaderIdentityName: regions.ServerIdentityName})
	if ids := copyOf(sdoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
		t.Fatalf("a to a server naming b: %v", ids)
	}

	// Transparent fallback: an app unknown in a is served to a plain
	// client; one a knows is not merged.
	register(t, b, "PAYMENTS", "p1")
	tr.step(t)
	pdoc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, nil)
	if ids := copyOf(pdoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@ PAYMENTS/p1=UP@b]" || pdoc.Hashcode != "UP_2_" {
		t.Fatalf("a's plain fetch: %v %q", ids, pdoc.Hashcode)
	}
	// App and instance lookups fall back; a status write on a remote
	// instance is 404 and changes nothing.
	if code, body, _ := httpGet("http://" + a.Addr() + "/eureka/apps/PAYMENTS"); code != 200 || !strings.Contains(body, "p1") {
		t.Fatalf("GET /apps/PAYMENTS on a: %d %s", code, body)
	}
	if code, body, _ := httpGet("http://" + a.Addr() + "/eureka/apps/ORDERS/o1"); code != 200 || !strings.Contains(body, "muster.region") {
		t.Fatalf("GET /apps/ORDERS/o1 on a: %d %s", code, body)
	}
	if code, _, _ := httpGet("http://" + a.Addr() + "/eureka/instances/p1"); code != 200 {
		t.Fatalf("GET /instances/p1 on a: %d", code)
	}
	if code := call(t, "PUT", "http://"+a.Addr()+"/eureka/apps/PAYMENTS/p1/status?value=OUT_OF_SERVICE", ""); code != 404 {
		t.Fatalf("status PUT on a remote instance: %d, want 404", code)
	}
	if code := call(t, "DELETE", "http://"+a.Addr()+"/eureka/apps/PAYMENTS/p1", ""); code != 404 {
		t.Fatalf("cancel of a remote instance: %d, want 404", code)
	}
	if _, ok := a.reg.Instance("PAYMENTS", "p1"); ok {
		t.Fatal("a remote instance reached a's registry")
	}
	// A blocking fetch of regions=b wakes on a change in b.
	_, hdr := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	index := hdr.Get("X-Muster-Index")
	held := make(chan *wire.Applications, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+a.Addr()+"/eureka/apps?regions=b&wait=60s&index="+index, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			held <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		doc, _ := wire.DecodeApplicationsJSON(b)
		held <- doc
	}()
	waitFor(t, 10*time.Second, "the blocking fetch held", func() bool {
		return metricValue(t, a, "muster_watch_held_requests") == 1
	})
	register(t, b, "ORDERS", "o2")
	tr.step(t)
	select {
	case doc := <-held:
		if doc == nil || !strings.Contains(fmt.Sprint(copyOf(doc).ids()), "ORDERS/o2=UP@b") {
			t.Fatalf("the held regions=b fetch answered %v", doc)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held regions=b fetch did not wake on b's change")
	}
	if code := call(t, "DELETE", "http://"+b.Addr()+"/eureka/apps/ORDERS/o2", ""); code != 200 {
		t.Fatalf("cancel o2: %d", code)
	}
	tr.step(t)

	// VIP lookups merge the same way (instanceBody's vipAddress is the
	// lower-cased app name).
	vdoc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/vips/orders?regions=b", false, nil)
	if ids := copyOf(vdoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@ ORDERS/o1=UP@b]" || vdoc.Hashcode != "UP_2_" {
		t.Fatalf("VIP orders with regions=b: %v %q", ids, vdoc.Hashcode)
	}
	// DNS: <app>.app.<region>.<domain> answers the region's served
	// instances; a region's app off the whitelist is not there.
	dnsQuery := func(name string) *mdns.Msg {
		t.Helper()
		m := new(mdns.Msg)
		m.SetQuestion(name, mdns.TypeSRV)
		r, _, err := (&mdns.Client{Timeout: 2 * time.Second}).Exchange(m, a.DNSAddr())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	if r := dnsQuery("_orders._tcp.app.b.muster."); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("SRV of b's ORDERS: %v", r)
	}
	if r := dnsQuery("_payments._tcp.app.b.muster."); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("SRV of b's PAYMENTS: %v", r)
	}
	if r := dnsQuery("_secret._tcp.app.b.muster."); r.Rcode != mdns.RcodeNameError {
		t.Fatalf("SRV of b's SECRET (not whitelisted): %v", r)
	}
	// A region not configured is ignored; the own region adds nothing.
	odoc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=a,zz", false, nil)
	if ids := copyOf(odoc).ids(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
		t.Fatalf("regions=a,zz: %v", ids)
	}
}

// gzip and the compact form are served for merged documents too.
func TestRegions_gzipAndCompactAndShadowing(t *testing.T) {
	tr := startTwoRegions(t)
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	register(t, b, "ORDERS", "same")
	register(t, a, "ORDERS", "same") // a local instance takes the id: a's wins
	tr.step(t)
	doc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if ids := copyOf(doc).ids(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b ORDERS/same=UP@]" || doc.Hashcode != "UP_2_" {
		t.Fatalf("shadowed: %v %q", ids, doc.Hashcode)
	}
	client := copyOf(doc)
	// The local one goes: b's instance of that id is served again, and
	// the delta says so after the local DELETED.
	if code := call(t, "DELETE", "http://"+a.Addr()+"/eureka/apps/ORDERS/same", ""); code != 200 {
		t.Fatal(code)
	}
	d, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta?regions=b", false, nil)
	client.apply(d, false)
	if fmt.Sprint(client.ids()) != "[ORDERS/o1=UP@b ORDERS/same=UP@b]" || client.hashcode() != d.Hashcode {
		t.Fatalf("after the local one went: %v %q vs %q", client.ids(), client.hashcode(), d.Hashcode)
	}
	req, _ := http.NewRequest("GET", "http://"+a.Addr()+"/eureka/apps?regions=b", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("X-Eureka-Accept", "compact")
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(zr)
	cdoc, err := wire.DecodeApplicationsJSON(body)
	if err != nil || len(copyOf(cdoc).ids()) != 2 || strings.Contains(string(body), "metadata") {
		t.Fatalf("compact gzip: %v %s", err, body)
	}
	_ = b
}

// Deltas of a merged view reconcile: a client of a that asks regions=b
// applies each delta to its copy and reaches the delta's hashcode, under
// churn in both regions; the fetchers never see a mismatch either.
func TestRegions_deltasReconcileUnderChurn(t *testing.T) {
	tr := startTwoRegions(t)
	a, b := tr.a, tr.b
	rng := rand.New(rand.NewPCG(37, 1))
	live := map[*Node][]string{}
	churn := func(n *Node, tag string, round int) {
		for k := 0; k < 3; k++ {
			switch op := rng.IntN(4); {
			case op <= 1 || len(live[n]) == 0:
				id := fmt.Sprintf("%s-%d-%d", tag, round, k)
				app := []string{"ORDERS", "USERS", "CART"}[rng.IntN(3)]
				register(t, n, app, id)
				live[n] = append(live[n], app+"/"+id)
			case op == 2:
				i := rng.IntN(len(live[n]))
				if code := call(t, "DELETE", "http://"+n.Addr()+"/eureka/apps/"+live[n][i], ""); code != 200 {
					t.Fatalf("cancel %s: %d", live[n][i], code)
				}
				live[n] = append(live[n][:i], live[n][i+1:]...)
			default:
				i := rng.IntN(len(live[n]))
				st := []string{"DOWN", "UP", "OUT_OF_SERVICE"}[rng.IntN(3)]
				if code := call(t, "PUT", "http://"+n.Addr()+"/eureka/apps/"+live[n][i]+"/status?value="+st, ""); code != 200 {
					t.Fatalf("status %s: %d", live[n][i], code)
				}
			}
		}
	}
	churn(a, "a", 0)
	churn(b, "b", 0)
	tr.step(t)
	full := func(n *Node, q string) *wire.Applications {
		doc, _ := fetchDoc(t, "http://"+n.Addr()+"/eureka/apps"+q, false, nil)
		return doc
	}
	delta := func(n *Node, q string) *wire.Applications {
		doc, _ := fetchDoc(t, "http://"+n.Addr()+"/eureka/apps/delta"+q, false, nil)
		return doc
	}
	clientA, clientB, clientPlain := copyOf(full(a, "?regions=b")), copyOf(full(b, "?regions=a")), copyOf(full(a, ""))
	mismatches := 0
	// 20 rounds of one fetch interval: 10 minutes of churn on the clock.
	for round := 1; round <= 20; round++ {
		churn(a, "a", round)
		churn(b, "b", round)
		tr.step(t)
		for _, c := range []struct {
			copy clientCopy
			n    *Node
			q    string
		}{{clientA, a, "?regions=b"}, {clientB, b, "?regions=a"}, {clientPlain, a, ""}} {
			d := delta(c.n, c.q)
			c.copy.apply(d, false)
			if c.copy.hashcode() != d.Hashcode {
				mismatches++
				t.Errorf("round %d %s%s: copy %q, delta %q", round, c.n.name, c.q, c.copy.hashcode(), d.Hashcode)
			}
			if f := copyOf(full(c.n, c.q)); fmt.Sprint(f.ids()) != fmt.Sprint(c.copy.ids()) {
				t.Errorf("round %d %s%s: copy after delta\n%v\nfull\n%v", round, c.n.name, c.q, c.copy.ids(), f.ids())
			}
		}
	}
	for _, n := range []*Node{a, b} {
		if st := n.regions.Fetchers()[0].Stats(); st.Mismatches != 0 || st.DeltaFetches == 0 {
			t.Errorf("%s's fetcher: %+v", n.name, st)
		}
	}
	// Neither region serves the other's copy of itself: every instance a
	// shows as b's was registered on b.
	for _, id := range copyOf(full(a, "?regions=b")).ids() {
		if strings.HasSuffix(id, "@b") != strings.Contains(id, "/b-") {
			t.Errorf("a serves %s", id)
		}
	}
}

// Cut off, a keeps serving b's last data, says so in its metrics, drops
// it after max staleness (regions= then names b as missing, or is 403
// with require-all) and recovers by itself.
func TestRegions_cutOffStaleAndRecover(t *testing.T) {
	tr := startTwoRegions(t, "muster.regions.max-staleness-ms=120000")
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	tr.step(t)
	if doc, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil); len(copyOf(doc).ids()) != 1 {
		t.Fatalf("before the cut: %v", copyOf(doc).ids())
	}
	plain, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, nil)
	client := copyOf(plain)
	named, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	namedClient := copyOf(named)

	tr.cut.Store(true)
	tr.step(t) // one failure: the data stays
	doc, hdr := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if len(copyOf(doc).ids()) != 1 || hdr.Get("X-Muster-Regions-Missing") != "" {
		t.Fatalf("after one failure: %v %v", copyOf(doc).ids(), hdr)
	}
	if v := metricValue(t, a, `muster_region_fetch_errors_total{region="b"}`); v < 1 {
		t.Fatalf("fetch errors metric %v", v)
	}
	if v := metricValue(t, a, `muster_region_age_seconds{region="b"}`); v < 30 {
		t.Fatalf("age metric %v", v)
	}
	// Past max staleness the data goes; b's fetcher of a keeps waiting,
	// a's wakes at the staleness deadline or its back-off.
	waitFor(t, 10*time.Second, "a's fetcher waiting", func() bool { return tr.clock.Waiting() == 2 })
	for i := 0; i < 8 && a.regions.Views()[0].HasData; i++ {
		w := tr.clock.Waiting()
		tr.clock.Advance(30 * time.Second)
		waitFor(t, 10*time.Second, "fetchers waiting again", func() bool { return tr.clock.Waiting() >= w })
	}
	waitFor(t, 10*time.Second, "b's data dropped", func() bool { return !a.regions.Views()[0].HasData })
	doc, hdr = fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if len(copyOf(doc).ids()) != 0 || hdr.Get("X-Muster-Regions-Missing") != "b" {
		t.Fatalf("after max staleness: %v, header %q", copyOf(doc).ids(), hdr.Get("X-Muster-Regions-Missing"))
	}
	// A plain client's delta carries the drop: its copy stays consistent.
	d, _ := fetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta", false, nil)
	client.apply(d, false)
	if client.hashcode() != d.Hashcode || len(client.ids()) != 0 {
		t.Fatalf("plain client after the drop: %v, hashcode %q vs %q", client.ids(), client.hashcode(), d.Hashcode)
	}
	d, _ = fetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta?regions=b", false, nil)
	namedClient.apply(d, false)
	if namedClient.hashcode() != d.Hashcode || len(namedClient.ids()) != 0 {
		t.Fatalf("regions=b client after the drop: %v, hashcode %q vs %q", namedClient.ids(), namedClient.hashcode(), d.Hashcode)
	}
	if v := metricValue(t, a, `muster_region_has_data{region="b"}`); v != 0 {
		t.Fatalf("has_data %v", v)
	}
	// /admin/status and the dashboard say so.
	_, body, _ := httpGet("http://" + a.Addr() + "/admin/status")
	var st ops.AdminStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.RemoteRegions) != 1 {
		t.Fatalf("admin status: %v %s", err, body)
	}
	if r := st.RemoteRegions[0]; r.Name != "b" || r.HasData || r.Failures == 0 || r.AgeSeconds < 120 || r.LastFetch == "" || r.LastError == "" {
		t.Fatalf("admin status region: %+v", r)
	}
	if _, page, _ := httpGet("http://" + a.Addr() + "/"); !strings.Contains(page, `<table id="regions">`) || !strings.Contains(page, "dropped as stale") {
		t.Fatalf("dashboard lacks the remote region:\n%s", page)
	}

	// b comes back: a fetches it again by itself.
	tr.cut.Store(false)
	for i := 0; i < 10 && !a.regions.Views()[0].HasData; i++ {
		waitFor(t, 10*time.Second, "fetchers waiting", func() bool { return tr.clock.Waiting() == 2 })
		tr.clock.Advance(30 * time.Second)
		waitFor(t, 10*time.Second, "fetch done", func() bool { return tr.clock.Waiting() == 2 || a.regions.Views()[0].HasData })
	}
	waitFor(t, 10*time.Second, "b's data back", func() bool { return a.regions.Views()[0].HasData })
	doc, hdr = fetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if hdr.Get("X-Muster-Regions-Missing") != "" {
		t.Fatalf("after recovery: %v", hdr)
	}
	if ids := copyOf(doc).ids(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b]" {
		t.Fatalf("after recovery: %v (b is %s)", ids, b.name)
	}
}

// With require-all, a regions= request naming a region without data is
// 403, as in Eureka.
func TestRegions_requireAll(t *testing.T) {
	clock := newManualClock()
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
	t.Cleanup(dead.Close)
	a := regionNode(t, "a", freeTCPPort(t), clock, map[string]string{"b": dead.URL + "/eureka"}, "muster.regions.require-all=true")
	waitFor(t, 10*time.Second, "the first fetch failed", func() bool { return a.regions.Fetchers()[0].Stats().Errors > 0 })
	if code, _, _ := httpGet("http://" + a.Addr() + "/eureka/apps?regions=b"); code != 403 {
		t.Fatalf("regions=b without data, require-all: %d", code)
	}
	if code, _, _ := httpGet("http://" + a.Addr() + "/eureka/apps"); code != 200 {
		t.Fatalf("plain fetch: %d", code)
	}
	if code, _, _ := httpGet("http://" + a.Addr() + "/eureka/watch?regions=b"); code != 403 {
		t.Fatalf("watch stream of regions=b without data, require-all: %d", code)
	}
}

// regionClusterSets are the settings of a clustered region node named
// name, joining join (none: the first node).
func regionClusterSets(name string, join ...string) []string {
	s := []string{"cluster.enabled=true", "cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0",
		"cluster.zone=z1", "eureka.server.registry-sync-retry-wait-ms=200"}
	if len(join) > 0 {
		s = append(s, "cluster.join="+strings.Join(join, ","))
	}
	return s
}

// A region of two clustered nodes: each node fetches the remote region
// itself, both serve it, and neither replicates it into the other's
// registry (nor does syncUp copy it).
func TestRegions_clusterEachNodeFetches(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	clock := newManualClock()
	pa1, pa2, pb := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	bURL := "http://127.0.0.1:" + strconv.Itoa(pb) + "/eureka"
	a1 := regionNode(t, "a", pa1, clock, map[string]string{"b": bURL}, regionClusterSets("a1")...)
	b := regionNode(t, "b", pb, clock, map[string]string{"a": "http://127.0.0.1:" + strconv.Itoa(pa1) + "/eureka,http://127.0.0.1:" + strconv.Itoa(pa2) + "/eureka"})
	register(t, b, "ORDERS", "o1")
	register(t, b, "PAYMENTS", "p1")
	register(t, a1, "ORDERS", "x1")
	a2 := regionNode(t, "a", pa2, clock, map[string]string{"b": bURL}, regionClusterSets("a2", a1.gossipAddr(t))...)
	waitFor(t, 15*time.Second, "a1 and a2 peers", func() bool { return len(a1.currentPeers()) == 1 && len(a2.currentPeers()) == 1 })
	waitFor(t, 10*time.Second, "x1 on a2", func() bool { _, ok := a2.reg.Instance("ORDERS", "x1"); return ok })

	waitFor(t, 10*time.Second, "three fetchers waiting", func() bool { return clock.Waiting() == 3 })
	clock.Advance(30 * time.Second)
	waitFor(t, 10*time.Second, "a1 and a2 hold b", func() bool {
		return a1.regions.Views()[0].Instances == 2 && a2.regions.Views()[0].Instances == 2
	})
	for _, n := range []*Node{a1, a2} {
		doc, _ := fetchDoc(t, "http://"+n.Addr()+"/eureka/apps?regions=b", false, nil)
		if ids := copyOf(doc).ids(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b ORDERS/x1=UP@ PAYMENTS/p1=UP@b]" {
			t.Fatalf("%s regions=b: %v", n.name, ids)
		}
		if _, ok := n.reg.Instance("ORDERS", "o1"); ok || n.reg.Len() != 1 {
			t.Fatalf("%s's registry holds %d instances (o1 there: %v)", n.name, n.reg.Len(), ok)
		}
		if st := n.regions.Fetchers()[0].Stats(); st.FullFetches == 0 {
			t.Fatalf("%s did not fetch b itself: %+v", n.name, st)
		}
	}
	// A peer's syncUp read (the replication header) gets local data only,
	// where a client's plain read gets b's PAYMENTS by the fallback.
	if plain, _ := fetchDoc(t, "http://"+a1.Addr()+"/eureka/apps", false, nil); !strings.Contains(fmt.Sprint(copyOf(plain).ids()), "PAYMENTS/p1") {
		t.Fatalf("a1's plain read lacks the fallback: %v", copyOf(plain).ids())
	}
	req, _ := http.NewRequest("GET", "http://"+a1.Addr()+"/eureka/apps", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("x-netflix-discovery-replication", "true")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), "p1") || !strings.Contains(string(body), "x1") {
		t.Fatalf("a peer's read of a1: %d %s", resp.StatusCode, body)
	}
	// b holds a's instance once, fetched from either node.
	bdoc, _ := fetchDoc(t, "http://"+b.Addr()+"/eureka/apps?regions=a", false, nil)
	if ids := copyOf(bdoc).ids(); fmt.Sprint(ids) != "[ORDERS/o1=UP@ ORDERS/x1=UP@a PAYMENTS/p1=UP@]" {
		t.Fatalf("b regions=a: %v", ids)
	}
}

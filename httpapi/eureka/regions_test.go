package eureka_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/regions/regionstest"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

func TestRegions_twoRegionsServeEachOther(t *testing.T) {
	tr := startTwoRegions(t, whitelist("b", "ORDERS", "PAYMENTS"))
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	register(t, b, "SECRET", "s1")
	register(t, a, "ORDERS", "a1")
	tr.step(t)

	// A client of a asking regions=b: b's whitelisted instances merged
	// into a's same-named app, marked; SECRET not served.
	doc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	got := regionstest.CopyOf(doc)
	want := []string{"ORDERS/a1=UP@", "ORDERS/o1=UP@b"}
	if fmt.Sprint(got.IDs()) != fmt.Sprint(want) {
		t.Fatalf("a's regions=b: %v, want %v", got.IDs(), want)
	}
	if doc.Hashcode != "UP_2_" || got.Hashcode() != doc.Hashcode {
		t.Fatalf("hashcode %q, copy's %q", doc.Hashcode, got.Hashcode())
	}
	// The same in XML.
	xdoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", true, nil)
	if x := regionstest.CopyOf(xdoc); fmt.Sprint(x.IDs()) != fmt.Sprint(want) || xdoc.Hashcode != "UP_2_" {
		t.Fatalf("XML: %v %q", x.IDs(), xdoc.Hashcode)
	}
	// b serves a's own instance only: a never hands b what it fetched
	// from b (no mirror of a mirror), and b's view of a holds a1 alone.
	bdoc, _ := regionstest.FetchDoc(t, "http://"+b.Addr()+"/eureka/apps?regions=a", false, nil)
	if ids := regionstest.CopyOf(bdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@a ORDERS/o1=UP@ SECRET/s1=UP@]" {
		t.Fatalf("b's regions=a: %v", ids)
	}
	// A server (DefaultServer) asking a plainly gets a's local instances.
	sdoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, map[string]string{regions.HeaderIdentityName: regions.ServerIdentityName})
	if ids := regionstest.CopyOf(sdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
		t.Fatalf("a to a server: %v", ids)
	}
	// Even when a server names a region: a server gets local data only.
	sdoc, _ = regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, map[string]string{regions.HeaderIdentityName: regions.ServerIdentityName})
	if ids := regionstest.CopyOf(sdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
		t.Fatalf("a to a server naming b: %v", ids)
	}

	// Transparent fallback: an app unknown in a is served to a plain
	// client; one a knows is not merged.
	register(t, b, "PAYMENTS", "p1")
	tr.step(t)
	pdoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, nil)
	if ids := regionstest.CopyOf(pdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@ PAYMENTS/p1=UP@b]" || pdoc.Hashcode != "UP_2_" {
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
	_, hdr := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
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
		if doc == nil || !strings.Contains(fmt.Sprint(regionstest.CopyOf(doc).IDs()), "ORDERS/o2=UP@b") {
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
	vdoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/vips/orders?regions=b", false, nil)
	if ids := regionstest.CopyOf(vdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@ ORDERS/o1=UP@b]" || vdoc.Hashcode != "UP_2_" {
		t.Fatalf("VIP orders with regions=b: %v %q", ids, vdoc.Hashcode)
	}
	// A region not configured is ignored; the own region adds nothing.
	odoc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=a,zz", false, nil)
	if ids := regionstest.CopyOf(odoc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@]" {
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
	doc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if ids := regionstest.CopyOf(doc).IDs(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b ORDERS/same=UP@]" || doc.Hashcode != "UP_2_" {
		t.Fatalf("shadowed: %v %q", ids, doc.Hashcode)
	}
	client := regionstest.CopyOf(doc)
	// The local one goes: b's instance of that id is served again, and
	// the delta says so after the local DELETED.
	if code := call(t, "DELETE", "http://"+a.Addr()+"/eureka/apps/ORDERS/same", ""); code != 200 {
		t.Fatal(code)
	}
	d, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta?regions=b", false, nil)
	client.Apply(d, false)
	if fmt.Sprint(client.IDs()) != "[ORDERS/o1=UP@b ORDERS/same=UP@b]" || client.Hashcode() != d.Hashcode {
		t.Fatalf("after the local one went: %v %q vs %q", client.IDs(), client.Hashcode(), d.Hashcode)
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
	if err != nil || len(regionstest.CopyOf(cdoc).IDs()) != 2 || strings.Contains(string(body), "metadata") {
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
	live := map[*regionNode][]string{}
	churn := func(n *regionNode, tag string, round int) {
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
	full := func(n *regionNode, q string) *wire.Applications {
		doc, _ := regionstest.FetchDoc(t, "http://"+n.Addr()+"/eureka/apps"+q, false, nil)
		return doc
	}
	delta := func(n *regionNode, q string) *wire.Applications {
		doc, _ := regionstest.FetchDoc(t, "http://"+n.Addr()+"/eureka/apps/delta"+q, false, nil)
		return doc
	}
	clientA, clientB, clientPlain := regionstest.CopyOf(full(a, "?regions=b")), regionstest.CopyOf(full(b, "?regions=a")), regionstest.CopyOf(full(a, ""))
	mismatches := 0
	// 20 rounds of one fetch interval: 10 minutes of churn on the clock.
	for round := 1; round <= 20; round++ {
		churn(a, "a", round)
		churn(b, "b", round)
		tr.step(t)
		for _, c := range []struct {
			copy regionstest.ClientCopy
			n    *regionNode
			q    string
		}{{clientA, a, "?regions=b"}, {clientB, b, "?regions=a"}, {clientPlain, a, ""}} {
			d := delta(c.n, c.q)
			c.copy.Apply(d, false)
			if c.copy.Hashcode() != d.Hashcode {
				mismatches++
				t.Errorf("round %d %s%s: copy %q, delta %q", round, c.n.name, c.q, c.copy.Hashcode(), d.Hashcode)
			}
			if f := regionstest.CopyOf(full(c.n, c.q)); fmt.Sprint(f.IDs()) != fmt.Sprint(c.copy.IDs()) {
				t.Errorf("round %d %s%s: copy after delta\n%v\nfull\n%v", round, c.n.name, c.q, c.copy.IDs(), f.IDs())
			}
		}
	}
	for _, n := range []*regionNode{a, b} {
		if st := n.regions.Fetchers()[0].Stats(); st.Mismatches != 0 || st.DeltaFetches == 0 {
			t.Errorf("%s's fetcher: %+v", n.name, st)
		}
	}
	// Neither region serves the other's copy of itself: every instance a
	// shows as b's was registered on b.
	for _, id := range regionstest.CopyOf(full(a, "?regions=b")).IDs() {
		if strings.HasSuffix(id, "@b") != strings.Contains(id, "/b-") {
			t.Errorf("a serves %s", id)
		}
	}
}

// Cut off, a keeps serving b's last data, says so in its metrics, drops
// it after max staleness (regions= then names b as missing, or is 403
// with require-all) and recovers by itself.
func TestRegions_cutOffStaleAndRecover(t *testing.T) {
	tr := startTwoRegions(t, func(c *regions.Config) { c.MaxStaleness = 2 * time.Minute })
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	tr.step(t)
	if doc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil); len(regionstest.CopyOf(doc).IDs()) != 1 {
		t.Fatalf("before the cut: %v", regionstest.CopyOf(doc).IDs())
	}
	plain, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps", false, nil)
	client := regionstest.CopyOf(plain)
	named, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	namedClient := regionstest.CopyOf(named)

	tr.cut.Store(true)
	tr.step(t) // one failure: the data stays
	doc, hdr := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if len(regionstest.CopyOf(doc).IDs()) != 1 || hdr.Get("X-Muster-Regions-Missing") != "" {
		t.Fatalf("after one failure: %v %v", regionstest.CopyOf(doc).IDs(), hdr)
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
	doc, hdr = regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if len(regionstest.CopyOf(doc).IDs()) != 0 || hdr.Get("X-Muster-Regions-Missing") != "b" {
		t.Fatalf("after max staleness: %v, header %q", regionstest.CopyOf(doc).IDs(), hdr.Get("X-Muster-Regions-Missing"))
	}
	// A plain client's delta carries the drop: its copy stays consistent.
	d, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta", false, nil)
	client.Apply(d, false)
	if client.Hashcode() != d.Hashcode || len(client.IDs()) != 0 {
		t.Fatalf("plain client after the drop: %v, hashcode %q vs %q", client.IDs(), client.Hashcode(), d.Hashcode)
	}
	d, _ = regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps/delta?regions=b", false, nil)
	namedClient.Apply(d, false)
	if namedClient.Hashcode() != d.Hashcode || len(namedClient.IDs()) != 0 {
		t.Fatalf("regions=b client after the drop: %v, hashcode %q vs %q", namedClient.IDs(), namedClient.Hashcode(), d.Hashcode)
	}
	if v := metricValue(t, a, `muster_region_has_data{region="b"}`); v != 0 {
		t.Fatalf("has_data %v", v)
	}
	// The region's report (what /admin/status and the dashboard show,
	// node's to serve) says so.
	if r := a.regions.Report(); len(r) != 1 || r[0].Name != "b" || r[0].HasData || r[0].Failures == 0 || r[0].AgeSeconds < 120 || r[0].LastFetch == "" || r[0].LastError == "" {
		t.Fatalf("report: %+v", r)
	}

	// b comes back: a fetches it again by itself.
	tr.cut.Store(false)
	for i := 0; i < 10 && !a.regions.Views()[0].HasData; i++ {
		waitFor(t, 10*time.Second, "fetchers waiting", func() bool { return tr.clock.Waiting() == 2 })
		tr.clock.Advance(30 * time.Second)
		waitFor(t, 10*time.Second, "fetch done", func() bool { return tr.clock.Waiting() == 2 || a.regions.Views()[0].HasData })
	}
	waitFor(t, 10*time.Second, "b's data back", func() bool { return a.regions.Views()[0].HasData })
	doc, hdr = regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if hdr.Get("X-Muster-Regions-Missing") != "" {
		t.Fatalf("after recovery: %v", hdr)
	}
	if ids := regionstest.CopyOf(doc).IDs(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b]" {
		t.Fatalf("after recovery: %v (b is %s)", ids, b.name)
	}
}

// With require-all, a regions= request naming a region without data is
// 403, as in Eureka.
func TestRegions_requireAll(t *testing.T) {
	clock := registrytest.NewClock()
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
	t.Cleanup(dead.Close)
	a := regionNodeOf(t, "a", clock, map[string]string{"b": dead.URL + "/eureka"}, func(c *regions.Config) { c.RequireAll = true })
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

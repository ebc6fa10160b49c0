package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/regions/regionstest"
	"github.com/muster-registry/muster/registry/registrytest"
)

// regionNode starts a standalone node of region name whose remote regions
// are remotes (region → base URL).
func regionNode(t *testing.T, name string, port int, clock *registrytest.Clock, remotes map[string]string, sets ...string) *Node {
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
	clock *registrytest.Clock
	cut   atomic.Bool
}

func startTwoRegions(t *testing.T, setsA ...string) *twoRegions {
	t.Helper()
	tr := &twoRegions{clock: registrytest.NewClock()}
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

// A whole node serves its remote regions: the settings reach the
// fetchers (the region's URL, the whitelist), the Eureka API merges what
// they fetched into regions=, the DNS interface answers the region's
// apps, and /admin/status and the dashboard show the region's report.
// How the API serves remote regions (deltas, gzip, the watch stream,
// blocking fetches, require-all, staleness) is httpapi/eureka's test
// (regions_test.go there); the fetchers' own are regions'.
func TestRegions_nodeServesRemoteRegions(t *testing.T) {
	tr := startTwoRegions(t, "eureka.server.remote-region-app-whitelist.b=ORDERS,PAYMENTS",
		"muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")
	a, b := tr.a, tr.b
	register(t, b, "ORDERS", "o1")
	register(t, b, "PAYMENTS", "p1")
	register(t, b, "SECRET", "s1")
	register(t, a, "ORDERS", "a1")
	tr.step(t)

	doc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
	if ids := regionstest.CopyOf(doc).IDs(); fmt.Sprint(ids) != "[ORDERS/a1=UP@ ORDERS/o1=UP@b PAYMENTS/p1=UP@b]" || doc.Hashcode != "UP_3_" {
		t.Fatalf("a's regions=b: %v %q", ids, doc.Hashcode)
	}
	if _, ok := a.reg.Instance("ORDERS", "o1"); ok {
		t.Fatal("a remote instance reached a's registry")
	}
	dnsQuery := func(name string) *mdns.Msg {
		t.Helper()
		m := new(mdns.Msg)
		m.SetQuestion(name, mdns.TypeSRV)
		r, _, err := (&mdns.Client{Timeout: 2 * time.Second}).Exchange(m, a.dnsListen())
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
	_, body, _ := httpGet("http://" + a.Addr() + "/admin/status")
	var st ops.AdminStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.RemoteRegions) != 1 {
		t.Fatalf("admin status: %v %s", err, body)
	}
	if r := st.RemoteRegions[0]; r.Name != "b" || !r.HasData || r.Instances != 2 || r.LastFetch == "" {
		t.Fatalf("admin status region: %+v", r)
	}
	if _, page, _ := httpGet("http://" + a.Addr() + "/"); !strings.Contains(page, `<table id="regions">`) {
		t.Fatalf("dashboard lacks the remote region:\n%s", page)
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
	clock := registrytest.NewClock()
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
		doc, _ := regionstest.FetchDoc(t, "http://"+n.Addr()+"/eureka/apps?regions=b", false, nil)
		if ids := regionstest.CopyOf(doc).IDs(); fmt.Sprint(ids) != "[ORDERS/o1=UP@b ORDERS/x1=UP@ PAYMENTS/p1=UP@b]" {
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
	if plain, _ := regionstest.FetchDoc(t, "http://"+a1.Addr()+"/eureka/apps", false, nil); !strings.Contains(fmt.Sprint(regionstest.CopyOf(plain).IDs()), "PAYMENTS/p1") {
		t.Fatalf("a1's plain read lacks the fallback: %v", regionstest.CopyOf(plain).IDs())
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
	bdoc, _ := regionstest.FetchDoc(t, "http://"+b.Addr()+"/eureka/apps?regions=a", false, nil)
	if ids := regionstest.CopyOf(bdoc).IDs(); fmt.Sprint(ids) != "[ORDERS/o1=UP@ ORDERS/x1=UP@a PAYMENTS/p1=UP@]" {
		t.Fatalf("b regions=a: %v", ids)
	}
}

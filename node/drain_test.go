package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
)

// readAs reads url as a Java client whose identity id is, as its
// EurekaIdentityHeaderFilter sends it.
func readAs(t *testing.T, url, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("DiscoveryIdentity-Name", "DefaultClient")
	req.Header.Set("DiscoveryIdentity-Version", "1.4")
	req.Header.Set("DiscoveryIdentity-Id", id)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

func drainCall(t *testing.T, method, url string) (int, drain.Receipt) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rc drain.Receipt
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &rc); err != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, body)
	}
	return resp.StatusCode, rc
}

// TestDrain_threeNodes: a drain on one node of three reports the readers
// of every node; those that read again (through any kind of read) confirm,
// and the one that stopped reading is named when the wait ends. Readers
// are real HTTP clients; only the poll interval is made short.
func TestDrain_threeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	nodes := startThreeNodes(t, "muster.drain.poll-interval-ms=20")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if code := call(t, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
		t.Fatalf("register: %d", code)
	}
	waitFor(t, 10*time.Second, "the instance on every node", func() bool {
		for _, n := range nodes {
			if _, ok := n.reg.Instance("ORDERS", "o-1"); !ok {
				return false
			}
		}
		return true
	})
	// One reader per node, each reading another way.
	readAs(t, n1.URL()+"apps/", "full@n1")
	readAs(t, n2.URL()+"apps/ORDERS", "app@n2")
	readAs(t, n3.URL()+"vips/orders", "vip@n3")

	code, rc := drainCall(t, http.MethodPost, "http://"+n2.Addr()+"/admin/drain/ORDERS/o-1")
	if code != http.StatusAccepted || rc.Readers != 3 || rc.Confirmed != 0 || len(rc.Nodes) != 3 {
		t.Fatalf("drain on n2: %d %+v, want 3 readers, one a node, none confirmed", code, rc)
	}
	byNode := map[string]string{}
	for _, p := range rc.Pending {
		byNode[p.Node] = p.Client
	}
	if byNode["n1"] != "DefaultClient/1.4 (full@n1)" || byNode["n2"] != "DefaultClient/1.4 (app@n2)" || byNode["n3"] != "DefaultClient/1.4 (vip@n3)" {
		t.Fatalf("pending by node: %v", byNode)
	}

	// Every node serves the instance OUT_OF_SERVICE once the mark arrives.
	waitFor(t, 10*time.Second, "the drain on every node", func() bool {
		for _, n := range nodes {
			if iv, _ := n.reg.Instance("ORDERS", "o-1"); iv.Status != registry.StatusOutOfService {
				return false
			}
		}
		return true
	})
	// Two readers read again (a delta, an app read); the third stopped.
	readAs(t, n1.URL()+"apps/delta", "full@n1")
	readAs(t, n2.URL()+"apps/ORDERS", "app@n2")
	code, rc = drainCall(t, http.MethodPost, "http://"+n1.Addr()+"/admin/drain/ORDERS/o-1?wait=300ms")
	if code != http.StatusAccepted || rc.Readers != 3 || rc.Confirmed != 2 || len(rc.Pending) != 1 {
		t.Fatalf("after the wait: %d %+v, want 2 of 3 confirmed", code, rc)
	}
	if p := rc.Pending[0]; p.Client != "DefaultClient/1.4 (vip@n3)" || p.Node != "n3" || p.Address != "127.0.0.1" || p.LastRead == 0 {
		t.Fatalf("pending reader %+v, want the VIP reader of n3", p)
	}

	// It reads again while a drain waits: complete, 200.
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Most likely while the drain below waits; before it, the drain
		// answers complete at once, which the test accepts as well.
		time.Sleep(100 * time.Millisecond)
		readAs(t, n3.URL()+"vips/orders", "vip@n3")
	}()
	code, rc = drainCall(t, http.MethodPost, "http://"+n3.Addr()+"/admin/drain/ORDERS/o-1?wait=20s")
	<-done
	if code != http.StatusOK || !rc.Complete || rc.Confirmed != 3 {
		t.Fatalf("after the last read: %d %+v", code, rc)
	}

	// Undrained on one node: served UP everywhere, listed nowhere.
	if code, _ := drainCall(t, http.MethodDelete, "http://"+n3.Addr()+"/admin/drain/ORDERS/o-1"); code != http.StatusOK {
		t.Fatalf("undrain: %d", code)
	}
	waitFor(t, 10*time.Second, "the undrain on every node", func() bool {
		for _, n := range nodes {
			iv, _ := n.reg.Instance("ORDERS", "o-1")
			if iv.Status != registry.StatusUp || len(n.reg.Drained()) != 0 {
				return false
			}
		}
		return true
	})
	if code, _ := drainCall(t, http.MethodGet, "http://"+n1.Addr()+"/admin/drain"); code != http.StatusOK {
		t.Fatalf("list: %d", code)
	}
}

// A peer that cannot be asked is named, never left out.
func TestDrain_unreachablePeerIsPending(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	down := "http://127.0.0.1:" + strconv.Itoa(freeTCPPort(t)) + "/eureka/"
	n := startTestNode(t, "solo", "zone-a", nil, "eureka.client.service-url.defaultZone="+down, "eureka.client.register-with-eureka=false")
	waitOpened(t, n)
	if code := call(t, "POST", n.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
		t.Fatalf("register: %d", code)
	}
	code, rc := drainCall(t, http.MethodPost, "http://"+n.Addr()+"/admin/drain/ORDERS/o-1")
	if code != http.StatusAccepted || rc.Complete || len(rc.Pending) != 1 || rc.Pending[0].Client != drain.ClientUnreachable ||
		!strings.Contains(rc.Pending[0].Node, "127.0.0.1") {
		t.Fatalf("drain with a peer down: %d %+v", code, rc)
	}
}

// A resolver that asked for the app's addresses is a reader; it confirms
// by asking again after the drain.
func TestDrain_dnsResolverIsAReader(t *testing.T) {
	n := startTestNode(t, "dnsdrain", "z1", nil, "muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")
	waitOpened(t, n)
	if code := call(t, "POST", n.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
		t.Fatalf("register: %d", code)
	}
	ask := func() int {
		t.Helper()
		m := new(mdns.Msg)
		m.SetQuestion("orders.app.muster.", mdns.TypeA)
		in, _, err := (&mdns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dnsListen())
		if err != nil {
			t.Fatal(err)
		}
		return len(in.Answer)
	}
	// DNS serves an app from the per-app answers the change stream builds:
	// right after the registration the answer may not hold it yet, and
	// only an answer that holds the app makes the resolver its reader.
	waitFor(t, 10*time.Second, "a DNS answer holding the instance, its resolver noted", func() bool {
		return ask() > 0 && len(n.drainer().Readers().Of("ORDERS", 0, 0)) == 1
	})
	code, rc := drainCall(t, http.MethodPost, "http://"+n.Addr()+"/admin/drain/ORDERS/o-1")
	if code != http.StatusAccepted || len(rc.Pending) != 1 || rc.Pending[0].Client != "DNS resolver" || rc.Pending[0].Address != "127.0.0.1" {
		t.Fatalf("drain after a DNS answer: %d %+v", code, rc)
	}
	// DNS answers from per-app messages the change stream rebuilds: an
	// answer given before the rebuild is of the version before the drain
	// and confirms nothing, so the resolver asks until one does, as a
	// real one asks again when its TTL ends.
	waitFor(t, 10*time.Second, "the resolver's answer after the drain to confirm it", func() bool {
		ask()
		code, rc := drainCall(t, http.MethodGet, "http://"+n.Addr()+"/admin/drain/ORDERS/o-1")
		return code == http.StatusOK && rc.Confirmed == 1
	})
}

// An xDS client that acknowledged the app's endpoints is a reader; it
// confirms by acknowledging the version without the drained instance.
func TestDrain_xdsClientIsAReader(t *testing.T) {
	for _, tc := range []struct {
		name, client string
		watch        func(*testing.T, string, string) <-chan []string
	}{
		{"state of the world", "xds ads-", adsWatch},
		{"incremental", "xds delta-", adsDeltaWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startTestNode(t, "xdsdrain", "z1", nil, "muster.xds.enabled=true", "muster.xds.addr=127.0.0.1:0")
			waitOpened(t, n)
			registerOrder(t, n, "o-1", 7001, "z1")
			registerOrder(t, n, "o-2", 7002, "z1")
			ch := tc.watch(t, n.xdsListen(), "orders")
			waitEndpoints(t, ch, "both instances", "127.0.0.1:7001", "127.0.0.1:7002")
			testwait.True(t, 10*time.Second, "the acknowledgement noted", func() bool {
				return len(n.drainer().Readers().Of("ORDERS", 0, 0)) == 1
			})
			if r := n.drainer().Readers().Of("ORDERS", 0, 0)[0]; !strings.HasPrefix(r.Client, tc.client) || r.Address != "127.0.0.1" {
				t.Fatalf("the xDS client as a reader: %+v", r)
			}
			// The push of the drained assignment and its acknowledgement
			// can beat the receipt the POST answers: pending or confirmed,
			// the client is the one reader.
			code, rc := drainCall(t, http.MethodPost, "http://"+n.Addr()+"/admin/drain/ORDERS/o-1")
			pendingXDS := code == http.StatusAccepted && len(rc.Pending) == 1 && strings.HasPrefix(rc.Pending[0].Client, tc.client) && rc.Pending[0].Address == "127.0.0.1"
			confirmed := code == http.StatusOK && rc.Readers == 1 && rc.Confirmed == 1
			if !pendingXDS && !confirmed {
				t.Fatalf("drain with an xDS client: %d %+v", code, rc)
			}
			waitEndpoints(t, ch, "the drained instance gone", "127.0.0.1:7002")
			testwait.True(t, 10*time.Second, "the xDS client to confirm", func() bool {
				code, _ := drainCall(t, http.MethodGet, "http://"+n.Addr()+"/admin/drain/ORDERS/o-1")
				return code == http.StatusOK
			})
		})
	}
}

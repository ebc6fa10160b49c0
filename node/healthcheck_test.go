package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/registry"
)

// healthBackend is an HTTP server on loopback whose health the test
// switches.
type healthBackend struct {
	healthy  atomic.Bool
	requests atomic.Int64
	port     int
}

func newHealthBackend(t *testing.T) *healthBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &healthBackend{port: ln.Addr().(*net.TCPAddr).Port}
	b.healthy.Store(true)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.requests.Add(1)
		if !b.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func healthInstanceBody(id string, port int) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"localhost","app":"SVC","ipAddr":"127.0.0.1","status":"UP",
"port":{"$":%d,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"healthCheckUrl":"http://127.0.0.1:%d/actuator/health","vipAddress":"svc"}}`, id, port, port)
}

// getJSON fetches url as JSON into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

type appDoc struct {
	Application struct {
		Instance []struct {
			InstanceID string `json:"instanceId"`
			Status     string `json:"status"`
			ActionType string `json:"actionType"`
		} `json:"instance"`
	} `json:"application"`
}

func statusesOf(t *testing.T, url string) map[string]string {
	t.Helper()
	var doc appDoc
	getJSON(t, url, &doc)
	out := map[string]string{}
	for _, in := range doc.Application.Instance {
		out[in.InstanceID] = in.Status
	}
	return out
}

// The node wired end to end: settings, the checker's rounds (driven here
// instead of by its timer), and what clients, /admin/status, the console
// and /metrics show.
func TestNode_healthChecks(t *testing.T) {
	n := startTestNode(t, "hc", "z1", nil,
		"muster.health-check.enabled=true", "muster.health-check.apps=svc",
		"muster.health-check.interval-ms=3600000", "muster.health-check.allowed-cidrs=127.0.0.0/8",
		"muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0")
	waitOpened(t, n)
	if n.health == nil {
		t.Fatal("muster.health-check.enabled=true built no checker")
	}
	base := "http://" + n.Addr() + "/eureka"
	backends := map[string]*healthBackend{}
	for _, id := range []string{"a", "b", "c"} {
		backends[id] = newHealthBackend(t)
		if code := call(t, http.MethodPost, base+"/apps/SVC", healthInstanceBody(id, backends[id].port)); code != http.StatusNoContent {
			t.Fatalf("register %s: %d", id, code)
		}
	}
	srvRecords := func() int {
		t.Helper()
		m := new(mdns.Msg)
		m.SetQuestion("_svc._tcp.app.muster.", mdns.TypeSRV)
		r, _, err := (&mdns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, n.dnsListen())
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Answer)
	}
	if got := srvRecords(); got != 3 {
		t.Fatalf("DNS SRV before: %d records, want 3", got)
	}
	backends["b"].healthy.Store(false)
	for range 2 {
		n.health.Round(context.Background())
	}
	// A blocking fetch of the app and a watch stream, both waiting when
	// the third failed round marks b.
	// The first watch starts the node's watch hub: index 0 is answered at
	// once with the index to wait on, as the Go client's first fetch is.
	req, _ := http.NewRequest(http.MethodGet, base+"/apps/SVC?index=0&wait=1s", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	index := resp.Header.Get("X-Muster-Index")
	held := make(chan map[string]string, 1)
	go func() {
		var doc appDoc
		req, _ := http.NewRequest(http.MethodGet, base+"/apps/SVC?index="+index+"&wait=30s", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
		}
		out := map[string]string{}
		for _, in := range doc.Application.Instance {
			out[in.InstanceID] = in.Status
		}
		held <- out
	}()
	stream, err := (&http.Client{}).Get(base + "/watch?app=svc")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	sawDown := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "data:") && strings.Contains(line, `"instanceId":"b"`) && strings.Contains(line, `"status":"DOWN"`) {
				sawDown <- true
				return
			}
		}
		sawDown <- false
	}()
	waitFor(t, 5*time.Second, "the blocking fetch to be held", func() bool {
		select {
		case st := <-held:
			t.Fatalf("the blocking fetch (index %s) was answered before the mark: %v", index, st)
		default:
		}
		return metricValue(t, n, "muster_watch_held_requests") == 1
	})
	n.health.Round(context.Background())
	select {
	case st := <-held:
		if st["b"] != "DOWN" {
			t.Errorf("the held fetch answered %v, want b DOWN", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("the held fetch was not woken by the mark")
	}
	select {
	case ok := <-sawDown:
		if !ok {
			t.Error("the watch stream ended without b DOWN")
		}
	case <-time.After(10 * time.Second):
		t.Error("the watch stream sent no event for the mark")
	}
	if got := srvRecords(); got != 2 {
		t.Errorf("DNS SRV after the mark: %d records, want 2 (DNS answers UP instances)", got)
	}

	if st := statusesOf(t, base+"/apps/SVC"); st["b"] != "DOWN" || st["a"] != "UP" || st["c"] != "UP" {
		t.Fatalf("GET /apps/SVC: %v, want b DOWN, a and c UP", st)
	}
	type appsDoc struct {
		Applications struct {
			Application []struct {
				Instance []struct {
					InstanceID, Status, ActionType string
				} `json:"instance"`
			} `json:"application"`
		} `json:"applications"`
	}
	var vip, delta appsDoc
	getJSON(t, base+"/vips/svc", &vip)
	if !strings.Contains(fmt.Sprint(vip), "b DOWN") {
		t.Errorf("GET /vips/svc: %+v, want b DOWN", vip)
	}
	getJSON(t, base+"/apps/delta", &delta)
	if !strings.Contains(fmt.Sprint(delta), "b DOWN MODIFIED") {
		t.Errorf("GET /apps/delta: %+v, want b DOWN MODIFIED", delta)
	}

	var status struct {
		HealthChecks struct {
			Enabled   bool   `json:"enabled"`
			Ownership string `json:"ownership"`
			Marked    []struct {
				ID, Reason, MarkedBy, ProbedBy string
			} `json:"marked"`
			Probes []struct {
				ID, State, LastResult string
			} `json:"probes"`
		} `json:"healthChecks"`
	}
	getJSON(t, "http://"+n.Addr()+"/admin/status", &status)
	hc := status.HealthChecks
	if !hc.Enabled || len(hc.Marked) != 1 || hc.Marked[0].ID != "b" || hc.Marked[0].Reason != "http 503" ||
		hc.Marked[0].MarkedBy != "hc" || hc.Marked[0].ProbedBy != "hc" || !strings.Contains(hc.Ownership, "rendezvous") {
		t.Errorf("/admin/status healthChecks: %+v", hc)
	}
	if len(hc.Probes) != 1 || hc.Probes[0].State != "down" {
		t.Errorf("/admin/status probes: %+v, want b down", hc.Probes)
	}
	code, page, err := httpGet("http://" + n.Addr() + "/console/apps/SVC")
	if err != nil || code != http.StatusOK || !strings.Contains(page, "marked DOWN: http 503") || !strings.Contains(page, "probed here (http): down") {
		t.Errorf("console app page: %d %v; want the mark and the probe state in the instance table", code, err)
	}
	if v := metricValue(t, n, `muster_health_check_flips_total{to="down"}`); v != 1 {
		t.Errorf("flips to down = %v, want 1", v)
	}

	// It passes again: UP after successes-before-up rounds.
	backends["b"].healthy.Store(true)
	for range 2 {
		n.health.Round(context.Background())
	}
	if st := statusesOf(t, base+"/apps/SVC"); st["b"] != "UP" {
		t.Fatalf("after 2 passed rounds: %v, want b UP", st)
	}
}

// Three real nodes (memberlist on loopback, replication over HTTP): the
// app's prober marks a failing instance and every node serves it DOWN;
// the prober shuts down, memberlist tells the others, and one survivor
// takes the app over at its next round, keeping the mark until the
// instance passes.
func TestCluster_healthChecksHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	sets := []string{"muster.health-check.enabled=true", "muster.health-check.apps=svc",
		"muster.health-check.interval-ms=3600000", "muster.health-check.allowed-cidrs=127.0.0.0/8"}
	n1 := startTestNode(t, "n1", "z1", nil, sets...)
	seed := n1.gossipAddr(t)
	n2 := startTestNode(t, "n2", "z1", []string{seed}, sets...)
	n3 := startTestNode(t, "n3", "z1", []string{seed}, sets...)
	nodes := map[string]*Node{"n1": n1, "n2": n2, "n3": n3}
	waitOpened(t, n1, n2, n3)
	waitFor(t, 15*time.Second, "every node to see three live members", func() bool {
		for _, n := range nodes {
			if len(n.liveMemberNames()) != 3 {
				return false
			}
		}
		return true
	})
	backends := map[string]*healthBackend{}
	for _, id := range []string{"a", "b", "c"} {
		backends[id] = newHealthBackend(t)
		if code := call(t, http.MethodPost, n1.URL()+"apps/SVC", healthInstanceBody(id, backends[id].port)); code != http.StatusNoContent {
			t.Fatalf("register %s: %d", id, code)
		}
	}
	statusEverywhere := func(want registry.Status) func() bool {
		return func() bool {
			for _, n := range nodes {
				if iv, ok := n.reg.Instance("SVC", "b"); !ok || iv.Status != want {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "the three instances on every node", func() bool {
		for _, n := range nodes {
			if n.reg.Len() != 3 {
				return false
			}
		}
		return true
	})

	// One round on every node: only the app's owner probes.
	round := func() (probed int, by []string) {
		for name, n := range nodes {
			if res := n.health.Round(context.Background()); res.Probed > 0 {
				probed += res.Probed
				by = append(by, name)
			}
		}
		return probed, by
	}
	backends["b"].healthy.Store(false)
	var owner string
	for range 3 {
		probed, by := round()
		if probed != 3 || len(by) != 1 {
			t.Fatalf("a round probed %d instances on %v, want 3 on one node", probed, by)
		}
		owner = by[0]
	}
	waitFor(t, 10*time.Second, "b DOWN on every node", statusEverywhere(registry.StatusDown))

	// The prober goes; the survivors learn it from memberlist.
	victim := nodes[owner]
	delete(nodes, owner)
	if err := victim.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the survivors to see two live members", func() bool {
		for _, n := range nodes {
			if len(n.liveMemberNames()) != 2 {
				return false
			}
		}
		return true
	})
	before := backends["a"].requests.Load() + backends["b"].requests.Load() + backends["c"].requests.Load()
	probed, by := round()
	if probed != 3 || len(by) != 1 || by[0] == owner {
		t.Fatalf("after the prober left: %d probed on %v, want 3 on one survivor", probed, by)
	}
	if got := backends["a"].requests.Load() + backends["b"].requests.Load() + backends["c"].requests.Load() - before; got != 3 {
		t.Fatalf("%d requests in the round, want one per instance", got)
	}
	if iv, _ := nodes[by[0]].reg.Instance("SVC", "b"); iv.Status != registry.StatusDown {
		t.Fatalf("the new prober lifted the mark of a failing instance: %s", iv.Status)
	}
	backends["b"].healthy.Store(true)
	round()
	round()
	waitFor(t, 10*time.Second, "b UP on the survivors", statusEverywhere(registry.StatusUp))
}

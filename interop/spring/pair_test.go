package spring

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/interop/interoptest"
)

// TestBoot4AndBoot3_findEachOther is the promise to a Spring team: a
// Spring Boot 4 app and a Spring Boot 3 app, unchanged but for the service
// URL, register with two Muster nodes (static peers), find each other
// through Spring's DiscoveryClient, and keep finding each other through an
// eviction, a node restarted without a data dir, an operator's cancel and
// a failover between the nodes.
func TestBoot4AndBoot3_findEachOther(t *testing.T) {
	ports := []int{interoptest.FreePort(t), interoptest.FreePort(t)}
	var nodes []*interoptest.Node
	for i := range ports {
		n := evictingNode(t, fmt.Sprintf("eureka.client.service-url.defaultZone=http://127.0.0.1:%d/eureka/", ports[1-i]))
		n.Port = ports[i]
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.Start()
	}
	// Each app has its own taps, so that one can be cut off alone; the
	// Boot 4 app lists node 0 first, the Boot 3 app node 1.
	tapsFor := func(order ...int) ([]*interoptest.WireTap, []string) {
		var taps []*interoptest.WireTap
		var urls []string
		for _, i := range order {
			tap := interoptest.NewWireTap(t, nodes[i].Base())
			taps = append(taps, tap)
			urls = append(urls, tap.URL()+"/eureka/")
		}
		return taps, urls
	}
	taps4, urls4 := tapsFor(0, 1)
	taps3, urls3 := tapsFor(1, 0)
	boot4 := startApp(t, clients[0], "orders", urls4, nil)
	boot3 := startApp(t, clients[2], "billing", urls3, nil)
	dump := func() string {
		return "Boot 4 app's exchanges:\n" + wire(taps4[0], 0) + wire(taps4[1], 0) +
			"Boot 3 app's exchanges:\n" + wire(taps3[0], 0) + wire(taps3[1], 0)
	}
	findEachOther := func(what string) {
		t.Helper()
		for _, p := range []struct{ from, to *app }{{boot4, boot3}, {boot3, boot4}} {
			var last error
			if !poll(60*time.Second, func() error {
				st, err := p.from.state()
				if err != nil {
					last = err
					return err
				}
				ids := st.Services[p.to.App] // Spring lower-cases service ids; try both
				if ids == nil {
					for k, v := range st.Services {
						if strings.EqualFold(k, p.to.App) {
							ids = v
						}
					}
				}
				s := st.find(p.to.App, p.to.ID)
				if len(ids) != 1 || ids[0] != p.to.ID || s == nil || s.Status != "UP" || s.Port != p.to.Port {
					last = fmt.Errorf("Spring's DiscoveryClient has %v for %s, the Eureka client %+v", ids, p.to.App, s)
					return last
				}
				return nil
			}) {
				t.Fatalf("%s: %s does not find %s: %v\n%s", what, p.from.App, p.to.App, last, dump())
			}
		}
	}
	findEachOther("at start")

	// An eviction: the Boot 4 app is cut off from both nodes until they
	// drop it, then heals.
	for _, tap := range taps4 {
		tap.SetCut(true)
	}
	for _, n := range nodes {
		waitGoneFromNode(t, n, n.URL(), nil, 0, boot4, "the cut-off Boot 4 app evicted")
	}
	for _, tap := range taps4 {
		tap.SetCut(false)
	}
	findEachOther("after an eviction")

	// A node restarted without a data dir.
	nodes[1].Stop()
	nodes[1].Start()
	findEachOther("after node 1 restarted empty")

	// An operator's cancel of each app.
	for _, a := range []*app{boot4, boot3} {
		if code, b, err := nodeCall(nodes[0], http.MethodDelete, nodes[0].URL()+"apps/"+a.App+"/"+a.ID); err != nil || code != http.StatusOK {
			t.Fatalf("operator cancel of %s: %d %v %s", a.App, code, err, b)
		}
	}
	findEachOther("after an operator's cancel")

	// Failover: node 0 dies; both apps carry on with node 1.
	nodes[0].Stop()
	findEachOther("with node 0 down")
	for _, a := range []*app{boot4, boot3} {
		waitOnNode(t, nodes[1], nil, 0, a, "on the surviving node", nodeStatusIs("UP"))
	}
}

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
// through Spring's DiscoveryClient and call each other by name (Spring
// Cloud LoadBalancer), and keep doing so through an eviction, a node
// restarted without a data dir, an operator's cancel and a failover
// between the nodes.
func TestBoot4AndBoot3_findEachOther(t *testing.T) {
	for _, c := range []client{clients[0], clients[2]} {
		interoptest.Built(t, interoptest.Source(t, c.src)) // skips here, before any node starts
	}
	nodes := startPeeredPair(t, func(sets ...string) *interoptest.Node { return evictingNode(t, sets...) })
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
	var boot4, boot3 *app
	for i := range taps4 {
		logWire(t, taps4[i], func() *app { return boot4 })
		logWire(t, taps3[i], func() *app { return boot3 })
	}
	boot4 = startApp(t, clients[0], "orders", urls4, nil)
	boot3 = startApp(t, clients[2], "billing", urls3, nil)
	dump := func() string {
		return "Boot 4 app's exchanges:\n" + wire(taps4[0], 0) + wire(taps4[1], 0) +
			"Boot 3 app's exchanges:\n" + wire(taps3[0], 0) + wire(taps3[1], 0)
	}
	// findEachOther waits until both apps are UP on every live node (they
	// registered, again if they had to, and the nodes replicated it), then
	// until each app's Spring DiscoveryClient hands out the other.
	findEachOther := func(what string, live ...*interoptest.Node) {
		t.Helper()
		for _, n := range live {
			for _, a := range []*app{boot4, boot3} {
				var last error
				if !poll(60*time.Second, func() error {
					i, err := getInstance(n, n.URL(), a.App, a.ID)
					if err == nil {
						err = nodeStatusIs("UP")(i)
					}
					last = err
					return err
				}) {
					t.Fatalf("%s: %s is not UP on the node on port %d: %v\n%s", what, a.App, n.Port, last, dump())
				}
			}
		}
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
			// And calls it by name, through Spring Cloud LoadBalancer.
			var got string
			if !poll(30*time.Second, func() error {
				code, b, err := getText(p.from, "/control/call?service="+strings.ToLower(p.to.App))
				got = fmt.Sprintf("%d %s %v", code, b, err)
				if err != nil || code != http.StatusOK || string(b) != p.to.ID {
					return fmt.Errorf("%s", got)
				}
				return nil
			}) {
				t.Fatalf("%s: %s cannot call %s by name: %s\n%s", what, p.from.App, p.to.App, got, dump())
			}
		}
	}
	findEachOther("at start", nodes...)

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
	findEachOther("after an eviction", nodes...)

	// A node restarted without a data dir.
	nodes[1].Stop()
	nodes[1].Start()
	findEachOther("after node 1 restarted empty", nodes...)

	// An operator's cancel of each app.
	for _, a := range []*app{boot4, boot3} {
		if code, b, err := nodeCall(nodes[0], http.MethodDelete, nodes[0].URL()+"apps/"+a.App+"/"+a.ID); err != nil || code != http.StatusOK {
			_, apps0, _ := nodeCall(nodes[0], http.MethodGet, nodes[0].URL()+"apps")
			_, apps1, _ := nodeCall(nodes[1], http.MethodGet, nodes[1].URL()+"apps")
			t.Fatalf("operator cancel of %s: %d %v %s\nnode 0: %s\nnode 1: %s\n%s", a.App, code, err, b, apps0, apps1, dump())
		}
	}
	findEachOther("after an operator's cancel", nodes...)

	// Failover: node 0 dies; both apps carry on with node 1.
	nodes[0].Stop()
	findEachOther("with node 0 down", nodes[1])
}

package spring

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/muster-registry/muster/interop/interoptest"
)

// TestClients_contextPath: a node started with
// server.servlet.context-path=/register, as a Spring Cloud Eureka Server
// under a context path is, and clients whose service URL is
// http://127.0.0.1:PORT/register/eureka/: a Spring Boot 4 app (RestClient)
// and eureka-client 2.0 alone (Jersey 3) register, heartbeat, fetch (full
// and deltas) and cancel at shutdown there. Every
// exchange must stay under /register/eureka/ and none may answer 404 (a
// client that lost the path, or a node that does not serve it, gets 404
// and re-registers for ever). Status changes and overrides are left out:
// they may draw a legitimate heartbeat 404 (a newer lastDirtyTimestamp, an
// override removed), and the lifecycle scenario covers them.
func TestClients_contextPath(t *testing.T) {
	for _, c := range []client{clients[0], clients[4]} {
		c := c
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			interoptest.Built(t, interoptest.Source(t, c.src)) // skips here, before the node starts
			takeJVMSlot(t)
			node := interoptest.NewNode(t, "server.servlet.context-path=/register").Start()
			eurekaURL := node.Base() + "/register/eureka/"
			if code, _, err := nodeCall(node, http.MethodGet, node.URL()+"apps"); err != nil || code != http.StatusNotFound {
				t.Fatalf("GET /eureka/apps on a node under /register: %d %v; want 404 (is the context path on?)", code, err)
			}
			tap := interoptest.NewWireTap(t, node.Base())
			var a *app
			logWire(t, tap, func() *app { return a })
			a = startApp(t, c, c.name+"-ctx", []string{tap.URL() + "/register/eureka/"}, nil)
			apps := `^/register/eureka/apps/`
			self := apps + regexp.QuoteMeta(a.App) + "/" + regexp.QuoteMeta(a.ID) + "$"

			waitOnNodeURL(t, node, eurekaURL, tap, 0, a, "registered UP under /register", nodeStatusIs("UP"))
			mustSee(t, tap, 0, "POST", apps+regexp.QuoteMeta(a.App)+"$", ok204, "the registration")
			mustSee(t, tap, 0, "GET", apps+"?$", ok200, "the full fetch")
			mustSee(t, tap, 0, "GET", apps+"delta$", ok200, "a delta fetch")
			for i := 0; i < 2; i++ {
				mustSee(t, tap, tap.Len(), "PUT", self, ok200, "a heartbeat")
			}
			a.waitSees(a.App, a.ID, "itself UP", statusIs("UP"))

			mark := tap.Len()
			a.Stop()
			mustSee(t, tap, mark, "DELETE", self, ok200, "the cancel at shutdown")
			waitGoneFromNode(t, node, eurekaURL, tap, mark, a, "cancelled at shutdown")

			var bad []string
			for _, e := range tap.Since(0) {
				if e.Status == http.StatusNotFound || !strings.HasPrefix(e.Path, "/register/eureka/") {
					bad = append(bad, e.String())
				}
			}
			if len(bad) > 0 {
				t.Fatalf("exchanges outside /register/eureka/ or answered 404:\n%s\n%s", strings.Join(bad, "\n"), wire(tap, 0))
			}
			noErrors(t, tap, c.name)
		})
	}
}

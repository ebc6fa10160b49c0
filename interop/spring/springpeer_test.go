package spring

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/interop/interoptest"
)

// startSpringServer starts the Spring Cloud Eureka Server 5.0 app of
// interop/spring/eureka-server on port with peerURL as its only static
// peer, peer-aware as a team's application.yml makes it (syncUp at start,
// replication to the peer), its read-only response cache refreshed every
// second instead of 30 s, and waits until it serves GET apps.
// (interop/springserver runs the same app as Muster's peer with Go
// clients; this is the same command line with Spring apps as clients.)
func startSpringServer(t *testing.T, port int, peerURL string) *interoptest.Process {
	t.Helper()
	dir := interoptest.Built(t, interoptest.Source(t, "interop/spring/eureka-server"))
	self := "http://127.0.0.1:" + strconv.Itoa(port) + "/eureka/"
	args := append(append([]string{"-Djava.io.tmpdir=" + t.TempDir()}, jvmFlags...),
		"-XX:ReservedCodeCacheSize=64m", "-jar", filepath.Join(dir, "target", "eureka-server.jar"),
		"--server.port="+strconv.Itoa(port),
		"--server.address=127.0.0.1",
		"--eureka.instance.hostname=127.0.0.1",
		// The peer shares the host name 127.0.0.1: without its own URL
		// the server would drop its peer as itself.
		"--eureka.server.my-url="+self,
		"--eureka.client.service-url.defaultZone="+peerURL,
		"--eureka.client.fetch-registry=true",
		"--eureka.client.registry-fetch-interval-seconds=5",
		"--eureka.server.registry-sync-retries=3",
		"--eureka.server.registry-sync-retry-wait-ms=1000",
		"--eureka.server.wait-time-in-ms-when-sync-empty=0",
		"--eureka.server.response-cache-update-interval-ms=1000",
		"--logging.level.root=WARN",
		"--logging.level.com.netflix.eureka.registry=INFO")
	proc := interoptest.Start(t, "spring eureka server :"+strconv.Itoa(port), exec.Command("java", args...))
	interoptest.WaitReady(t, proc, "the Spring Eureka server on port "+strconv.Itoa(port), 150*time.Second, "the Spring Eureka server on "+self+" answers GET apps", func() error {
		return interoptest.StatusOK(http.Get(self + "apps"))
	})
	return proc
}

// discovers waits until from's Spring DiscoveryClient hands out to (its
// one instance, UP, on its port), or, with present false, no instance of
// to at all, in Spring's view and in the Eureka client's registry alike.
func discovers(t *testing.T, from, to *app, present bool, what string, dump func() string) {
	t.Helper()
	var last error
	if !poll(60*time.Second, func() error {
		st, err := from.state()
		if err != nil {
			last = err
			return err
		}
		var ids []string
		for k, v := range st.Services { // Spring lower-cases service ids
			if strings.EqualFold(k, to.App) {
				ids = v
			}
		}
		s := st.find(to.App, to.ID)
		if present && (len(ids) != 1 || ids[0] != to.ID || s == nil || s.Status != "UP" || s.Port != to.Port) {
			last = fmt.Errorf("Spring's DiscoveryClient has %v for %s, the Eureka client %+v", ids, to.App, s)
			return last
		}
		if !present && (len(ids) != 0 || s != nil) {
			last = fmt.Errorf("Spring's DiscoveryClient still has %v for %s, the Eureka client %+v", ids, to.App, s)
			return last
		}
		return nil
	}) {
		t.Fatalf("%s: %v\n%s", what, last, dump())
	}
}

// TestBoot4OnSpringServer_Boot3OnMuster_findEachOther: a Spring Cloud
// Eureka Server 5.0 and a Muster node are each other's static peers; a
// Spring Boot 4 app registers with the Spring server only, a Spring Boot 3
// app with the Muster node only. Each finds the other through Spring's
// DiscoveryClient and calls it by name (Spring Cloud LoadBalancer): what
// the other server replicated to its own. When one app stops, its cancel
// replicates and the other app sees it gone; in both directions (the Boot
// 4 app stops, comes back, then the Boot 3 app stops).
func TestBoot4OnSpringServer_Boot3OnMuster_findEachOther(t *testing.T) {
	for _, src := range []string{clients[0].src, clients[2].src, "interop/spring/eureka-server"} {
		interoptest.Built(t, interoptest.Source(t, src)) // skips here, before any server starts
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("SKIP: no java on PATH")
	}
	springPort := interoptest.FreePort(t)
	// Both peer links run through taps: a failure shows the replication wire.
	toSpring := interoptest.NewWireTap(t, "http://127.0.0.1:"+strconv.Itoa(springPort))
	node := interoptest.NewNode(t, "eureka.client.service-url.defaultZone="+toSpring.URL()+"/eureka/",
		"eureka.server.registry-sync-retries=1", "eureka.server.wait-time-in-ms-when-sync-empty=0",
		"muster.cold-start-wait-ms=0").Start()
	toMuster := interoptest.NewWireTap(t, node.Base())
	startSpringServer(t, springPort, toMuster.URL()+"/eureka/")

	tap4 := interoptest.NewWireTap(t, "http://127.0.0.1:"+strconv.Itoa(springPort))
	tap3 := interoptest.NewWireTap(t, node.Base())
	var boot4, boot3 *app
	logWire(t, tap4, func() *app { return boot4 })
	logWire(t, tap3, func() *app { return boot3 })
	dump := func() string {
		return "Boot 4 app ↔ Spring server:\n" + wire(tap4, 0) + "Boot 3 app ↔ Muster:\n" + wire(tap3, 0) +
			"Muster → Spring server (replication):\n" + interoptest.Tail(toSpring.Dump(0), 3000) +
			"Spring server → Muster (replication):\n" + interoptest.Tail(toMuster.Dump(0), 3000)
	}
	start4 := func() { boot4 = startApp(t, clients[0], "orders", []string{tap4.URL() + "/eureka/"}, nil) }
	start4()
	boot3 = startApp(t, clients[2], "billing", []string{tap3.URL() + "/eureka/"}, nil)

	findEachOther := func(what string) {
		t.Helper()
		discovers(t, boot4, boot3, true, what+": the Boot 4 app on the Spring server finds the Boot 3 app on Muster", dump)
		discovers(t, boot3, boot4, true, what+": the Boot 3 app on Muster finds the Boot 4 app on the Spring server", dump)
		for _, p := range []struct{ from, to *app }{{boot4, boot3}, {boot3, boot4}} {
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
	findEachOther("at start")

	// The Boot 4 app stops: it cancels on the Spring server, which
	// replicates the cancel to Muster, where the Boot 3 app fetches.
	gone := boot4
	boot4.Stop()
	mustSee(t, tap4, 0, "DELETE", appPath(gone, "/"+gone.ID), ok200, "the Boot 4 app's cancel on the Spring server")
	discovers(t, boot3, gone, false, "the Boot 3 app on Muster sees the stopped Boot 4 app gone", dump)
	if len(toMuster.Find(0, http.MethodPost, "/peerreplication/batch")) == 0 {
		t.Fatalf("the Spring server sent no replication batch to Muster\n%s", dump())
	}

	// It comes back; then the Boot 3 app stops: Muster replicates its
	// cancel to the Spring server, where the Boot 4 app fetches.
	start4()
	findEachOther("after the Boot 4 app's restart")
	gone = boot3
	boot3.Stop()
	mustSee(t, tap3, 0, "DELETE", appPath(gone, "/"+gone.ID), ok200, "the Boot 3 app's cancel on Muster")
	discovers(t, boot4, gone, false, "the Boot 4 app on the Spring server sees the stopped Boot 3 app gone", dump)
	if len(toSpring.Find(0, http.MethodPost, "/peerreplication/batch")) == 0 {
		t.Fatalf("Muster sent no replication batch to the Spring server\n%s", dump())
	}
	noErrors(t, tap4, "boot4 on the Spring server")
	noErrors(t, tap3, "boot3 on Muster")
}

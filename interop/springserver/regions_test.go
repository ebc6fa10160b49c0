package springserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// Issue 37's interop: a Spring Cloud Eureka Server (region "spring") and a
// Muster node (region "muster"), each the other's remote region
// (eureka.server.remote-region-urls-with-name), and a Spring Boot 4 client
// app on each side with eureka.client.region set to its own region and
// eureka.client.fetch-remote-regions-registry to the other. Each client's
// DiscoveryClient must see the other region's instance. Each server's
// fetch goes through a WireTap, and the test checks on the wire that:
//   - Muster asks the Spring server as a server (DiscoveryIdentity-Name:
//     DefaultServer) for its own region by name (regions=spring), and the
//     Spring server answers that with its local instances only: no copy of
//     Muster's own instance comes back;
//   - the Spring server's remote-region fetches of Muster get Muster's
//     local instances only (not Muster's transparent fallback, which would
//     hand the Spring server its own instance back as a remote copy).
func TestRegions_springServerAndMusterAreEachOthersRemote(t *testing.T) {
	t.Parallel()
	jar := springJar(t)
	clientDir := interoptest.Built(t, interoptest.Source(t, "interop/spring/boot4-client"))

	spring := newSpringServer(t, jar)
	muster := interoptest.NewNode(t)
	// Each server reaches the other through a tap.
	springTap := interoptest.NewWireTap(t, "http://127.0.0.1:"+strconv.Itoa(spring.port))
	musterTap := interoptest.NewWireTap(t, muster.Base())
	spring.extra = append(spring.extra,
		"--eureka.client.region=spring",
		"--eureka.server.remote-region-urls-with-name.muster="+musterTap.URL()+"/eureka/",
		"--eureka.server.remote-region-registry-fetch-interval=2",
	)
	muster.Sets = append(muster.Sets,
		"eureka.client.region=muster",
		"eureka.server.remote-region-urls-with-name.spring="+springTap.URL()+"/eureka/",
		"eureka.server.remote-region-registry-fetch-interval=1",
	)
	spring.launch()
	muster.Start()
	spring.ready()

	// One Spring Boot client app per region, each asking for the other.
	inMuster := startBootClient(t, clientDir, "in-muster", muster.URL(), "muster", "spring")
	inSpring := startBootClient(t, clientDir, "in-spring", spring.url(), "spring", "muster")

	inMuster.seesThroughDiscoveryClient(inSpring.app, inSpring.id)
	inSpring.seesThroughDiscoveryClient(inMuster.app, inMuster.id)
	// And each its own instance.
	inMuster.seesThroughDiscoveryClient(inMuster.app, inMuster.id)
	inSpring.seesThroughDiscoveryClient(inSpring.app, inSpring.id)

	// Muster's fetches of the Spring server: as a server, for the Spring
	// server's own region.
	musterFetches := fetchesOf(springTap)
	if len(musterFetches) == 0 {
		t.Fatalf("Muster never fetched the Spring server:\n%s", springTap.Dump(0))
	}
	for _, e := range musterFetches {
		if e.Header.Get("DiscoveryIdentity-Name") != "DefaultServer" || !strings.Contains(e.Query, "regions=spring") {
			t.Errorf("Muster's fetch of the Spring server is not a server's for region spring: %s %v", e, e.Header)
		}
	}
	// Replayed as Muster sent it, the Spring server answers its local
	// instances only: in-spring, and no copy of in-muster.
	for _, e := range lastFull(musterFetches) {
		ids := replay(t, spring.url(), e)
		if !equalIDs(ids, []string{inSpring.id}) {
			t.Errorf("the Spring server answers Muster's %s with %v, want only its local %s", e, ids, inSpring.id)
		}
	}

	// The Spring server's fetches of Muster.
	springFetches := fetchesOf(musterTap)
	if len(springFetches) == 0 {
		t.Fatalf("the Spring server never fetched Muster:\n%s", musterTap.Dump(0))
	}
	t.Logf("the Spring server's remote-region fetch of Muster: %s; headers %v", springFetches[0], springFetches[0].Header)
	for _, e := range springFetches {
		ids := replay(t, muster.URL(), e)
		if strings.Contains(e.Path, "delta") {
			// A delta names only what changed; it must still never name
			// the Spring server's own instance.
			for _, id := range ids {
				if id == inSpring.id {
					t.Errorf("Muster's answer to the Spring server's %s hands it its own instance back", e)
				}
			}
			continue
		}
		if !equalIDs(ids, []string{inMuster.id}) {
			t.Errorf("Muster answers the Spring server's %s with %v, want only its local %s", e, ids, inMuster.id)
		}
	}
	// Neither server holds the other's copy of its own instance: each
	// one's own instance has no muster.region mark on Muster's side and is
	// the Spring server's local one on the Spring side.
	got := waitInstance(t, spring.url(), inSpring.app, inSpring.id, "the Spring server has its own in-spring", nil)
	if got.Metadata["muster.region"] != "" {
		t.Errorf("the Spring server serves its own instance as Muster's remote copy: %v", got.Metadata)
	}
	own := waitInstance(t, muster.URL(), inMuster.app, inMuster.id, "Muster has its own in-muster", nil)
	if own.Metadata["muster.region"] != "" {
		t.Errorf("Muster serves its own instance as a remote copy: %v", own.Metadata)
	}
	// And Muster serves the Spring server's instance as region spring's.
	waitInstance(t, muster.URL(), inSpring.app, inSpring.id, "Muster serves in-spring as region spring's", hasMeta("muster.region", "spring"))
}

// fetchesOf is every registry read a remote region's fetcher sent
// through tap: GET …/apps and …/apps/delta.
func fetchesOf(tap *interoptest.WireTap) []interoptest.Exchange {
	var out []interoptest.Exchange
	for _, e := range tap.Since(0) {
		p := strings.TrimSuffix(e.Path, "/")
		if e.Method == http.MethodGet && (strings.HasSuffix(p, "/apps") || strings.HasSuffix(p, "/apps/delta")) {
			out = append(out, e)
		}
	}
	return out
}

// lastFull is the last full fetch of fetches (none if there is none).
func lastFull(fetches []interoptest.Exchange) []interoptest.Exchange {
	for i := len(fetches) - 1; i >= 0; i-- {
		if !strings.Contains(fetches[i].Path, "delta") {
			return fetches[i : i+1]
		}
	}
	return nil
}

// replay sends e again, with every header it had, to the Eureka base URL
// base (…/eureka/) and returns the instance ids of the answer, read as
// JSON.
func replay(t *testing.T, base string, e interoptest.Exchange) []string {
	t.Helper()
	path := e.Path[strings.Index(e.Path, "/apps"):]
	u := strings.TrimSuffix(base, "/") + path
	if e.Query != "" {
		u += "?" + e.Query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range e.Header {
		if k == "Accept-Encoding" || strings.HasPrefix(k, "X-Forwarded") {
			continue
		}
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := pollClient.Do(req)
	if err != nil {
		t.Fatalf("replay %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replay %s: %d %s", u, resp.StatusCode, interoptest.Tail(string(b), 300))
	}
	var doc struct {
		Applications struct {
			Application []struct {
				Instance []struct {
					InstanceID string `json:"instanceId"`
				} `json:"instance"`
			} `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("replay %s: %v: %s", u, err, interoptest.Tail(string(b), 300))
	}
	var ids []string
	for _, a := range doc.Applications.Application {
		for _, in := range a.Instance {
			ids = append(ids, in.InstanceID)
		}
	}
	sort.Strings(ids)
	return ids
}

func equalIDs(got, want []string) bool {
	return strings.Join(got, ",") == strings.Join(want, ",")
}

// bootClient is one Spring Boot 4 client app (interop/spring/boot4-client)
// steered over its control port.
type bootClient struct {
	t    *testing.T
	app  string
	id   string
	port int
	proc *interoptest.Process
}

var bootReady = regexp.MustCompile(`MUSTER-READY port=(\d+) id=(\S+)`)

// startBootClient starts the client app as application name against
// server, in region, fetching remote region remote too
// (eureka.client.fetch-remote-regions-registry, with the zone Eureka's
// client requires of it).
func startBootClient(t *testing.T, dir, name, server, region, remote string) *bootClient {
	t.Helper()
	id := name + "-1"
	args := append([]string{}, springJVM...)
	args = append(args, "-jar", filepath.Join(dir, "target", "app.jar"),
		"--spring.application.name="+name,
		"--eureka.instance.instance-id="+id,
		"--eureka.client.service-url.defaultZone="+server,
		"--eureka.client.region="+region,
		"--eureka.client.fetch-remote-regions-registry="+remote,
		// Eureka's client refuses to start without the remote region's
		// availability zones (InstanceRegionChecker): a team lists them.
		"--eureka.client.availability-zones."+remote+"="+remote+"-1a",
	)
	b := &bootClient{t: t, app: strings.ToUpper(name), id: id}
	b.proc = interoptest.Start(t, name, exec.Command("java", args...))
	t.Cleanup(func() {
		if b.proc.Exited() {
			return
		}
		_ = b.proc.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.proc.Done:
		case <-time.After(30 * time.Second):
			b.proc.Kill()
		}
	})
	testwait.For(t, 150*time.Second, name+" starts and prints MUSTER-READY", func() error {
		if b.proc.Exited() {
			t.Fatalf("%s exited at start:\n%s", name, b.proc.Out.Tail(4000))
		}
		m := b.proc.Out.Match(0, bootReady.String())
		if len(m) == 0 {
			return fmt.Errorf("not ready yet")
		}
		b.port, _ = strconv.Atoi(bootReady.FindStringSubmatch(m[0])[1])
		return nil
	})
	return b
}

// seesThroughDiscoveryClient waits until Spring's DiscoveryClient of the
// app (what a load balancer picks from) lists app/id.
func (b *bootClient) seesThroughDiscoveryClient(app, id string) {
	b.t.Helper()
	testwait.For(b.t, 60*time.Second, b.id+"'s DiscoveryClient lists "+app+"/"+id, func() error {
		resp, err := pollClient.Get("http://127.0.0.1:" + strconv.Itoa(b.port) + "/control/state")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var st struct {
			Services map[string][]string `json:"services"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err
		}
		for svc, ids := range st.Services {
			if strings.EqualFold(svc, app) {
				for _, got := range ids {
					if got == id {
						return nil
					}
				}
				return fmt.Errorf("%s lists %v", svc, ids)
			}
		}
		return fmt.Errorf("services %v", st.Services)
	})
}

package javaeureka

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// The migration of docs/migration-from-java-eureka.md, stage by stage, with
// one real Java client running throughout: a Java pair (stage 0); two
// Muster nodes added as their static peers and the Java servers restarted
// one at a time with the Muster nodes in their peer lists (stage 1); the
// client's defaultZone moved to the Muster nodes at run time (stage 2);
// the Muster nodes restarted without the Java servers, which are then
// stopped (stage 3). Throughout, no live server ever answers 404 for the
// client's instance, every registry the client fetches holds both
// instances, and self-preservation never switches on.
func TestMigration_javaPairToMuster(t *testing.T) {
	t.Parallel()
	dir := javaEureka(t)
	agentClasspath(t, dir)

	// Stage 0: two Java servers, each the other's peer.
	javaA, javaB := newJavaServer(t, dir), newJavaServer(t, dir)
	javaA.peers, javaB.peers = []string{javaB.url()}, []string{javaA.url()}
	javaA.launch()
	javaB.launch()
	javaA.ready()
	javaB.ready()
	registerDirect(t, javaA.url(), "INVENTORY", "127.0.0.1:inventory:1")
	registerDirect(t, javaB.url(), "INVENTORY", "127.0.0.1:inventory:1")
	client := startAgent(t, dir, "ORDERS", []string{javaA.url(), javaB.url()}, "",
		"--eureka.transport.sessionedClientReconnectIntervalSeconds=4",
		"--eureka.serviceUrlPollIntervalMs=1000")
	fetchedFrom := client.out.len()
	for _, j := range []*javaServer{javaA, javaB} {
		waitInstance(t, nil, j.url(), client.app, client.id, "stage 0: the client on "+j.url(), statusIs("UP"))
	}
	watch := watchPresence(t, client.app, client.id, javaA.url(), javaB.url())

	// Stage 1: Muster nodes with the Java servers as static peers; they
	// copy the registry before they open.
	gossipA, gossipB := freePort(t), freePort(t)
	javaZone := "eureka.client.service-url.defaultZone=" + javaA.url() + "," + javaB.url()
	musterA := newMusterNode(t, clusterSets("mig-a", gossipA, gossipB)...)
	musterB := newMusterNode(t, clusterSets("mig-b", gossipB, gossipA)...)
	for _, m := range []*musterNode{musterA, musterB} {
		m.sets = append(m.sets, javaZone)
		m.start()
		waitInstance(t, nil, m.url(), client.app, client.id, "stage 1: the Muster node copied the client", statusIs("UP"))
		waitInstance(t, nil, m.url(), "INVENTORY", "127.0.0.1:inventory:1", "stage 1: the Muster node copied INVENTORY", nil)
		watch.add(m.url())
	}
	// Each Java server gets the Muster nodes as peers, one at a time: a
	// restart, which copies the registry from its peers first.
	for _, j := range []*javaServer{javaA, javaB} {
		other := javaB
		if j == javaB {
			other = javaA
		}
		watch.remove(j.url())
		j.stop()
		j.peers = []string{other.url(), musterA.url(), musterB.url()}
		j.start()
		waitInstance(t, nil, j.url(), client.app, client.id, "stage 1: the restarted Java server copied the client", statusIs("UP"))
		watch.add(j.url())
	}
	all := []string{javaA.url(), javaB.url(), musterA.url(), musterB.url()}
	sameRegistry(t, "stage 1", all)
	for _, m := range []*musterNode{musterA, musterB} {
		for _, p := range adminStatus(t, m).Peers {
			if (p.URL == javaA.url() || p.URL == javaB.url()) && p.AntiEntropy != "unsupported" {
				t.Fatalf("stage 1: the Java peer %s shows anti-entropy %q, want unsupported", p.URL, p.AntiEntropy)
			}
		}
	}
	noSelfPreservation(t, "stage 1", musterA, musterB)

	// Stage 2: the client's defaultZone moves to the Muster nodes at run
	// time (a dynamic archaius property): the client reads its service
	// URLs every serviceUrlPollIntervalMs (1 s here, 5 min by default) and
	// picks one of the new ones from its next session (4 s ±50 % here, 20 min
	// by default), without re-registering.
	moved := client.out.len()
	client.call("set eureka.serviceUrl.default " + musterA.url() + "," + musterB.url())
	musterPorts := strconv.Itoa(musterA.port) + `|` + strconv.Itoa(musterB.port)
	testwait.True(t, 30*time.Second, "stage 2: the client heartbeats to a Muster node", func() bool {
		return client.sawWire(moved, `^PUT http://127\.0\.0\.1:(`+musterPorts+`)/eureka/apps/ORDERS/\S+ -> 200$`)
	})
	sameRegistry(t, "stage 2", all)
	noSelfPreservation(t, "stage 2", musterA, musterB)

	// Stage 3: the Muster nodes restart without the Java servers, one at
	// a time (each copies the registry from the other), then the Java
	// servers stop.
	for _, m := range []*musterNode{musterA, musterB} {
		watch.remove(m.url())
		m.stop()
		m.sets = m.sets[:len(m.sets)-1] // drop the Java defaultZone
		m.start()
		waitInstance(t, nil, m.url(), client.app, client.id, "stage 3: the restarted Muster node has the client", statusIs("UP"))
		watch.add(m.url())
	}
	for _, j := range []*javaServer{javaA, javaB} {
		watch.remove(j.url())
		j.stop()
	}
	retired := client.out.len()
	sameRegistry(t, "stage 3", []string{musterA.url(), musterB.url()})
	testwait.True(t, 30*time.Second, "stage 3: the client keeps renewing with the Muster nodes", func() bool {
		return client.sawWire(retired, `^PUT http://127\.0\.0\.1:(`+musterPorts+`)/eureka/apps/ORDERS/\S+ -> 200$`)
	})
	noSelfPreservation(t, "stage 3", musterA, musterB)
	if client.sawWire(retired, `^\S+ http://127\.0\.0\.1:(`+strconv.Itoa(javaA.port)+`|`+strconv.Itoa(javaB.port)+`)/`) {
		t.Fatalf("stage 3: the client still calls a retired Java server:\n%s", strings.Join(client.wire(retired), "\n"))
	}

	watch.check(t)
	fetches := 0
	for _, l := range client.out.since(fetchedFrom) {
		if !strings.HasPrefix(l, "refresh ") {
			continue
		}
		fetches++
		if !strings.HasPrefix(l, "refresh instances=2 self=UP ") {
			t.Fatalf("the client fetched a partial or empty registry during the migration: %s", l)
		}
	}
	if fetches < 10 {
		t.Fatalf("the client fetched the registry only %d times during the migration", fetches)
	}
	t.Logf("the client fetched the registry %d times during the migration, always complete", fetches)
}

// clusterSets makes a Muster node gossip on loopback with the node at
// seed (the settings after the harness's cluster.enabled=false win).
func clusterSets(name string, port, seed int) []string {
	return []string{"cluster.enabled=true", "cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1",
		"cluster.bind-port=" + strconv.Itoa(port), "cluster.join=127.0.0.1:" + strconv.Itoa(seed),
		"eureka.server.registry-sync-retries=2", "muster.cold-start-wait-ms=0"}
}

// sameRegistry waits until every server answers the same apps hashcode.
func sameRegistry(t *testing.T, stage string, urls []string) {
	t.Helper()
	testwait.For(t, 30*time.Second, stage+": every server holds the same registry", func() error {
		seen := map[string]string{}
		for _, u := range urls {
			req, _ := http.NewRequest(http.MethodGet, u+"apps", nil)
			req.Header.Set("Accept", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			var doc struct {
				Applications struct {
					Hashcode string `json:"apps__hashcode"`
				} `json:"applications"`
			}
			err = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("%s: %v", u, err)
			}
			seen[u] = doc.Applications.Hashcode
		}
		for _, h := range seen {
			if h != "UP_2_" {
				return fmt.Errorf("hashcodes %v, want UP_2_ everywhere", seen)
			}
		}
		return nil
	})
}

func noSelfPreservation(t *testing.T, stage string, nodes ...*musterNode) {
	t.Helper()
	for _, n := range nodes {
		if st := adminStatus(t, n); st.SelfPreservation.Active {
			t.Fatalf("%s: self-preservation switched on at %s", stage, n.url())
		}
	}
}

// presenceWatch polls the live servers for one instance until the test
// ends and records every 404 (connection errors are a server being down,
// which the test itself arranges by removing it first).
type presenceWatch struct {
	mu   sync.Mutex
	urls map[string]bool
	lost []string
	stop chan struct{}
	done chan struct{}
}

func watchPresence(t *testing.T, app, id string, urls ...string) *presenceWatch {
	w := &presenceWatch{urls: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, u := range urls {
		w.urls[u] = true
	}
	go func() {
		defer close(w.done)
		c := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			w.mu.Lock()
			var live []string
			for u := range w.urls {
				live = append(live, u)
			}
			w.mu.Unlock()
			for _, u := range live {
				_, err := getInstance(c, u, app, id)
				w.mu.Lock()
				if err != nil && strings.Contains(err.Error(), ": 404") && w.urls[u] {
					w.lost = append(w.lost, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.halt() })
	return w
}

func (w *presenceWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *presenceWatch) add(u string) {
	w.mu.Lock()
	w.urls[u] = true
	w.mu.Unlock()
}

func (w *presenceWatch) remove(u string) {
	w.mu.Lock()
	delete(w.urls, u)
	w.mu.Unlock()
}

func (w *presenceWatch) check(t *testing.T) {
	t.Helper()
	w.halt()
	if len(w.lost) > 0 {
		t.Fatalf("a live server lost the client's instance during the migration:\n%s", strings.Join(w.lost, "\n"))
	}
}

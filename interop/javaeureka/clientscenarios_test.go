package javaeureka

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// The Java client through what happens to a Muster node in production,
// each scenario with its own node(s) and its own DiscoveryClient: losing
// its instance to eviction or to a restart without a data dir, failing over
// between its serviceUrls, credentials in the URL, https, shutdown.
func TestJavaClient_scenarios(t *testing.T) {
	dir := javaEureka(t)
	agentClasspath(t, dir)

	t.Run("evicted-then-node-restarted-then-shutdown", func(t *testing.T) {
		t.Parallel()
		node := newMusterNode(t, "eureka.server.enable-self-preservation=false",
			"eureka.server.eviction-interval-timer-in-ms=500").start()
		proxy := newPartitionProxy(t, "127.0.0.1:"+strconv.Itoa(node.port))
		a := startAgent(t, dir, "JAVA-EVICTED", []string{"http://" + proxy.addr() + "/eureka/"}, "")
		waitInstance(t, nil, node.url(), a.app, a.id, "the instance on the node", statusIs("UP"))

		// Cut the client off until the node evicts it, then heal: the next
		// heartbeat is answered 404 and the client registers again.
		proxy.setCut(true)
		waitGone(t, nil, node.url(), a.app, a.id, "the node evicts the cut-off client")
		if ev := adminStatus(t, node).Registry.Evictions; ev == 0 {
			t.Fatalf("the instance went away without an eviction (evictions %d)", ev)
		}
		mark := a.out.len()
		proxy.setCut(false)
		waitInstance(t, nil, node.url(), a.app, a.id, "the client registers again after the partition heals", statusIs("UP"))
		mustSawWire(t, a, mark, `^PUT \S+/apps/JAVA-EVICTED/\S+ -> 404$`, "the heartbeat 404 after the eviction")
		mustSawWire(t, a, mark, `^POST \S+/apps/JAVA-EVICTED -> 204$`, "the re-registration")

		// A node restarted without a data dir knows nothing: same repair.
		node.stop()
		mark = a.out.len()
		node.start()
		waitInstance(t, nil, node.url(), a.app, a.id, "the client registers again on the restarted node", statusIs("UP"))
		mustSawWire(t, a, mark, `^PUT \S+/apps/JAVA-EVICTED/\S+ -> 404$`, "the heartbeat 404 after the restart")
		a.waitSelf(30*time.Second, "UP")

		// Shutdown cancels: gone at once, not after the lease runs out.
		mark = a.out.len()
		a.call("shutdown")
		if _, err := getInstance(nil, node.url(), a.app, a.id); err == nil || !strings.Contains(err.Error(), ": 404") {
			t.Fatalf("after the client's shutdown the instance is still there: %v", err)
		}
		mustSawWire(t, a, mark, `^DELETE \S+/apps/JAVA-EVICTED/\S+ -> 200$`, "the cancel at shutdown")
	})

	t.Run("failover-between-serviceUrls", func(t *testing.T) {
		t.Parallel()
		nodes := []*musterNode{newMusterNode(t).start(), newMusterNode(t).start()}
		// eureka-client 1.10 shuffles the service URLs of its own zone
		// (ZoneAffinityClusterResolver through ResolverUtils.randomize) at
		// every resolve, so the first URL is not preferred: the test finds
		// the node in use, kills it, and expects the other one.
		a := startAgent(t, dir, "JAVA-FAILOVER", []string{nodes[0].url(), nodes[1].url()}, "",
			"--eureka.transport.sessionedClientReconnectIntervalSeconds=6")
		var used, spare *musterNode
		testwait.For(t, 30*time.Second, "the client registered with one of its serviceUrls", func() error {
			for i, n := range nodes {
				if _, err := getInstance(nil, n.url(), a.app, a.id); err == nil {
					used, spare = n, nodes[1-i]
					return nil
				}
			}
			return fmt.Errorf("on neither node")
		})

		for round := 0; round < 2; round++ {
			used.stop()
			mark := a.out.len()
			waitInstance(t, nil, spare.url(), a.app, a.id, fmt.Sprintf("round %d: the client fails over to the other serviceUrl", round), statusIs("UP"))
			mustSawWire(t, a, mark, `^PUT http://127\.0\.0\.1:`+strconv.Itoa(spare.port)+`/eureka/apps/JAVA-FAILOVER/\S+ -> (404|200)$`,
				"heartbeats to the other node")
			a.waitSelf(30*time.Second, "UP")
			// The dead node comes back empty (no data dir); the next round
			// kills the other one, so the client has to return to it.
			used.start()
			used, spare = spare, used
		}
	})

	t.Run("basic-auth-in-serviceUrl", func(t *testing.T) {
		t.Parallel()
		node := newMusterNode(t, "spring.security.user.name=admin", "spring.security.user.password=admin-pw",
			"muster.auth.users.orders.password={noop}orders-pw", "muster.auth.users.orders.role=write",
			"muster.auth.users.orders.apps=JAVA-AUTH").start()
		withCreds := "http://orders:orders-pw@127.0.0.1:" + strconv.Itoa(node.port) + "/eureka/"
		a := startAgent(t, dir, "JAVA-AUTH", []string{withCreds}, "")
		waitInstance(t, nil, withCreds, a.app, a.id, "registered with the credentials from the URL", statusIs("UP"))
		if code := send(t, http.MethodGet, node.url()+"apps/JAVA-AUTH/"+a.id); code != http.StatusUnauthorized {
			t.Fatalf("GET without credentials: %d, want 401 (is auth on?)", code)
		}
		a.call("status DOWN")
		waitInstance(t, nil, withCreds, a.app, a.id, "the client's own DOWN, sent with its credentials", statusIs("DOWN"))
		a.call("status UP")
		waitInstance(t, nil, withCreds, a.app, a.id, "UP again", statusIs("UP"))
		mark := a.out.len()
		a.call("shutdown")
		waitGone(t, nil, withCreds, a.app, a.id, "cancelled with its credentials at shutdown")
		if a.sawWire(0, `-> 40[13]$`) {
			t.Fatalf("the client was refused: %v", a.wire(0))
		}
		mustSawWire(t, a, mark, `^DELETE \S+ -> 200$`, "the cancel")
	})

	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("keytool"); err != nil {
			t.Skip("no keytool on PATH to make the Java trust store")
		}
		certs := t.TempDir()
		muster(t, "tls", "ca", "--out-dir", certs)
		muster(t, "tls", "cert", "--out-dir", certs, "--name", "node", "--ip", "127.0.0.1")
		store := filepath.Join(certs, "trust.p12")
		if out, err := exec.Command("keytool", "-importcert", "-noprompt", "-alias", "muster-ca",
			"-file", filepath.Join(certs, "muster-ca.pem"), "-keystore", store, "-storetype", "PKCS12",
			"-storepass", "changeit").CombinedOutput(); err != nil {
			t.Fatalf("keytool: %v\n%s", err, out)
		}
		node := newMusterNode(t)
		node.useTLS(filepath.Join(certs, "node.pem"), filepath.Join(certs, "node-key.pem"), filepath.Join(certs, "muster-ca.pem"))
		node.start()
		a := startAgent(t, dir, "JAVA-TLS", []string{node.url()},
			"-Djavax.net.ssl.trustStore="+store+" -Djavax.net.ssl.trustStorePassword=changeit -Djavax.net.ssl.trustStoreType=PKCS12")
		waitInstance(t, node.http, node.url(), a.app, a.id, "registered over https", statusIs("UP"))
		mustSawWire(t, a, 0, `^PUT https://127\.0\.0\.1:\d+/eureka/apps/JAVA-TLS/\S+ -> 200$`, "heartbeats over https")
		a.call("shutdown")
		waitGone(t, node.http, node.url(), a.app, a.id, "cancelled over https at shutdown")
	})
}

// mustSawWire fails t unless the client's log of its requests since from
// has a line matching re. The client writes a request's line once its
// answer is read, which may be after the node shows what the request did:
// so the line gets a few seconds to appear.
func mustSawWire(t *testing.T, a *javaAgent, from int, re, what string) {
	t.Helper()
	testwait.For(t, 5*time.Second, "the Java client's log of its requests", func() error {
		if a.sawWire(from, re) {
			return nil
		}
		return fmt.Errorf("no request matching %s (%s); its requests:\n%s", re, what, strings.Join(a.wire(from), "\n"))
	})
}

// muster runs the muster binary with args (its tls subcommands, say).
func muster(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(musterBinary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nodeStatus is the part of /admin/status the tests read.
type nodeStatus struct {
	SelfPreservation struct {
		Enabled bool `json:"enabled"`
		Active  bool `json:"active"`
	} `json:"selfPreservation"`
	Registry struct {
		Instances int    `json:"instances"`
		Evictions uint64 `json:"evictions"`
	} `json:"registry"`
	Peers []struct {
		URL         string `json:"url"`
		State       string `json:"state"`
		AntiEntropy string `json:"antiEntropy"`
		LastError   string `json:"lastError"`
	} `json:"peers"`
}

func adminStatus(t *testing.T, n *musterNode) nodeStatus {
	t.Helper()
	resp, err := n.http.Get(n.base() + "/admin/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st nodeStatus
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin/status: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/admin/status: %v", err)
	}
	return st
}

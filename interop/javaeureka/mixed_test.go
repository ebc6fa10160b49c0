package javaeureka

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
)

// A Java Eureka server and a Muster node as each other's static peers,
// with a real Java client on each: syncUp both ways, then every change
// made on one side (registration, heartbeats, an operator override and
// its removal, metadata, cancel) reaches the other, and Eureka's own
// 404 → register repair mends an instance one side lost, in both
// directions. Both peer links run through a proxy so the test can cut
// them: changes made during the partition converge after it heals,
// through Eureka's repair alone (anti-entropy is Muster-only; /admin/status
// says so).
func TestMixedCluster_javaServerAndMusterAsPeers(t *testing.T) {
	t.Parallel()
	dir := javaEureka(t)
	agentClasspath(t, dir)

	java := newJavaServer(t, dir)
	toJava := newPartitionProxy(t, "127.0.0.1:"+strconv.Itoa(java.port))
	node := newMusterNode(t, "eureka.client.service-url.defaultZone=http://"+toJava.addr()+"/eureka/",
		"eureka.server.registry-sync-retries=1", "eureka.server.wait-time-in-ms-when-sync-empty=1",
		"muster.cold-start-wait-ms=0")
	toMuster := newPartitionProxy(t, "127.0.0.1:"+strconv.Itoa(node.port))
	java.peers = []string{"http://" + toMuster.addr() + "/eureka/"}

	// syncUp Muster → Java: an instance only the Muster node has (written
	// as a replicated register, so it is not forwarded) is copied by the
	// Java server when it starts.
	node.start()
	registerDirect(t, node.url(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1")
	java.start()
	waitInstance(t, nil, java.url(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1",
		"the Java server copies the Muster node's registry at start (syncUp)", statusIs("UP"))

	// syncUp Java → Muster: the same with the roles swapped; the Muster
	// node restarts without a data dir and copies the Java server's.
	registerDirect(t, java.url(), "SYNC-FROM-JAVA", "127.0.0.1:sync-from-java:1")
	node.stop()
	node.start()
	waitInstance(t, nil, node.url(), "SYNC-FROM-JAVA", "127.0.0.1:sync-from-java:1",
		"the restarted Muster node copies the Java server's registry (syncUp)", statusIs("UP"))
	waitInstance(t, nil, node.url(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1",
		"and gets back what it had from the Java server", statusIs("UP"))
	peerState := func() string {
		for _, p := range adminStatus(t, node).Peers {
			if strings.Contains(p.URL, toJava.addr()) {
				return p.State + "/" + p.AntiEntropy + " error=" + p.LastError
			}
		}
		return "absent"
	}
	testwait.For(t, 30*time.Second, "/admin/status lists the Java peer with anti-entropy unsupported", func() error {
		if got := peerState(); !strings.Contains(got, "/unsupported ") {
			return fmt.Errorf("listed as %q", got)
		}
		return nil
	})

	onJava := startAgent(t, dir, "JAVA-ON-JAVA", []string{java.url()}, "")
	onMuster := startAgent(t, dir, "JAVA-ON-MUSTER", []string{node.url()}, "")
	sides := []struct {
		name         string
		agent        *javaAgent
		home, remote string
	}{
		{"Java → Muster", onJava, java.url(), node.url()},
		{"Muster → Java", onMuster, node.url(), java.url()},
	}
	for _, s := range sides {
		a := s.agent
		first := waitInstance(t, nil, s.remote, a.app, a.id, s.name+": registration replicated", statusIs("UP"))
		waitInstance(t, nil, s.remote, a.app, a.id, s.name+": heartbeats replicated", func(i instance) error {
			if i.LeaseInfo.LastRenewalTimestamp <= first.LeaseInfo.LastRenewalTimestamp {
				return fmt.Errorf("lastRenewalTimestamp still %d", i.LeaseInfo.LastRenewalTimestamp)
			}
			return nil
		})

		// An operator override on the remote side replicates home, where
		// the client itself fetches it; its removal too.
		if code := send(t, http.MethodPut, s.remote+"apps/"+a.app+"/"+a.id+"/status?value=OUT_OF_SERVICE"); code != http.StatusOK {
			t.Fatalf("%s: PUT status override: %d", s.name, code)
		}
		waitInstance(t, nil, s.home, a.app, a.id, s.name+": override replicated back home", func(i instance) error {
			if i.Status != "OUT_OF_SERVICE" || i.overridden() != "OUT_OF_SERVICE" {
				return fmt.Errorf("status %s overridden %s", i.Status, i.overridden())
			}
			return nil
		})
		a.waitSelf(30*time.Second, "OUT_OF_SERVICE")
		if code := send(t, http.MethodDelete, s.remote+"apps/"+a.app+"/"+a.id+"/status?value=UP"); code != http.StatusOK {
			t.Fatalf("%s: DELETE status override: %d", s.name, code)
		}
		waitInstance(t, nil, s.home, a.app, a.id, s.name+": override removal replicated", statusIs("UP"))
		a.waitSelf(30*time.Second, "UP")

		a.call("meta phase " + strings.ReplaceAll(a.app, "-", ""))
		waitInstance(t, nil, s.remote, a.app, a.id, s.name+": metadata replicated", hasMeta("phase", strings.ReplaceAll(a.app, "-", "")))

		// The remote side loses the instance (a replicated cancel reaches
		// that node only): the next replicated heartbeat gets 404 there and
		// the home side registers it again.
		if code := send(t, http.MethodDelete, s.remote+"apps/"+a.app+"/"+a.id, "X-Netflix-Discovery-Replication", "true"); code != http.StatusOK {
			t.Fatalf("%s: replicated DELETE on the remote side: %d", s.name, code)
		}
		waitInstance(t, nil, s.remote, a.app, a.id, s.name+": 404 → register repair", hasMeta("phase", strings.ReplaceAll(a.app, "-", "")))
	}

	// A partition between the two servers: changes on both sides while it
	// lasts converge once it heals.
	toJava.setCut(true)
	toMuster.setCut(true)
	for _, s := range sides {
		s.agent.call("meta phase cut")
		waitInstance(t, nil, s.home, s.agent.app, s.agent.id, s.name+": metadata changed at home during the partition", hasMeta("phase", "cut"))
	}
	testwait.True(t, 30*time.Second, "the Muster node's replication to the Java server fails while cut", func() bool {
		return strings.Contains(peerState(), "error=") && !strings.HasSuffix(peerState(), "error=")
	})
	toJava.setCut(false)
	toMuster.setCut(false)
	for _, s := range sides {
		waitInstance(t, nil, s.remote, s.agent.app, s.agent.id, s.name+": the change made during the partition arrives after it heals", hasMeta("phase", "cut"))
	}

	for _, s := range sides {
		s.agent.call("shutdown")
		waitGone(t, nil, s.remote, s.agent.app, s.agent.id, s.name+": the cancel at shutdown replicated")
	}
}

func hasMeta(key, want string) func(instance) error {
	return func(i instance) error {
		if i.Metadata[key] != want {
			return fmt.Errorf("metadata %s=%q, want %q", key, i.Metadata[key], want)
		}
		return nil
	}
}

// registerDirect registers an instance with a 10-minute lease as a peer
// would (X-Netflix-Discovery-Replication), so the server keeps it to
// itself.
func registerDirect(t *testing.T, base, app, id string) {
	t.Helper()
	body := fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"127.0.0.1","app":%q,"ipAddr":"127.0.0.1","status":"UP",`+
		`"port":{"$":8080,"@enabled":"true"},"vipAddress":%q,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":600}}}`, id, app, strings.ToLower(app))
	req, _ := http.NewRequest(http.MethodPost, base+"apps/"+app, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Netflix-Discovery-Replication", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("register %s on %s: %d", app, base, resp.StatusCode)
	}
}

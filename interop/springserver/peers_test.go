package springserver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// A Spring Cloud Eureka Server and a Muster node as each other's static
// peers, with a client (the Go client package) on each: syncUp both ways,
// then every change made on one side (registration, heartbeats, an
// operator override and its removal, metadata, cancel) reaches the other,
// each client sees the other's instance, Eureka's own 404 → register
// repair mends an instance one side lost, and its 409 repair brings a
// newer copy back from the side that holds it, in both directions. Both peer
// links run through a WireTap so the test can cut them and name the
// replication wire it saw: changes made during the partition converge
// after it heals, through Eureka's repair alone (anti-entropy is
// Muster-only; /admin/status says so).
func TestSpringServerAndMusterAsPeers(t *testing.T) {
	t.Parallel()
	jar := springJar(t)

	spring := newSpringServer(t, jar)
	toSpring := interoptest.NewWireTap(t, "http://127.0.0.1:"+fmt.Sprint(spring.port))
	node := interoptest.NewNode(t, "eureka.client.service-url.defaultZone="+toSpring.URL()+"/eureka/",
		"eureka.server.registry-sync-retries=1", "eureka.server.wait-time-in-ms-when-sync-empty=1",
		"muster.cold-start-wait-ms=0")
	toMuster := interoptest.NewWireTap(t, node.Base())
	spring.peers = []string{toMuster.URL() + "/eureka/"}

	// syncUp Muster → Spring: an instance only the Muster node has
	// (written as a replicated register, so it is not forwarded) is copied
	// by the Spring server when it starts.
	node.Start()
	registerDirect(t, node.URL(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1")
	spring.start()
	waitInstance(t, spring.url(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1",
		"the Spring server copies the Muster node's registry at start (syncUp)", statusIs("UP"))

	// syncUp Spring → Muster: the same with the roles swapped; the Muster
	// node restarts without a data dir and copies the Spring server's.
	registerDirect(t, spring.url(), "SYNC-FROM-SPRING", "127.0.0.1:sync-from-spring:1")
	node.Stop()
	node.Start()
	waitInstance(t, node.URL(), "SYNC-FROM-SPRING", "127.0.0.1:sync-from-spring:1",
		"the restarted Muster node copies the Spring server's registry (syncUp)", statusIs("UP"))
	waitInstance(t, node.URL(), "SYNC-FROM-MUSTER", "127.0.0.1:sync-from-muster:1",
		"and gets back what it had from the Spring server", statusIs("UP"))
	peerState := func() string {
		for _, p := range adminStatus(t, node).Peers {
			if strings.Contains(p.URL, strings.TrimPrefix(toSpring.URL(), "http://")) {
				return p.State + "/" + p.AntiEntropy + " error=" + p.LastError
			}
		}
		return "absent"
	}
	testwait.For(t, 30*time.Second, "/admin/status lists the Spring peer with anti-entropy unsupported", func() error {
		if got := peerState(); !strings.Contains(got, "/unsupported ") {
			return fmt.Errorf("listed as %q", got)
		}
		return nil
	})

	onSpring := startClient(t, "CLIENT-ON-SPRING", spring.url())
	onMuster := startClient(t, "CLIENT-ON-MUSTER", node.URL())
	sides := []struct {
		name         string
		c, other     *goClient
		home, remote string
		tap          *interoptest.WireTap // the link from home to remote
	}{
		{"Spring → Muster", onSpring, onMuster, spring.url(), node.URL(), toMuster},
		{"Muster → Spring", onMuster, onSpring, node.URL(), spring.url(), toSpring},
	}
	for _, s := range sides {
		c := s.c
		first := waitInstance(t, s.remote, c.app, c.id, s.name+": registration replicated", statusIs("UP"))
		waitInstance(t, s.remote, c.app, c.id, s.name+": heartbeats replicated", func(i instance) error {
			if i.LeaseInfo.LastRenewalTimestamp <= first.LeaseInfo.LastRenewalTimestamp {
				return fmt.Errorf("lastRenewalTimestamp still %d", i.LeaseInfo.LastRenewalTimestamp)
			}
			return nil
		})
		// Each client sees the other's instance, registered on the other
		// server.
		s.other.sees(c.app, c.id, "UP")

		// An operator override on the remote side replicates home, where
		// the client itself fetches it; its removal too.
		if code := send(t, http.MethodPut, s.remote+"apps/"+c.app+"/"+c.id+"/status?value=OUT_OF_SERVICE"); code != http.StatusOK {
			t.Fatalf("%s: PUT status override: %d", s.name, code)
		}
		waitInstance(t, s.home, c.app, c.id, s.name+": override replicated back home", func(i instance) error {
			if i.Status != "OUT_OF_SERVICE" || i.overridden() != "OUT_OF_SERVICE" {
				return fmt.Errorf("status %s overridden %s", i.Status, i.overridden())
			}
			return nil
		})
		c.sees(c.app, c.id, "OUT_OF_SERVICE")
		if code := send(t, http.MethodDelete, s.remote+"apps/"+c.app+"/"+c.id+"/status?value=UP"); code != http.StatusOK {
			t.Fatalf("%s: DELETE status override: %d", s.name, code)
		}
		waitInstance(t, s.home, c.app, c.id, s.name+": override removal replicated", statusIs("UP"))
		c.sees(c.app, c.id, "UP")

		phase := strings.ReplaceAll(c.app, "-", "")
		c.setMetadata("phase", phase)
		waitInstance(t, s.remote, c.app, c.id, s.name+": metadata replicated", hasMeta("phase", phase))

		// The remote side loses the instance (a replicated cancel reaches
		// that server only): the next replicated heartbeat gets 404 there
		// and the home side registers it again.
		mark := s.tap.Len()
		if code := send(t, http.MethodDelete, s.remote+"apps/"+c.app+"/"+c.id, "X-Netflix-Discovery-Replication", "true"); code != http.StatusOK {
			t.Fatalf("%s: replicated DELETE on the remote side: %d", s.name, code)
		}
		waitInstance(t, s.remote, c.app, c.id, s.name+": 404 → register repair", hasMeta("phase", phase))
		t.Logf("%s: the replication wire during the 404 repair:\n%s", s.name, s.tap.Dump(mark))

		// The remote side holds a newer copy than home (a peer's write
		// home has not seen): home's next replicated heartbeat carries
		// the older lastDirtyTimestamp, the remote side answers 409 with
		// its copy, and home takes it.
		registerCopy(t, s.remote, c.app, c.id, time.Now().UnixMilli(), c.port, "newer-"+phase)
		waitInstance(t, s.home, c.app, c.id, s.name+": 409 → home takes the remote side's newer copy", hasMeta("phase", "newer-"+phase))
	}

	// A partition between the two servers: changes on both sides while it
	// lasts converge once it heals.
	toSpring.SetCut(true)
	toMuster.SetCut(true)
	for _, s := range sides {
		s.c.setMetadata("phase", "cut")
		waitInstance(t, s.home, s.c.app, s.c.id, s.name+": metadata changed at home during the partition", hasMeta("phase", "cut"))
	}
	testwait.True(t, 30*time.Second, "the Muster node's replication to the Spring server fails while cut", func() bool {
		return strings.Contains(peerState(), "error=") && !strings.HasSuffix(peerState(), "error=")
	})
	toSpring.SetCut(false)
	toMuster.SetCut(false)
	for _, s := range sides {
		waitInstance(t, s.remote, s.c.app, s.c.id, s.name+": the change made during the partition arrives after it heals", hasMeta("phase", "cut"))
	}

	for _, s := range sides {
		if err := s.c.reg.Close(); err != nil {
			t.Fatalf("%s: cancel: %v", s.name, err)
		}
		waitGone(t, s.remote, s.c.app, s.c.id, s.name+": the cancel at shutdown replicated")
	}
	for _, tap := range []*interoptest.WireTap{toSpring, toMuster} {
		if len(tap.Find(0, http.MethodPost, "/peerreplication/batch")) == 0 {
			t.Errorf("no replication batch went through %s:\n%s", tap.URL(), interoptest.Tail(tap.Dump(0), 3000))
		}
	}
}

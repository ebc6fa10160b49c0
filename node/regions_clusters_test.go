package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/regions/regionstest"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// clusterRegion is one region of TestRegions_twoClustersAsRegions: its
// nodes (those still running) and what the test registered there, the
// model every node of the region must hold after replication.
type clusterRegion struct {
	name  string
	nodes []*Node
	live  map[string]liveInstance // id → instance
	order []string                // live ids, in registration order (rng picks by index)
}

type liveInstance struct{ app, status string }

func (r *clusterRegion) add(app, id string) {
	r.live[id] = liveInstance{app: app, status: "UP"}
	r.order = append(r.order, id)
}

func (r *clusterRegion) remove(i int) {
	delete(r.live, r.order[i])
	r.order = append(r.order[:i], r.order[i+1:]...)
}

// ids is the region's live instances as regionstest.ClientCopy.ids spells them, marked
// with region (the view of a remote) and filtered by allowed (nil: all).
func (r *clusterRegion) ids(region string, allowed map[string]bool) []string {
	out := []string{}
	for id, in := range r.live {
		if allowed == nil || allowed[in.app] {
			out = append(out, in.app+"/"+id+"="+in.status+"@"+region)
		}
	}
	sort.Strings(out)
	return out
}

// settled waits until every running node of r holds exactly r's live
// instances in its local registry: intra-cluster replication is done, and
// no remote instance is there.
func (r *clusterRegion) settled(t *testing.T) {
	t.Helper()
	testwait.For(t, 20*time.Second, "replication within region "+r.name, func() error {
		for _, n := range r.nodes {
			if got := n.reg.Len(); got != len(r.live) {
				return fmt.Errorf("%s holds %d instances, want %d", n.name, got, len(r.live))
			}
			for id, in := range r.live {
				iv, ok := n.reg.Instance(in.app, id)
				if !ok {
					return fmt.Errorf("%s lacks %s/%s", n.name, in.app, id)
				}
				if string(iv.Status) != in.status {
					return fmt.Errorf("%s has %s/%s %s, want %s", n.name, in.app, id, iv.Status, in.status)
				}
			}
		}
		return nil
	})
}

// viewIDs is a fetcher's view as regionstest.ClientCopy.ids spells it.
func viewIDs(v *regions.View) []string {
	out := []string{}
	for _, a := range v.Apps {
		for _, iv := range a.Instances {
			r, _ := iv.Metadata.Get(regions.MetadataKey)
			out = append(out, a.Name+"/"+iv.ID()+"="+string(iv.Status)+"@"+r)
		}
	}
	sort.Strings(out)
	return out
}

// Two clustered regions, each a remote of the other through both of its
// nodes: every node fetches the other region itself, serves it (whitelist
// applied on a's side) within one fetch interval, deltas of merged views
// reconcile under churn on every node, nothing of a region is mirrored
// back to it nor replicated into a local registry, and when b's first node
// stops, a's fetchers go on with b's second.
func TestRegions_twoClustersAsRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	start := time.Now()
	clock := registrytest.NewClock()
	pa1, pa2, pb1, pb2 := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	both := func(p1, p2 int) string {
		return "http://127.0.0.1:" + strconv.Itoa(p1) + "/eureka,http://127.0.0.1:" + strconv.Itoa(p2) + "/eureka"
	}
	whitelist := "eureka.server.remote-region-app-whitelist.b=ORDERS,USERS"
	allowedB := map[string]bool{"ORDERS": true, "USERS": true}
	toB, toA := map[string]string{"b": both(pb1, pb2)}, map[string]string{"a": both(pa1, pa2)}
	a1 := regionNode(t, "a", pa1, clock, toB, append(regionClusterSets("a1"), whitelist)...)
	a2 := regionNode(t, "a", pa2, clock, toB, append(regionClusterSets("a2", a1.gossipAddr(t)), whitelist)...)
	b1 := regionNode(t, "b", pb1, clock, toA, regionClusterSets("b1")...)
	b2 := regionNode(t, "b", pb2, clock, toA, regionClusterSets("b2", b1.gossipAddr(t))...)
	waitFor(t, 15*time.Second, "a1-a2 and b1-b2 peers", func() bool {
		return len(a1.currentPeers()) == 1 && len(a2.currentPeers()) == 1 && len(b1.currentPeers()) == 1 && len(b2.currentPeers()) == 1
	})
	all := []*Node{a1, a2, b1, b2}
	ra := &clusterRegion{name: "a", nodes: []*Node{a1, a2}, live: map[string]liveInstance{}}
	rb := &clusterRegion{name: "b", nodes: []*Node{b1, b2}, live: map[string]liveInstance{}}
	fetcher := func(n *Node) *regions.Fetcher { return n.regions.Fetchers()[0] }

	// step moves the shared clock one fetch interval once every running
	// fetcher waits on it, and returns when each has fetched and waits
	// again. (A stopped node's fetcher may leave one waiter behind, which
	// the Advance fires.)
	running := all
	step := func() {
		t.Helper()
		waitFor(t, 10*time.Second, "every fetcher waiting", func() bool { return clock.Waiting() >= len(running) })
		before := make([]uint64, len(running))
		for i, n := range running {
			before[i] = fetcher(n).Stats().Fetches
		}
		clock.Advance(30 * time.Second)
		testwait.For(t, 10*time.Second, "every fetcher fetched and waits again", func() error {
			for i, n := range running {
				if fetcher(n).Stats().Fetches == before[i] {
					return fmt.Errorf("%s has not fetched", n.name)
				}
			}
			if w := clock.Waiting(); w != len(running) {
				return fmt.Errorf("%d waiting, want %d", w, len(running))
			}
			return nil
		})
	}
	docOf := func(n *Node, path, q string) *wire.Applications {
		t.Helper()
		doc, _ := regionstest.FetchDoc(t, "http://"+n.Addr()+"/eureka"+path+q, false, nil)
		return doc
	}

	// Instances on every node of both clusters; ids start with the node's
	// name, so with its region's letter.
	register(t, b1, "ORDERS", "b1-0-0")
	rb.add("ORDERS", "b1-0-0")
	register(t, b2, "USERS", "b2-0-0")
	rb.add("USERS", "b2-0-0")
	register(t, b1, "CART", "b1-0-1") // off a's whitelist
	rb.add("CART", "b1-0-1")
	register(t, b2, "SECRET", "b2-0-1") // off a's whitelist
	rb.add("SECRET", "b2-0-1")
	register(t, a1, "ORDERS", "a1-0-0")
	ra.add("ORDERS", "a1-0-0")
	register(t, a2, "PAYMENTS", "a2-0-0")
	ra.add("PAYMENTS", "a2-0-0")
	ra.settled(t)
	rb.settled(t)
	step()

	// One fetch interval on, a client of either node of a asking regions=b
	// gets exactly b's whitelisted instances, marked, merged with a's own.
	want := append(ra.ids("", nil), rb.ids("b", allowedB)...)
	sort.Strings(want)
	if fmt.Sprint(want) != "[ORDERS/a1-0-0=UP@ ORDERS/b1-0-0=UP@b PAYMENTS/a2-0-0=UP@ USERS/b2-0-0=UP@b]" {
		t.Fatalf("the test's model: %v", want)
	}
	for _, n := range []*Node{a1, a2} {
		doc := docOf(n, "/apps", "?regions=b")
		if got := regionstest.CopyOf(doc); fmt.Sprint(got.IDs()) != fmt.Sprint(want) || got.Hashcode() != doc.Hashcode || doc.Hashcode != "UP_4_" {
			t.Fatalf("%s regions=b: %v %q, want %v", n.name, got.IDs(), doc.Hashcode, want)
		}
	}
	for _, n := range []*Node{b1, b2} {
		doc := docOf(n, "/apps", "?regions=a")
		w := append(rb.ids("", nil), ra.ids("a", nil)...)
		sort.Strings(w)
		if got := regionstest.CopyOf(doc).IDs(); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s regions=a: %v, want %v", n.name, got, w)
		}
	}

	// checkViews: every running node's view of the other region is that
	// region as it is now (whitelisted on a's side), fetched at the last
	// step; nothing of a node's own region comes back to it.
	checkViews := func(round int) {
		t.Helper()
		for _, n := range running {
			v, st := fetcher(n).View(), fetcher(n).Stats()
			var want []string
			if n.settings.Regions.LocalRegion == "a" {
				want = rb.ids("b", allowedB)
			} else {
				want = ra.ids("a", nil)
			}
			if got := viewIDs(v); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("round %d: %s's view of %s\n%v\nwant\n%v", round, n.name, v.Region, got, want)
			}
			if !v.HasData || !v.Fetched.Equal(clock.Now()) {
				t.Errorf("round %d: %s's view of %s fetched at %v (has data %v), last step at %v: %+v", round, n.name, v.Region, v.Fetched, v.HasData, clock.Now(), st)
			}
			if st.Mirrored != 0 {
				t.Errorf("round %d: %s was served %d marked (mirrored) instances of %s", round, n.name, st.Mirrored, v.Region)
			}
		}
	}
	checkViews(0)

	// Churn on random nodes of both clusters: register, cancel, status.
	rng := rand.New(rand.NewPCG(37, 2))
	// An instance is written at most once a round, and not in the round it
	// came: the nodes of a region settle only between rounds, and a write
	// to a node that has not yet got the instance is a 404 as in Eureka
	// (two writes of one instance on two nodes at once are not this test's
	// matter).
	churn := func(r *clusterRegion, round int) {
		t.Helper()
		done := map[string]bool{}
		for k := 0; k < 3; k++ {
			n := r.nodes[rng.IntN(len(r.nodes))]
			var pick []int
			for i, id := range r.order {
				if !done[id] {
					pick = append(pick, i)
				}
			}
			switch op := rng.IntN(4); {
			case op <= 1 || len(pick) == 0:
				id := fmt.Sprintf("%s-%d-%d", n.name, round, k)
				app := []string{"ORDERS", "USERS", "CART"}[rng.IntN(3)]
				register(t, n, app, id)
				r.add(app, id)
				done[id] = true
			case op == 2:
				i := pick[rng.IntN(len(pick))]
				id := r.order[i]
				if code := call(t, "DELETE", "http://"+n.Addr()+"/eureka/apps/"+r.live[id].app+"/"+id, ""); code != 200 {
					t.Fatalf("cancel %s on %s: %d", id, n.name, code)
				}
				r.remove(i)
			default:
				id := r.order[pick[rng.IntN(len(pick))]]
				done[id] = true
				st := []string{"DOWN", "UP", "OUT_OF_SERVICE"}[rng.IntN(3)]
				if code := call(t, "PUT", "http://"+n.Addr()+"/eureka/apps/"+r.live[id].app+"/"+id+"/status?value="+st, ""); code != 200 {
					t.Fatalf("status %s of %s on %s: %d", st, id, n.name, code)
				}
				r.live[id] = liveInstance{app: r.live[id].app, status: st}
			}
		}
	}

	type client struct {
		copy regionstest.ClientCopy
		n    *Node
		q    string
	}
	clients := []*client{
		{regionstest.CopyOf(docOf(a1, "/apps", "?regions=b")), a1, "?regions=b"},
		{regionstest.CopyOf(docOf(b2, "/apps", "?regions=a")), b2, "?regions=a"},
		{regionstest.CopyOf(docOf(a2, "/apps", "")), a2, ""},
	}
	mismatches, fallbackServed := 0, 0
	const failAt = 10
	var errsBefore map[*Node]uint64
	// 20 rounds of one fetch interval: 10 minutes of churn on the clock.
	for round := 1; round <= 20; round++ {
		if round == failAt {
			// b1 stops; a's fetchers, which list it first, go on with b2.
			errsBefore = map[*Node]uint64{a1: fetcher(a1).Stats().Errors, a2: fetcher(a2).Stats().Errors}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := b1.Shutdown(ctx); err != nil {
				t.Errorf("b1's shutdown: %v", err)
			}
			cancel()
			rb.nodes = []*Node{b2}
			running = []*Node{a1, a2, b2}
			waitFor(t, 15*time.Second, "b2 sees b1 gone", func() bool { return len(b2.currentPeers()) == 0 })
		}
		churn(ra, round)
		churn(rb, round)
		ra.settled(t)
		rb.settled(t)
		step()
		if round == failAt {
			for _, n := range []*Node{a1, a2} {
				if st := fetcher(n).Stats(); st.Errors != errsBefore[n] {
					t.Errorf("%s's fetch of b failed with b1 down (b2 up): %+v", n.name, st)
				}
			}
		}
		checkViews(round)
		for _, c := range clients {
			d := docOf(c.n, "/apps/delta", c.q)
			c.copy.Apply(d, false)
			if c.copy.Hashcode() != d.Hashcode {
				mismatches++
				t.Errorf("round %d %s%s: copy %q, delta %q", round, c.n.name, c.q, c.copy.Hashcode(), d.Hashcode)
			}
			if f := regionstest.CopyOf(docOf(c.n, "/apps", c.q)); fmt.Sprint(f.IDs()) != fmt.Sprint(c.copy.IDs()) {
				mismatches++
				t.Errorf("round %d %s%s: copy after delta\n%v\nfull\n%v", round, c.n.name, c.q, c.copy.IDs(), f.IDs())
			}
		}
		// Either node of a asked regions=b: a's own and b's whitelisted,
		// exactly; never b's CART or SECRET.
		want := append(ra.ids("", nil), rb.ids("b", allowedB)...)
		sort.Strings(want)
		for _, n := range []*Node{a1, a2} {
			doc := docOf(n, "/apps", "?regions=b")
			if got := regionstest.CopyOf(doc); fmt.Sprint(got.IDs()) != fmt.Sprint(want) || got.Hashcode() != doc.Hashcode {
				t.Errorf("round %d: %s regions=b\n%v %q\nwant\n%v", round, n.name, got.IDs(), doc.Hashcode, want)
			}
		}
		// The plain client of a2 (transparent fallback) gets b's apps
		// unknown in a, whitelisted ones only.
		for _, id := range clients[2].copy.IDs() {
			if strings.HasSuffix(id, "@b") && !allowedB[id[:strings.IndexByte(id, '/')]] {
				t.Errorf("round %d: a2 serves %s off the whitelist", round, id)
			}
			if strings.HasSuffix(id, "@b") {
				fallbackServed++
			}
		}
	}
	if mismatches != 0 {
		t.Errorf("%d mismatches", mismatches)
	}
	for _, n := range all {
		// One full fetch (the first that reached the remote), deltas after.
		st := fetcher(n).Stats()
		if st.Mismatches != 0 || st.DeltaFetches == 0 || st.FullFetches != 1 || st.Mirrored != 0 {
			t.Errorf("%s's fetcher of %s: %+v", n.name, fetcher(n).Region(), st)
		}
		t.Logf("%s's fetcher of %s: %+v", n.name, fetcher(n).Region(), st)
	}
	// No mirroring: every instance a serves as b's was registered in b,
	// every one b serves as a's in a, and each region's local ones are its
	// own.
	for _, c := range []struct {
		n            *Node
		q            string
		local, other string
	}{{a1, "?regions=b", "a", "b"}, {a2, "?regions=b", "a", "b"}, {b2, "?regions=a", "b", "a"}} {
		for _, id := range regionstest.CopyOf(docOf(c.n, "/apps", c.q)).IDs() {
			region := id[strings.LastIndexByte(id, '@')+1:]
			registeredIn := id[strings.IndexByte(id, '/')+1:][:1]
			if (region == "" && registeredIn != c.local) || (region != "" && (region != c.other || registeredIn != c.other)) {
				t.Errorf("%s%s serves %s", c.n.name, c.q, id)
			}
		}
	}
	for _, n := range running {
		if n.reg.Len() != len(map[bool]*clusterRegion{true: ra, false: rb}[n.settings.Regions.LocalRegion == "a"].live) {
			t.Errorf("%s's registry holds %d instances", n.name, n.reg.Len())
		}
	}
	t.Logf("two clusters as regions: %v; the plain client of a2 held %d instance-rounds of b by the fallback", time.Since(start), fallbackServed)
}

package registry_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func describe(evs []registry.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d %s %s %s", ev.Seq, ev.Kind, ev.Key, ev.Origin))
	}
	return out
}

func TestCursor_Read_everyChangeInOrder(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	cur := r.Subscribe()
	defer cur.Close()
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "b")).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.RenewOp("APP", "a")); err != nil { // no event: renewals change no version
		t.Fatal(err)
	}
	for _, op := range []registry.Op{
		registry.StatusOp("APP", "a", registry.StatusDown),
		registry.DeleteOverrideOp("APP", "a", registry.StatusUp),
		registry.MetadataOp("APP", "a", map[string]string{"v": "2"}),
		registry.CancelOp("APP", "a"),
	} {
		if _, err := r.Apply(op); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-cur.Ready():
	default:
		t.Fatal("cursor not woken")
	}
	clk.Advance(5 * time.Minute)
	if n := len(r.EvictExpired()); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	if lag := cur.Lag(); lag != 7 {
		t.Fatalf("Lag() = %d, want 7", lag)
	}
	evs, resync := cur.Read(make([]registry.Event, 0, 3))
	if resync || len(evs) != 3 {
		t.Fatalf("Read with room for 3 = %d events, resync %v", len(evs), resync)
	}
	rest, _ := cur.Read(nil)
	got := describe(append(evs, rest...))
	want := []string{
		"1 register APP/a client", "2 register APP/b peer", "3 status APP/a client",
		"4 delete-override APP/a client", "5 metadata APP/a client", "6 cancel APP/a client",
		"7 evict APP/b node",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream\n%v\nwant\n%v", got, want)
	}
	if v := r.Version(); v != 7 || cur.Head() != 7 {
		t.Fatalf("Version() = %d, Head() = %d, want 7: Seq is the version", v, cur.Head())
	}
	if evs, _ := cur.Read(nil); len(evs) != 0 {
		t.Fatalf("read past the head: %v", describe(evs))
	}
}

func TestCursor_Read_slowConsumerResyncs(t *testing.T) {
	r, _ := mustNew(t, func(c *registry.Config) { c.OutboxSize = 4 })
	slow := r.Subscribe()
	defer slow.Close()
	registerN(t, r, 5) // one more than the outbox holds
	evs, resync := slow.Read(nil)
	if !resync || len(evs) != 0 {
		t.Fatalf("Read() = %d events, resync %v; want a resync, not a gap", len(evs), resync)
	}
	if snap := r.Snapshot(); snap.Version < 5 || snap.Instances != 5 {
		t.Fatalf("snapshot after resync: version %d, %d instances", snap.Version, snap.Instances)
	}
	mustRegister(t, r, registrytest.NewInstance("APP", "later"))
	evs, resync = slow.Read(nil)
	if resync || fmt.Sprint(describe(evs)) != "[6 register APP/later client]" {
		t.Fatalf("after resync: %v, resync %v", describe(evs), resync)
	}
}

func TestRegistry_TakeRenewals_coalescedAndCurrent(t *testing.T) {
	r, _ := mustNew(t)
	keys := registerN(t, r, 3)
	ready := r.RenewalsReady()
	for range 3 {
		renewAll(t, r, keys[:2])
	}
	if _, err := r.Apply(registry.RenewOp("APP", "i-2").From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	default:
		t.Fatal("renewal feed not woken")
	}
	got := r.TakeRenewals(nil)
	if len(got) != 1 || got[0].Key != keys[0] || got[0].Instance.ID() != "i-0" {
		t.Fatalf("TakeRenewals() = %+v; want i-0 once (i-1 was cancelled, i-2 renewed by a peer)", got)
	}
	if again := r.TakeRenewals(nil); len(again) != 0 {
		t.Fatalf("second take = %+v, want nothing", again)
	}
	renewAll(t, r, keys[:1])
	if again := r.TakeRenewals(nil); len(again) != 1 {
		t.Fatalf("after a new renewal: %+v, want i-0", again)
	}
	if st := r.Stats(); st.Renewals != 8 {
		t.Fatalf("Stats().Renewals = %d, want 8", st.Renewals)
	}
}

// A lease renewed, then cancelled and registered again before the take, is
// not reported: the old lease left the registry and the new one was not
// renewed. Once the new one is renewed it is reported once, with the new
// instance.
func TestRegistry_TakeRenewals_cancelledAndRegisteredAgain(t *testing.T) {
	r, _ := mustNew(t)
	keys := registerN(t, r, 2)
	r.RenewalsReady()
	renewAll(t, r, keys)
	if _, err := r.Apply(registry.CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	again := registrytest.NewInstance("APP", "i-1", registrytest.WithMetadata(map[string]string{"generation": "2"}))
	mustRegister(t, r, again)
	got := r.TakeRenewals(nil)
	if len(got) != 1 || got[0].Key != keys[0] {
		t.Fatalf("TakeRenewals() = %+v; want i-0 only (i-1 was cancelled and registered again, not renewed)", got)
	}
	renewAll(t, r, keys[1:])
	got = r.TakeRenewals(nil)
	if len(got) != 1 || got[0].Key != keys[1] || !hasGeneration2(got[0].Instance) {
		t.Fatalf("TakeRenewals() = %+v; want the new i-1 once", got)
	}
}

// A flood of renewals, taken whenever RenewalsBacklogged fires, is taken
// in rounds of at most the bound, and of at least its share for one
// processor; every lease is taken once, and a take leaves no stale wake-up
// behind.
func TestRegistry_RenewalsBacklogged_floodTakenInBoundedRounds(t *testing.T) {
	r, _ := mustNew(t)
	const bound, n = 100, 1050
	keys := registerN(t, r, n)
	ready := r.RenewalsReady()
	full := r.RenewalsBacklogged(bound)
	minRound := bound / min(runtime.GOMAXPROCS(0), 16)
	taken := map[registry.InstanceKey]int{}
	rounds := 0
	take := func() int {
		got := r.TakeRenewals(nil)
		for _, rn := range got {
			taken[rn.Key]++
		}
		select {
		case <-ready:
			t.Fatal("RenewalsReady holds a wake-up for renewals already taken")
		case <-full:
			t.Fatal("RenewalsBacklogged holds a wake-up for renewals already taken")
		default:
		}
		return len(got)
	}
	for i, k := range keys {
		renewAll(t, r, []registry.InstanceKey{k})
		select {
		case <-full:
			rounds++
			if got := take(); got > bound || got < minRound {
				t.Fatalf("round %d (after renewal %d) took %d renewals, want %d to %d", rounds, i, got, minRound, bound)
			}
		default:
		}
	}
	rest := take()
	if rounds < (n-bound)/bound || rest >= bound {
		t.Fatalf("%d rounds taken on the bound, then %d renewals; want at least %d, then fewer than %d", rounds, rest, (n-bound)/bound, bound)
	}
	for _, k := range keys {
		if taken[k] != 1 {
			t.Fatalf("%s taken %d times, want once", k, taken[k])
		}
	}
	// Off: no poke however many wait.
	r.RenewalsBacklogged(0)
	renewAll(t, r, keys)
	select {
	case <-full:
		t.Fatal("RenewalsBacklogged(0) still fires")
	default:
	}
	if got := len(r.TakeRenewals(nil)); got != n {
		t.Fatalf("took %d renewals, want %d", got, n)
	}
}

func TestRegistry_BeginSync_tombstonesAndReplays(t *testing.T) {
	r, _ := mustNew(t)
	r.BeginSync()
	if !r.Syncing() {
		t.Fatal("Syncing() = false during a copy")
	}
	// A peer cancels and sets a status while the copy is on its way.
	if _, err := r.Apply(registry.CancelOp("APP", "gone").From(registry.OriginPeer)); err == nil {
		t.Fatal("cancel of an unknown instance succeeded")
	}
	if _, err := r.Apply(registry.StatusOp("app", "oos", registry.StatusOutOfService).From(registry.OriginPeer)); err == nil {
		t.Fatal("status of an unknown instance succeeded")
	}
	for _, id := range []string{"gone", "oos"} {
		if _, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("APP", id)).From(registry.OriginSync)); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.EndSync(); n != 1 || r.Syncing() {
		t.Fatalf("EndSync() = %d, Syncing %v; want one replay", n, r.Syncing())
	}
	if _, ok := r.Instance("APP", "gone"); ok {
		t.Fatal("the copy brought back an instance cancelled during it")
	}
	if iv, _ := r.Instance("APP", "oos"); iv.Status != registry.StatusOutOfService {
		t.Fatalf("status set during the copy lost: %s", iv.Status)
	}
}

func TestRegistry_ReadsAllowed_startUp(t *testing.T) {
	r, clk := mustNew(t)
	if r.Opened() || r.ReadsAllowed() {
		t.Fatal("open before OpenForTraffic")
	}
	r.RefuseReadsFor(5 * time.Minute)
	r.OpenForTraffic()
	if !r.Opened() || r.ReadsAllowed() {
		t.Fatalf("Opened %v, ReadsAllowed %v; want open and refusing", r.Opened(), r.ReadsAllowed())
	}
	clk.Advance(5 * time.Minute)
	if !r.ReadsAllowed() {
		t.Fatal("still refusing reads after the wait")
	}
}

func hasGeneration2(in *registry.Instance) bool {
	v, ok := in.Metadata.Get("generation")
	return ok && v == "2"
}

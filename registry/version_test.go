package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/rs/zerolog"
)

// copyOf returns a versioned copy of in as a peer would send it.
func copyOf(in *registry.Instance, mutate func(*registry.Instance)) *registry.Instance {
	c := in.Clone()
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestVersions_everyClientWriteGetsALargerVersion(t *testing.T) {
	r, clk := mustNew(t)
	in := mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	v := in.WriteVersion
	if v == 0 || !registry.VersionTime(v).Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Fatalf("register version %d (%s), want the clock's ms", v, registry.VersionTime(v))
	}
	ops := []registry.Op{
		registry.StatusOp("APP", "i-1", registry.StatusOutOfService),
		registry.DeleteOverrideOp("APP", "i-1", registry.StatusUp),
		registry.MetadataOp("APP", "i-1", map[string]string{"k": "v"}),
		registry.RegisterOp(registrytest.NewInstance("APP", "i-1")),
	}
	for _, op := range ops {
		got, err := r.Apply(op)
		if err != nil {
			t.Fatal(err)
		}
		if got.CopyVersion() <= v {
			t.Fatalf("%s: version %d not above %d", op.Kind, got.CopyVersion(), v)
		}
		v = got.CopyVersion()
	}
	before := r.RootDigest()
	if _, err := r.Apply(registry.RenewOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	if iv, _ := r.Instance("APP", "i-1"); iv.CopyVersion() != v || r.RootDigest() != before {
		t.Fatalf("a renewal changed the version or digest")
	}
	removed, err := r.Apply(registry.CancelOp("APP", "i-1"))
	if err != nil || removed.WriteVersion <= v {
		t.Fatalf("cancel: %v, version %d, want > %d", err, removed.WriteVersion, v)
	}
	if tv, ok := r.Tombstone("APP", "i-1"); !ok || tv != removed.WriteVersion {
		t.Fatalf("tombstone %d %v, want %d", tv, ok, removed.WriteVersion)
	}
	if r.RootDigest() != 0 {
		t.Fatalf("empty registry has root digest %x", r.RootDigest())
	}
}

func TestVersions_peerCopyWinsOnlyWhenNewer(t *testing.T) {
	r, clk := mustNew(t)
	in := mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	older := copyOf(in, func(c *registry.Instance) { c.Status = registry.StatusDown; c.WriteVersion-- })
	if got, _ := r.Apply(registry.RegisterOp(older).From(registry.OriginPeer)); got.Status != registry.StatusUp {
		t.Fatalf("an older copy replaced a newer one: %s", got.Status)
	}
	newer := copyOf(in, func(c *registry.Instance) {
		c.Status, c.OverriddenStatus = registry.StatusOutOfService, registry.StatusOutOfService
		c.WriteVersion += 5 << 16
	})
	got, err := r.Apply(registry.RegisterOp(newer).From(registry.OriginPeer))
	if err != nil || got.Status != registry.StatusOutOfService || got.WriteVersion != newer.WriteVersion {
		t.Fatalf("newer copy: %v %+v", err, got)
	}
	// The clock observed the peer's version: the next local write is later.
	clk.Advance(time.Millisecond)
	local, err := r.Apply(registry.MetadataOp("APP", "i-1", map[string]string{"a": "b"}))
	if err != nil || local.CopyVersion() <= newer.WriteVersion {
		t.Fatalf("local write after a copy from a clock ahead: %d ≤ %d (%v)", local.CopyVersion(), newer.WriteVersion, err)
	}
	// Equal versions, different content: every node picks the same, in
	// whichever order the copies come.
	tieA := copyOf(newer, func(c *registry.Instance) { c.HostName = "a"; c.WriteVersion += 1 << 16 })
	tieB := copyOf(tieA, func(c *registry.Instance) { c.HostName = "b" })
	r.Apply(registry.RegisterOp(tieA).From(registry.OriginPeer))
	r.Apply(registry.RegisterOp(tieB).From(registry.OriginPeer))
	r2, _ := mustNew(t)
	r2.Apply(registry.RegisterOp(tieB.Clone()).From(registry.OriginPeer))
	r2.Apply(registry.RegisterOp(tieA.Clone()).From(registry.OriginPeer))
	a, _ := r.Instance("APP", "i-1")
	b, _ := r2.Instance("APP", "i-1")
	if a.HostName != b.HostName || a.HostName != "a" && a.HostName != "b" {
		t.Fatalf("tie went to %s on one node and %s on the other", a.HostName, b.HostName)
	}
}

func TestTombstones_keepLateCopiesOut(t *testing.T) {
	r, clk := mustNew(t)
	in := mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	removed, err := r.Apply(registry.CancelOp("APP", "i-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []registry.Origin{registry.OriginPeer, registry.OriginSync, registry.OriginAntiEntropy} {
		if got, _ := r.Apply(registry.RegisterOp(in.Clone()).From(o)); got != nil {
			t.Fatalf("a late copy from %s brought a cancelled instance back", o)
		}
	}
	// Unversioned copies (a Java peer's registry) from syncUp or
	// anti-entropy are kept out as well.
	for _, o := range []registry.Origin{registry.OriginSync, registry.OriginAntiEntropy} {
		c := in.Clone()
		c.WriteVersion = 0
		if got, _ := r.Apply(registry.RegisterOp(c).From(o)); got != nil {
			t.Fatalf("an unversioned copy from %s came back", o)
		}
	}
	// A newer write (made after the cancel elsewhere) does come back.
	back := in.Clone()
	back.WriteVersion = removed.WriteVersion + 1
	if got, _ := r.Apply(registry.RegisterOp(back).From(registry.OriginPeer)); got == nil {
		t.Fatal("a register newer than the cancel was refused")
	}
	if _, ok := r.Tombstone("APP", "i-1"); ok {
		t.Fatal("tombstone kept after the instance came back")
	}
	// A stale cancel (older than the stored copy) changes nothing.
	stale := registry.CancelOp("APP", "i-1").From(registry.OriginPeer)
	stale.Version = removed.WriteVersion
	if _, err := r.Apply(stale); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Instance("APP", "i-1"); !ok {
		t.Fatal("a stale cancel removed a newer instance")
	}
	// A peer's cancel of an instance not here yet leaves a tombstone.
	early := registry.CancelOp("APP", "i-2").From(registry.OriginPeer)
	early.Version = back.WriteVersion + 10
	if _, err := r.Apply(early); err == nil {
		t.Fatal("cancel of an unknown instance: want not found")
	}
	late := registrytest.NewInstance("APP", "i-2")
	late.WriteVersion = early.Version - 1
	if got, _ := r.Apply(registry.RegisterOp(late).From(registry.OriginPeer)); got != nil {
		t.Fatal("a register older than a cancel that came first was applied")
	}
	// Tombstones expire after lease + grace, at an eviction run.
	clk.Advance(90*time.Second + registry.DefaultConfig().TombstoneGrace + time.Second)
	r.EvictExpired()
	if st := r.Tombstones(); st.Kept != 0 {
		t.Fatalf("%d tombstones kept after their time", st.Kept)
	}
}

func TestTombstones_bounded(t *testing.T) {
	r, _ := mustNew(t, func(c *registry.Config) { c.MaxTombstones = 3 })
	keys := registerN(t, r, 5)
	for _, k := range keys {
		if _, err := r.Apply(registry.CancelOp(k.App, k.ID)); err != nil {
			t.Fatal(err)
		}
	}
	st := r.Tombstones()
	if st.Kept != 3 || st.Dropped != 2 {
		t.Fatalf("tombstones %+v, want 3 kept, 2 dropped", st)
	}
	if _, ok := r.Tombstone("APP", keys[0].ID); ok {
		t.Fatal("the oldest tombstone was kept")
	}
	for _, k := range keys[2:] {
		if _, ok := r.Tombstone("APP", k.ID); !ok {
			t.Fatalf("%s: a newer tombstone was dropped", k)
		}
	}
}

func TestDigests_incrementalMatchesRecount(t *testing.T) {
	r, clk := mustNew(t)
	r2, _ := mustNew(t)
	keys := registerN(t, r, 20)
	r.Apply(registry.StatusOp("APP", keys[3].ID, registry.StatusOutOfService))
	r.Apply(registry.MetadataOp("APP", keys[4].ID, map[string]string{"x": "y"}))
	r.Apply(registry.CancelOp("APP", keys[5].ID))
	clk.Advance(time.Minute)
	// Another registry holding the same copies has the same digests.
	for _, app := range r.Snapshot().Apps {
		for _, iv := range app.Instances {
			r2.Apply(registry.RegisterOp(iv.Instance.Clone()).From(registry.OriginAntiEntropy))
		}
	}
	if r.RootDigest() != r2.RootDigest() || r.RootDigest() == 0 {
		t.Fatalf("root digests %x and %x", r.RootDigest(), r2.RootDigest())
	}
	var sum uint64
	for _, app := range r.Snapshot().Apps {
		for _, iv := range app.Instances {
			sum += registry.InstanceDigest(iv.Instance)
		}
	}
	if sum != r.RootDigest() {
		t.Fatalf("root %x, recount %x", r.RootDigest(), sum)
	}
	if d := r.AppDigests(nil); len(d) != 1 || d["APP"] != sum {
		t.Fatalf("app digests %v", d)
	}
	if n := len(r.AppEntries("APP", nil)); n != 20 { // 19 instances + 1 tombstone
		t.Fatalf("%d entries", n)
	}
}

func TestAntiEntropyAdoption_keepsTheHoldersRenewal(t *testing.T) {
	r, clk := mustNew(t)
	src, _ := mustNew(t)
	in := mustRegister(t, src, registrytest.NewInstance("APP", "i-1"))
	renewed := clk.Now().Add(-80 * time.Second)
	op := registry.RegisterOp(in.Clone()).From(registry.OriginAntiEntropy)
	op.RenewedAt = renewed
	if _, err := r.Apply(op); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Copy("APP", "i-1")
	if !c.LastRenewal.Equal(renewed) {
		t.Fatalf("adopted lease renewed at %s, want %s", c.LastRenewal, renewed)
	}
	clk.Advance(11 * time.Second)
	if c, _ := r.Copy("APP", "i-1"); c.Live {
		t.Fatal("adopted copy outlived the holder's lease")
	}
}

// The running digest sums equal a recount after any sequence of writes,
// cancels, evictions and peer copies.
func TestDigests_propertyRunningSumsMatchRecount(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 3000 {
		registrytest.RandomChange(r, clk, rng, 4)
		if i%7 == 0 {
			// A peer's copy, older or newer than the stored one.
			in := registrytest.NewInstance(fmt.Sprint("APP-", rng.IntN(4)), fmt.Sprint("i-", rng.IntN(30)))
			in.WriteVersion = uint64(clk.Now().UnixMilli())<<16 + uint64(rng.IntN(1<<17)) - 1<<16
			r.Apply(registry.RegisterOp(in).From(registry.OriginPeer))
		}
		if i%50 != 0 {
			continue
		}
		apps := map[string]uint64{}
		var root uint64
		for _, app := range r.Snapshot().Apps {
			for _, iv := range app.Instances {
				d := registry.InstanceDigest(iv.Instance)
				apps[app.Name] += d
				root += d
			}
		}
		if got := r.RootDigest(); got != root {
			t.Fatalf("step %d: root %x, recount %x", i, got, root)
		}
		got := r.AppDigests(nil)
		if len(got) != len(apps) {
			t.Fatalf("step %d: %d app digests, %d apps", i, len(got), len(apps))
		}
		for app, d := range apps {
			if got[app] != d {
				t.Fatalf("step %d: %s digest %x, recount %x", i, app, got[app], d)
			}
		}
	}
}

// A peer whose clock runs far ahead (or a corrupt version) must not drag
// this node's clock with it: every later write here would then carry that
// future time, and the copy would win against every real later write made
// on a node that has not seen it. Versions more than Limits.MaxClockSkew
// ahead are refused (ErrClockSkew) and not observed; the maximum version
// would otherwise wrap the clock to 0.
func TestVersions_farFutureVersionIsRefusedAndNotObserved(t *testing.T) {
	r, clk := mustNew(t)
	in := mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	skew := registry.DefaultLimits().MaxClockSkew
	future := uint64(clk.Now().Add(skew+time.Second).UnixMilli()) << 16
	for _, v := range []uint64{future, ^uint64(0)} {
		bad := copyOf(in, func(c *registry.Instance) { c.Status = registry.StatusDown; c.WriteVersion = v })
		if _, err := r.Apply(registry.RegisterOp(bad).From(registry.OriginPeer)); !errors.Is(err, registry.ErrClockSkew) {
			t.Fatalf("copy at version %d: %v, want ErrClockSkew", v, err)
		}
		cancel := registry.CancelOp("APP", "i-1").From(registry.OriginAntiEntropy)
		cancel.Version = v
		if _, err := r.Apply(cancel); !errors.Is(err, registry.ErrClockSkew) {
			t.Fatalf("cancel at version %d: %v, want ErrClockSkew", v, err)
		}
		gone := registry.CancelOp("APP", "never-here").From(registry.OriginPeer)
		gone.Version = v
		if _, err := r.Apply(gone); !errors.Is(err, registry.ErrClockSkew) {
			t.Fatalf("cancel of an unknown instance at version %d: %v, want ErrClockSkew", v, err)
		}
	}
	if _, ok := r.Tombstone("APP", "never-here"); ok {
		t.Fatal("a far-future cancel left a tombstone")
	}
	iv, _ := r.Instance("APP", "i-1")
	if iv.Status != registry.StatusUp || iv.WriteVersion != in.WriteVersion {
		t.Fatalf("stored copy changed: %s at %d", iv.Status, iv.WriteVersion)
	}
	clk.Advance(time.Millisecond)
	got, err := r.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
	if err != nil {
		t.Fatal(err)
	}
	if vt := registry.VersionTime(got.CopyVersion()); !vt.Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Fatalf("next local write stamped %s, want the local clock %s", vt, clk.Now())
	}
	// A start-up copy (syncUp, snapshot) is loaded without its version
	// rather than lost.
	farCopy := registrytest.NewInstance("APP", "from-snapshot")
	farCopy.WriteVersion = future
	if stored, err := r.Apply(registry.RegisterOp(farCopy).From(registry.OriginSync)); err != nil || stored.WriteVersion != 0 {
		t.Fatalf("far-future start-up copy: %v %+v, want it stored at version 0", err, stored)
	}
	// Within the skew a copy is taken and observed, as before.
	ahead := copyOf(got, func(c *registry.Instance) { c.WriteVersion = uint64(clk.Now().Add(skew-time.Second).UnixMilli()) << 16 })
	if stored, err := r.Apply(registry.RegisterOp(ahead).From(registry.OriginPeer)); err != nil || stored.WriteVersion != ahead.WriteVersion {
		t.Fatalf("copy within the skew: %v", err)
	}
}

// Tombstones of different lease durations expire out of insertion order:
// the cancel of a day-long lease must not hold back the pruning of the
// 90-second ones made after it (they would pile up to the bound, and the
// bound would then drop the long one, which still guards its instance,
// first).
func TestTombstones_longLeaseDoesNotStallPruning(t *testing.T) {
	r, clk := mustNew(t, func(c *registry.Config) { c.MaxTombstones = 50; c.SelfPreservation = false })
	mustRegister(t, r, registrytest.NewInstance("APP", "long", registrytest.WithLeaseDuration(86400)))
	if _, err := r.Apply(registry.CancelOp("APP", "long")); err != nil {
		t.Fatal(err)
	}
	for i := range 200 { // 2,000 s of churn: ~12 unexpired 90 s tombstones at a time
		id := fmt.Sprint("short-", i)
		mustRegister(t, r, registrytest.NewInstance("APP", id))
		if _, err := r.Apply(registry.CancelOp("APP", id)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Second)
		r.EvictExpired()
	}
	if _, ok := r.Tombstone("APP", "long"); !ok {
		t.Fatal("the day-long lease's tombstone went after 2,000 s")
	}
	if st := r.Tombstones(); st.Dropped != 0 || st.Kept > 20 {
		t.Fatalf("tombstones %+v: expired ones were not pruned", st)
	}
	clk.Advance(86400 * time.Second)
	r.EvictExpired()
	if st := r.Tombstones(); st.Kept != 0 {
		t.Fatalf("%d tombstones kept a day later", st.Kept)
	}
}

// A key cancelled and registered again over and over leaves one live
// tombstone at a time (the heap drops the replaced ones as it goes), and
// the last one still expires on time.
func TestTombstones_registerCancelLoop(t *testing.T) {
	r, clk := mustNew(t, func(c *registry.Config) { c.SelfPreservation = false })
	for i := range 5000 {
		mustRegister(t, r, registrytest.NewInstance("APP", "flap", registrytest.WithLeaseDuration(86400)))
		if _, err := r.Apply(registry.CancelOp("APP", "flap")); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // and a short one alongside, expiring as it goes
			id := fmt.Sprint("short-", i)
			mustRegister(t, r, registrytest.NewInstance("APP", id))
			if _, err := r.Apply(registry.CancelOp("APP", id)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Second)
		r.EvictExpired()
	}
	if st := r.Tombstones(); st.Dropped != 0 || st.Kept > 70 {
		t.Fatalf("tombstones %+v", st)
	}
	if _, ok := r.Tombstone("APP", "flap"); !ok {
		t.Fatal("the last cancel left no tombstone")
	}
	clk.Advance(86400*time.Second + time.Minute)
	r.EvictExpired()
	if st := r.Tombstones(); st.Kept != 0 {
		t.Fatalf("%d tombstones kept after they all expired", st.Kept)
	}
}

// Versions only grow when the clock steps back (NTP, a VM restored), and
// follow the clock again once it has caught up.
func TestVersions_monotonicWhenTheClockStepsBack(t *testing.T) {
	r, clk := mustNew(t)
	last := mustRegister(t, r, registrytest.NewInstance("APP", "i-1")).WriteVersion
	write := func(i int) {
		t.Helper()
		got, err := r.Apply(registry.MetadataOp("APP", "i-1", map[string]string{"n": fmt.Sprint(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if got.CopyVersion() <= last {
			t.Fatalf("write %d: version %d not above %d", i, got.CopyVersion(), last)
		}
		last = got.CopyVersion()
	}
	for i := range 10 {
		write(i)
	}
	clk.Set(clk.Now().Add(-time.Hour))
	for i := range 10 {
		write(i)
	}
	clk.Set(clk.Now().Add(2 * time.Hour))
	write(0)
	if !registry.VersionTime(last).Equal(clk.Now().Truncate(time.Millisecond)) {
		t.Fatalf("after the clock caught up, version time %s, want %s", registry.VersionTime(last), clk.Now())
	}
}

// A node that held a stale copy of an instance through a partition (its
// evictions held) takes a metadata write and an override on it; the
// instance lived on elsewhere, registered again there before those writes.
// When the partition heals, this node may evict its stale copy before the
// live registration reaches it: the writes made after that registration
// must survive, as they do when the registration comes first (the chaos
// checker's final-state check, seed 3, caught the eviction-first order
// losing the metadata write).
func TestEviction_keepsPiecesWrittenAfterTheLiveRegistration(t *testing.T) {
	for _, evictFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("evictFirst=%v", evictFirst), func(t *testing.T) {
			here, clk := mustNew(t, selfPreservationOff)
			there, thereClk := mustNew(t, selfPreservationOff)
			stale := mustRegister(t, there, registrytest.NewInstance("APP", "i-1", registrytest.WithMetadata(map[string]string{"k": "r1"})))
			if _, err := here.Apply(registry.RegisterOp(stale.Clone()).From(registry.OriginPeer)); err != nil {
				t.Fatal(err)
			}
			// Partitioned: the client cancels and registers again there.
			thereClk.Advance(20 * time.Second)
			if _, err := there.Apply(registry.CancelOp("APP", "i-1")); err != nil {
				t.Fatal(err)
			}
			thereClk.Advance(2 * time.Second)
			live := mustRegister(t, there, registrytest.NewInstance("APP", "i-1", registrytest.WithMetadata(map[string]string{"k": "r2"})))
			// Later, the operator writes here, on the stale copy.
			clk.Advance(30 * time.Second)
			if _, err := here.Apply(registry.MetadataOp("APP", "i-1", map[string]string{"k": "m3"})); err != nil {
				t.Fatal(err)
			}
			if _, err := here.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService)); err != nil {
				t.Fatal(err)
			}
			drainedAt := clk.Now().UnixMilli()
			if _, err := here.Apply(registry.DrainOp("APP", "i-1", drainedAt, "here")); err != nil {
				t.Fatal(err)
			}
			clk.Advance(100 * time.Second) // the stale lease expires here
			thereClk.Advance(100 * time.Second)
			copyIn := func() {
				if _, err := here.Apply(registry.RegisterOp(live.Clone()).From(registry.OriginPeer)); err != nil {
					t.Fatal(err)
				}
			}
			if evictFirst {
				if got := here.EvictExpired(); len(got) != 1 {
					t.Fatalf("evicted %v, want the stale copy", got)
				}
				copyIn()
			} else {
				copyIn()
			}
			got, ok := here.Instance("APP", "i-1")
			if !ok {
				t.Fatal("the live registration did not arrive")
			}
			if k, _ := got.Metadata.Get("k"); k != "m3" {
				t.Errorf("metadata k = %q, want the operator's later write m3", k)
			}
			if got.OverriddenStatus != registry.StatusOutOfService || got.Status != registry.StatusOutOfService {
				t.Errorf("status %s override %s, want the operator's later OUT_OF_SERVICE", got.Status, got.OverriddenStatus)
			}
			if d, _, ok := here.Drain("APP", "i-1"); !ok || d.At != drainedAt {
				t.Errorf("drain %+v %v, want the operator's drain at %d", d, ok, drainedAt)
			}
			if got.WriteVersion != live.WriteVersion {
				t.Errorf("registration version %d, want the live one %d", got.WriteVersion, live.WriteVersion)
			}
		})
	}
}

// An evicted instance that registers again itself, here, starts without
// the override it had, as on a single Eureka server (eviction is a cancel
// there): the leftover of its eviction waits only for a peer's copy.
func TestEviction_clientRegisteringAgainHasNoOldOverride(t *testing.T) {
	r, clk := mustNew(t, selfPreservationOff)
	mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	if _, err := r.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(100 * time.Second)
	if got := r.EvictExpired(); len(got) != 1 {
		t.Fatalf("evicted %v", got)
	}
	again := mustRegister(t, r, registrytest.NewInstance("APP", "i-1"))
	if again.Status != registry.StatusUp || again.OverriddenStatus != registry.StatusUnknown {
		t.Fatalf("registered again after its eviction: status %s override %s, want UP without one", again.Status, again.OverriddenStatus)
	}
}

// TestEviction_leftoversAtTheBoundAreLogged: past the bound (MaxTombstones)
// an evicted copy's later pieces are not kept, and the eviction says so
// in a Warn line naming how many and the first instance; the one kept
// within the bound still reaches the next copy.
func TestEviction_leftoversAtTheBoundAreLogged(t *testing.T) {
	var logs bytes.Buffer
	// A peer's registrations, older than the writes made here.
	there, _ := mustNew(t, selfPreservationOff)
	live := map[string]*registry.Instance{}
	for _, id := range []string{"i-1", "i-2"} {
		live[id] = mustRegister(t, there, registrytest.NewInstance("APP", id))
	}
	r, clk := mustNew(t, selfPreservationOff, func(c *registry.Config) {
		c.MaxTombstones = 1
		c.Logger = zerolog.New(&logs)
	})
	clk.Advance(time.Second)
	for _, id := range []string{"i-1", "i-2"} {
		mustRegister(t, r, registrytest.NewInstance("APP", id))
		if _, err := r.Apply(registry.MetadataOp("APP", id, map[string]string{"k": "op-" + id})); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(200 * time.Second)
	if got := r.EvictExpired(); len(got) != 2 {
		t.Fatalf("evicted %v, want both", got)
	}
	var warned struct {
		Level   string `json:"level"`
		NotKept int    `json:"not_kept"`
		Limit   int    `json:"limit"`
		ID      string `json:"instance_id"`
	}
	for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
		if bytes.Contains(line, []byte(`"not_kept"`)) {
			if err := json.Unmarshal(line, &warned); err != nil {
				t.Fatal(err)
			}
		}
	}
	if warned.Level != "warn" || warned.NotKept != 1 || warned.Limit != 1 || (warned.ID != "i-1" && warned.ID != "i-2") {
		t.Fatalf("no Warn for the leftover past the bound: %+v in %s", warned, logs.String())
	}
	// The other one's write is merged into a peer's next copy.
	kept := "i-1"
	if warned.ID == "i-1" {
		kept = "i-2"
	}
	got, err := r.Apply(registry.RegisterOp(live[kept].Clone()).From(registry.OriginPeer))
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := got.Metadata.Get("k"); k != "op-"+kept {
		t.Errorf("%s's kept write: k = %q, want op-%s", kept, k, kept)
	}
}

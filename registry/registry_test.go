package registry_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func TestRegistry_Register_validation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*registry.Instance)
	}{
		{"no id or host", func(in *registry.Instance) { in.InstanceID, in.HostName = "", "" }},
		{"blank host", func(in *registry.Instance) { in.HostName = " " }},
		{"no ip", func(in *registry.Instance) { in.IPAddr = "" }},
		{"no app", func(in *registry.Instance) { in.App = "" }},
		{"no dataCenterInfo", func(in *registry.Instance) { in.DataCenterInfo = registry.DataCenterInfo{} }},
		{"bad status", func(in *registry.Instance) { in.Status = "SLEEPY" }},
		{"negative lease", func(in *registry.Instance) { in.LeaseDurationSecs = -1 }},
	}
	for _, tt := range tests {
		r, _ := mustNew(t)
		in := registrytest.NewInstance("APP", "a")
		tt.mutate(in)
		if _, err := r.Apply(registry.RegisterOp(in)); !errors.Is(err, registry.ErrInvalidInstance) {
			t.Errorf("%s: Register err = %v, want ErrInvalidInstance", tt.name, err)
		}
		if r.Len() != 0 || r.Version() != 0 {
			t.Errorf("%s: rejected register changed the registry", tt.name)
		}
	}
}

func TestRegistry_Register_idFallsBackToHostAndAmazonID(t *testing.T) {
	r, _ := mustNew(t)
	in := registrytest.NewInstance("APP", "")
	in.HostName = "plain-host"
	mustRegister(t, r, in)
	if _, ok := r.Instance("app", "plain-host"); !ok {
		t.Error("instance without instanceId not found by host name")
	}
	aws := registrytest.NewInstance("APP", "")
	aws.DataCenterInfo = registry.DataCenterInfo{Class: registry.DataCenterClassAmazon, Name: "Amazon",
		Metadata: registry.NewMetadata(map[string]string{"instance-id": "i-123"})}
	mustRegister(t, r, aws)
	if _, ok := r.Instance("APP", "i-123"); !ok {
		t.Error("Amazon instance not found by its EC2 instance-id")
	}
}

func TestRegistry_Renew_unknownInstance(t *testing.T) {
	r, _ := mustNew(t)
	if _, err := r.Apply(registry.RenewOp("APP", "nope")); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Fatalf("Renew err = %v, want ErrInstanceNotFound", err)
	}
}

func TestRegistry_Renew_appNameAnyCase(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("orders", "a"))
	if _, err := r.Apply(registry.RenewOp("Orders", "a")); err != nil {
		t.Fatalf("Renew with mixed-case app: %v", err)
	}
	if _, ok := r.Snapshot().App("ORDERS"); !ok {
		t.Fatal("app not stored upper-cased")
	}
}

func TestRegistry_Renew_allocatesNothing(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	op := registry.RenewOp("APP", "a")
	if n := testing.AllocsPerRun(1000, func() { _, _ = r.Apply(op) }); n != 0 {
		t.Errorf("Renew without a renewal consumer: %v allocs/op, want 0", n)
	}
	ready := r.RenewalsReady()
	var buf []registry.Renewal
	if n := testing.AllocsPerRun(1000, func() {
		_, _ = r.Apply(op)
		buf = r.TakeRenewals(buf)
	}); n != 0 {
		t.Errorf("Renew with the renewal feed on: %v allocs/op, want 0", n)
	}
	if _, err := r.Apply(op); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	default:
		t.Error("renewal feed not woken by a heartbeat")
	}
}

func TestRegistry_Renew_lastDirtyTimestamp(t *testing.T) {
	const stored = 1_000_000
	tests := []struct {
		name       string
		dirty      int64
		replicated bool
		wantErr    error
	}{
		{"none sent", 0, false, nil},
		{"equal", stored, false, nil},
		{"client has newer data: register again", stored + 1, false, registry.ErrNewerDirtyTimestamp},
		{"peer has newer data: register again", stored + 1, true, registry.ErrNewerDirtyTimestamp},
		{"client older: fine", stored - 1, false, nil},
		{"peer older: conflict, ours wins", stored - 1, true, registry.ErrStaleDirtyTimestamp},
	}
	for _, tt := range tests {
		r, _ := mustNew(t)
		mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(stored)))
		op := registry.RenewOp("APP", "a").Dirty(tt.dirty)
		if tt.replicated {
			op = op.From(registry.OriginPeer)
		}
		got, err := r.Apply(op)
		if !errors.Is(err, tt.wantErr) && !(err == nil && tt.wantErr == nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
		}
		if got == nil || got.LastDirtyTimestamp != stored {
			t.Errorf("%s: returned instance %+v, want the stored one", tt.name, got)
		}
		if r.Stats().Renewals != 1 {
			t.Errorf("%s: renewals = %d, want 1 (the lease is renewed in every case)", tt.name, r.Stats().Renewals)
		}
	}
}

func TestRegistry_Renew_peerOverrideIsStored(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(100)))
	op := registry.RenewOp("APP", "a").Dirty(200).From(registry.OriginPeer)
	op.OverriddenStatus = registry.StatusOutOfService
	_, err := r.Apply(op)
	if !errors.Is(err, registry.ErrNewerDirtyTimestamp) {
		t.Fatalf("err = %v", err)
	}
	iv, _ := r.Instance("APP", "a")
	if iv.Status != registry.StatusOutOfService || iv.OverriddenStatus != registry.StatusOutOfService {
		t.Fatalf("status %s override %s, want OUT_OF_SERVICE both", iv.Status, iv.OverriddenStatus)
	}
}

func TestRegistry_Register_dirtyTimestampDecidesWhichCopyWins(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(200), registrytest.WithVIP("new")))
	got := mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(100), registrytest.WithVIP("old")))
	if got.VIPAddress != "new" {
		t.Fatalf("older register replaced newer data: vip %q", got.VIPAddress)
	}
	got = mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(200), registrytest.WithVIP("tie")))
	if got.VIPAddress != "tie" {
		t.Fatalf("on a tie the incoming body must win: vip %q", got.VIPAddress)
	}
}

// A re-registration restarts leaseInfo.registrationTimestamp and keeps
// serviceUpTimestamp, as Eureka's register (a new Lease each time) and the
// Spring Cloud Eureka Server do.
func TestRegistry_Register_restartsRegistrationTimestamp(t *testing.T) {
	r, clk := mustNew(t)
	first := mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	clk.Advance(time.Minute)
	second := mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if second.RegistrationTimestamp != clk.Now().UnixMilli() || second.ServiceUpTimestamp != first.ServiceUpTimestamp {
		t.Fatalf("re-register: registrationTimestamp %d → %d (want now), serviceUpTimestamp %d → %d (want kept)",
			first.RegistrationTimestamp, second.RegistrationTimestamp, first.ServiceUpTimestamp, second.ServiceUpTimestamp)
	}
}

func TestRegistry_UpdateStatus_overrideOutlivesReRegisterButNotCancel(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	// The client re-registers claiming UP: the override holds.
	got := mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if got.Status != registry.StatusOutOfService || got.OverriddenStatus != registry.StatusOutOfService {
		t.Fatalf("after re-register: status %s override %s, want OUT_OF_SERVICE", got.Status, got.OverriddenStatus)
	}
	// A client that says DOWN is believed (DownOrStartingRule).
	got = mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithStatus(registry.StatusDown)))
	if got.Status != registry.StatusDown {
		t.Fatalf("client DOWN: status %s, want DOWN", got.Status)
	}
	if _, err := r.Apply(registry.CancelOp("APP", "a")); err != nil {
		t.Fatal(err)
	}
	got = mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if got.Status != registry.StatusUp || got.OverriddenStatus != registry.StatusUnknown {
		t.Fatalf("after cancel + register: status %s override %s, want UP, UNKNOWN", got.Status, got.OverriddenStatus)
	}
}

func TestRegistry_DeleteStatusOverride_forcesReRegister(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.DeleteOverrideOp("APP", "a", registry.StatusUnknown)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.RenewOp("APP", "a")); !errors.Is(err, registry.ErrStatusUnknown) {
		t.Fatalf("heartbeat after override removal: err = %v, want ErrStatusUnknown (404)", err)
	}
	got := mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	if got.Status != registry.StatusUp {
		t.Fatalf("after re-register: status %s, want UP", got.Status)
	}
	if _, err := r.Apply(registry.RenewOp("APP", "a")); err != nil {
		t.Fatalf("heartbeat after re-register: %v", err)
	}
}

func TestRegistry_UpdateStatus_errors(t *testing.T) {
	r, _ := mustNew(t)
	if _, err := r.Apply(registry.StatusOp("APP", "a", registry.StatusUp)); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
	mustRegister(t, r, registrytest.NewInstance("APP", "a"))
	v := r.Version()
	if _, err := r.Apply(registry.StatusOp("APP", "a", "BOGUS")); !errors.Is(err, registry.ErrInvalidStatus) {
		t.Errorf("bad status: %v", err)
	}
	if r.Version() != v {
		t.Error("rejected status update changed the registry")
	}
}

func TestRegistry_UpdateMetadata(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithMetadata(map[string]string{"zone": "z1"})))
	cur := r.Subscribe()
	defer cur.Close()
	got, err := r.Apply(registry.MetadataOp("app", "a", map[string]string{"version": "2", "zone": "z2"}))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Metadata.Get("version"); v != "2" {
		t.Errorf("version = %q", v)
	}
	if v, _ := got.Metadata.Get("zone"); v != "z2" {
		t.Errorf("zone = %q", v)
	}
	evs, _ := cur.Read(nil)
	if len(evs) != 1 || evs[0].Kind != registry.OpMetadata {
		t.Fatalf("events = %+v, want one metadata change", evs)
	}
	if a, ok := evs[0].Kind.Action(); !ok || a != registry.ActionRegister {
		t.Errorf("metadata goes to peers as %q, want Register", a)
	}
	if _, err := r.Apply(registry.MetadataOp("APP", "zzz", nil)); !errors.Is(err, registry.ErrInstanceNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
}

func TestRegistry_Snapshot_heartbeatsKeepVersionAndPointer(t *testing.T) {
	r, clk := mustNew(t)
	keys := registerN(t, r, 3)
	s1 := r.Snapshot()
	clk.Advance(30 * time.Second)
	renewAll(t, r, keys)
	if s2 := r.Snapshot(); s2 != s1 {
		t.Fatalf("heartbeats produced a new snapshot (version %d → %d)", s1.Version, s2.Version)
	}
	if _, err := r.Apply(registry.StatusOp("APP", "i-0", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	s3 := r.Snapshot()
	if s3 == s1 || s3.Version <= s1.Version {
		t.Fatal("status change did not produce a new snapshot")
	}
	if s3.Hashcode != "DOWN_1_UP_2_" {
		t.Fatalf("hashcode = %q, want DOWN_1_UP_2_", s3.Hashcode)
	}
	// Readers see the change at once, and the new lastRenewal.
	app, _ := s3.App("APP")
	if app.Instances[1].LastRenewalTimestamp != clk.Now().UnixMilli() {
		t.Errorf("lastRenewalTimestamp = %d, want %d", app.Instances[1].LastRenewalTimestamp, clk.Now().UnixMilli())
	}
}

func TestRegistry_Snapshot_expiredButKeptStaysVisible(t *testing.T) {
	r, clk := mustNew(t)
	registerN(t, r, 5)
	r.OpenForTraffic()
	clk.Advance(10 * time.Minute) // nobody renews: self-preservation keeps them
	if evicted := r.EvictExpired(); len(evicted) != 0 {
		t.Fatalf("evicted %d under self-preservation", len(evicted))
	}
	if s := r.Snapshot(); s.Instances != 5 {
		t.Fatalf("full view has %d instances, want 5", s.Instances)
	}
	if _, ok := r.Instance("APP", "i-0"); !ok {
		t.Fatal("expired-but-kept instance hidden from instance lookup (Eureka bug 12)")
	}
	if _, ok := r.InstanceByID("i-0"); !ok {
		t.Fatal("expired-but-kept instance hidden from id lookup")
	}
}

func TestRegistry_Snapshot_VIP(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("A", "a1", registrytest.WithVIP("orders,orders-v2")))
	mustRegister(t, r, registrytest.NewInstance("B", "b1", registrytest.WithVIP("orders-v2")))
	mustRegister(t, r, registrytest.NewInstance("C", "c1", registrytest.WithVIP("ORDERS")))
	s := r.Snapshot()
	if got := s.VIP("orders-v2", false); len(got) != 2 {
		t.Errorf("VIP(orders-v2) = %d apps, want 2", len(got))
	}
	if got := s.VIP("orders", true); len(got) != 1 || got[0].Name != "A" {
		t.Errorf("SVIP(orders) = %+v, want app A (exact, case-sensitive match)", got)
	}
	if got := s.VIP("nothing", false); len(got) != 0 {
		t.Errorf("VIP(nothing) = %+v, want empty", got)
	}
}

// applyDelta applies a delta as Eureka's DiscoveryClient#updateDelta does:
// ADDED and MODIFIED add or replace, DELETED removes.
func applyDelta(state map[registry.InstanceKey]registry.Status, delta []registry.AppView) {
	for _, app := range delta {
		for _, iv := range app.Instances {
			k := registry.InstanceKey{App: app.Name, ID: iv.ID()}
			switch iv.ActionType {
			case registry.ActionAdded, registry.ActionModified:
				state[k] = iv.Status
			case registry.ActionDeleted:
				delete(state, k)
			}
		}
	}
}

func hashOf(state map[registry.InstanceKey]registry.Status) string {
	var counts registry.StatusCounts
	for _, st := range state {
		counts.Add(st)
	}
	return counts.Hashcode()
}

func TestRegistry_Snapshot_deltaReconcilesWithFullFetch(t *testing.T) {
	r, clk := mustNew(t)
	registerN(t, r, 5)
	clk.Advance(4 * time.Minute)
	r.PruneDeltas()

	// A client takes a full fetch…
	state := map[registry.InstanceKey]registry.Status{}
	for _, app := range r.Snapshot().Apps {
		for _, iv := range app.Instances {
			state[registry.InstanceKey{App: app.Name, ID: iv.ID()}] = iv.Status
		}
	}
	// …then the registry changes in every way a delta must carry.
	mustRegister(t, r, registrytest.NewInstance("NEW", "n1"))
	if _, err := r.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.CancelOp("APP", "i-2")); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, registrytest.NewInstance("NEW", "gone"))
	if _, err := r.Apply(registry.CancelOp("NEW", "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.StatusOp("APP", "i-3", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(registry.StatusOp("APP", "i-3", registry.StatusUp)); err != nil {
		t.Fatal(err)
	}

	s := r.Snapshot()
	actions := map[string]registry.ActionType{}
	for _, app := range s.Delta {
		for _, iv := range app.Instances {
			actions[app.Name+"/"+iv.ID()] = iv.ActionType
		}
	}
	want := map[string]registry.ActionType{
		"NEW/n1": registry.ActionAdded, "APP/i-1": registry.ActionModified, "APP/i-2": registry.ActionDeleted,
		"NEW/gone": registry.ActionDeleted, "APP/i-3": registry.ActionModified,
	}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("delta actions = %v, want %v", actions, want)
	}
	applyDelta(state, s.Delta)
	if got := hashOf(state); got != s.Hashcode {
		t.Fatalf("client hash after delta = %q, delta's apps__hashcode = %q", got, s.Hashcode)
	}
	if s.Hashcode != "OUT_OF_SERVICE_1_UP_4_" {
		t.Fatalf("hashcode = %q", s.Hashcode)
	}
}

func TestRegistry_PruneDeltas_afterRetention(t *testing.T) {
	r, clk := mustNew(t)
	registerN(t, r, 2)
	s1 := r.Snapshot()
	clk.Advance(2 * time.Minute)
	if n := r.PruneDeltas(); n != 0 {
		t.Fatalf("pruned %d changes younger than 3 min", n)
	}
	clk.Advance(90 * time.Second)
	if n := r.PruneDeltas(); n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	s2 := r.Snapshot()
	if len(s2.Delta) != 0 || s2.Version != s1.Version || s2.DeltaVersion == s1.DeltaVersion {
		t.Fatalf("after prune: delta %d apps, version %d→%d, deltaVersion %d→%d", len(s2.Delta), s1.Version, s2.Version, s1.DeltaVersion, s2.DeltaVersion)
	}
}

func TestRegistry_concurrentUse(t *testing.T) {
	r, _ := mustNew(t)
	cur := r.Subscribe()
	defer cur.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("w%d-%d", w, i%20)
				_, _ = r.Apply(registry.RegisterOp(registrytest.NewInstance("APP", id)))
				_, _ = r.Apply(registry.RenewOp("APP", id))
				if i%7 == 0 {
					_, _ = r.Apply(registry.CancelOp("APP", id))
				}
				_ = r.Snapshot()
				_ = r.SelfPreservationState()
			}
		}()
	}
	wg.Wait()
	s := r.Snapshot()
	n := 0
	for _, app := range s.Apps {
		n += len(app.Instances)
	}
	if n != r.Len() || n != s.Instances {
		t.Fatalf("snapshot holds %d, Len %d, Instances %d", n, r.Len(), s.Instances)
	}
	// The stream saw every change once, in version order, without a gap.
	var next uint64 = 1
	for {
		evs, resync := cur.Read(make([]registry.Event, 0, 64))
		if resync {
			t.Fatal("resync with a default-sized outbox")
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Seq != next {
				t.Fatalf("event seq %d, want %d", ev.Seq, next)
			}
			next++
		}
	}
	if next-1 != s.Version {
		t.Fatalf("stream ends at %d, version %d", next-1, s.Version)
	}
}

func TestRegistry_Adopt(t *testing.T) {
	r, _ := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(100), registrytest.WithVIP("ours")))
	if ok, err := adopt(r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(100), registrytest.WithVIP("same-age"))); ok || err != nil {
		t.Fatalf("adopted a copy that is not newer: %v %v", ok, err)
	}
	if ok, err := adopt(r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(200), registrytest.WithVIP("theirs"))); !ok || err != nil {
		t.Fatalf("did not adopt a newer copy: %v %v", ok, err)
	}
	if iv, _ := r.Instance("APP", "a"); iv.VIPAddress != "theirs" {
		t.Fatalf("vip %q after adopt", iv.VIPAddress)
	}
	// Cancelled here meanwhile: a peer's late 409 must not bring it back.
	if _, err := r.Apply(registry.CancelOp("APP", "a")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := adopt(r, registrytest.NewInstance("APP", "a", registrytest.WithDirty(300))); ok || r.Len() != 0 {
		t.Fatalf("adopt resurrected a cancelled instance")
	}
}

func TestRegistry_Register_nonASCIIAppName(t *testing.T) {
	r, _ := mustNew(t)
	in := registrytest.NewInstance("café", "c1")
	stored := mustRegister(t, r, in)
	if _, err := r.Apply(registry.RenewOp(stored.App, "c1")); err != nil {
		t.Fatalf("renew by stored name %q: %v", stored.App, err)
	}
	if _, err := r.Apply(registry.RenewOp("café", "c1")); err != nil {
		t.Fatalf("renew by the client's spelling: %v", err)
	}
}

// adopt applies a peer's 409 copy and reports whether it was taken.
func adopt(r *registry.Registry, in *registry.Instance) (bool, error) {
	op := registry.RegisterOp(in).From(registry.OriginPeer)
	op.OnlyIfNewer = true
	stored, err := r.Apply(op)
	return stored != nil, err
}

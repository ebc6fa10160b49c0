package registry

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomCopy is a copy of one instance as some node may hold it: a
// registration and pieces drawn from a small set of versions, so that
// ties and every precedence case occur.
func randomCopy(rng *rand.Rand) *Instance {
	statuses := []Status{StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown}
	pick := func() Status { return statuses[rng.IntN(len(statuses))] }
	ver := func() uint64 { return uint64(rng.IntN(6)) << 16 }
	in := &Instance{
		InstanceID: "i-1", HostName: fmt.Sprintf("h%d", rng.IntN(3)), App: "APP", IPAddr: "10.0.0.1",
		DataCenterInfo: DataCenterInfo{Name: "MyOwn"}, WriteVersion: ver(),
		Metadata: NewMetadata(map[string]string{"zone": fmt.Sprint(rng.IntN(2))}),
	}
	p := Pieces{RegStatus: pick(), Override: StatusUnknown}
	switch rng.IntN(3) {
	case 1:
		p.Override, p.OverrideVersion = pick(), ver()
	case 2:
		p.OverrideValue, p.OverrideVersion = pick(), ver()
	}
	if rng.IntN(2) == 0 {
		in.Health = &HealthMark{Reason: fmt.Sprintf("http %d", 500+rng.IntN(3)), By: "n1"}
		p.HealthVersion = ver()
	} else if rng.IntN(2) == 0 {
		p.HealthVersion = ver() // lifted
	}
	switch rng.IntN(3) {
	case 1:
		p.DrainedAt, p.DrainedBy, p.DrainVersion = int64(1+rng.IntN(2)), fmt.Sprintf("n%d", rng.IntN(2)), ver()
	case 2:
		p.DrainVersion = ver() // undrained
	}
	for range rng.IntN(3) {
		p = withOverlay(p, p.regMetadata(in), map[string]string{fmt.Sprintf("k%d", rng.IntN(3)): fmt.Sprint(rng.IntN(3))}, ver())
	}
	if rng.IntN(3) == 0 && in.WriteVersion > 0 {
		// Registered again after a cancel, which came before it.
		p.Since = uint64(rng.IntN(int(in.WriteVersion>>16))) << 16
	}
	setPieces(in, p)
	return in
}

func merge(a, b *Instance) *Instance {
	m, _ := mergeCopies(a, b)
	return m
}

// The merge is what makes nodes converge: the same copies merged in any
// order, any number of times, give the same instance.
func TestMergeCopies_orderDoesNotMatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	for i := range 20000 {
		a, b, c := randomCopy(rng), randomCopy(rng), randomCopy(rng)
		ab, ba := merge(a, b), merge(b, a)
		if InstanceDigest(ab) != InstanceDigest(ba) {
			t.Fatalf("case %d: merge not commutative:\n a %+v %+v\n b %+v %+v\n ab %+v %+v\n ba %+v %+v", i, a, a.Pieces, b, b.Pieces, ab, ab.Pieces, ba, ba.Pieces)
		}
		if left, right := merge(ab, c), merge(a, merge(b, c)); InstanceDigest(left) != InstanceDigest(right) {
			t.Fatalf("case %d: merge not associative:\n %+v %+v\n %+v %+v", i, left, left.Pieces, right, right.Pieces)
		}
		if again := merge(ab, a); InstanceDigest(again) != InstanceDigest(ab) {
			t.Fatalf("case %d: merging a copy again changed the result", i)
		}
	}
}

// Each piece's later write wins, whatever else the copies hold.
func TestMergeCopies_laterPieceWins(t *testing.T) {
	base := func() *Instance {
		in := &Instance{InstanceID: "i-1", HostName: "h", App: "APP", IPAddr: "10.0.0.1", DataCenterInfo: DataCenterInfo{Name: "MyOwn"}, WriteVersion: 10}
		setPieces(in, Pieces{RegStatus: StatusUp})
		return in
	}
	withOverride := func(in *Instance, s Status, v uint64) *Instance {
		c := in.Clone()
		p := c.pieces()
		p.Override, p.OverrideValue, p.OverrideVersion = s, "", v
		setPieces(c, p)
		return c
	}
	a := withOverride(base(), StatusOutOfService, 20) // the override, at 20
	b := base()
	b.WriteVersion = 30 // a registration (UP) at 30 elsewhere
	setPieces(b, b.pieces())
	for _, m := range []*Instance{merge(a, b), merge(b, a)} {
		if m.Status != StatusOutOfService || m.OverriddenStatus != StatusOutOfService || m.WriteVersion != 30 {
			t.Fatalf("override then re-registration: %s (override %s) at %d", m.Status, m.OverriddenStatus, m.WriteVersion)
		}
	}
	removed := a.Clone()
	p := removed.pieces()
	p.Override, p.OverrideValue, p.OverrideVersion = StatusUnknown, StatusUp, 25
	setPieces(removed, p)
	for _, m := range []*Instance{merge(a, removed), merge(removed, a)} {
		if m.Status != StatusUp || m.OverriddenStatus != StatusUnknown {
			t.Fatalf("set at 20, removed at 25: %s (override %s)", m.Status, m.OverriddenStatus)
		}
	}
}

// Tombstones go at the end of their lifetime only once the hold has
// passed them, and at TombstoneMaxAge whatever the hold.
func TestTombstones_heldUntilPeersAreInSync(t *testing.T) {
	clk := time.Unix(1_700_000_000, 0)
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return clk }
	cfg.SelfPreservation = false
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hold := clk.Add(-time.Hour) // a peer last in sync an hour ago
	r.SetTombstoneHold(func() time.Time { return hold })
	in := &Instance{InstanceID: "i-1", HostName: "h", App: "APP", IPAddr: "10.0.0.1", DataCenterInfo: DataCenterInfo{Name: "MyOwn"}, Status: StatusUp}
	if _, err := r.Apply(RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	kept := func() bool { _, ok := r.Tombstone("APP", "i-1"); return ok }
	clk = clk.Add(10 * time.Minute) // far past lease + grace
	r.EvictExpired()
	if !kept() {
		t.Fatal("the tombstone went while a peer had not been in sync since the cancel")
	}
	hold = clk // every peer in sync now
	clk = clk.Add(time.Second)
	r.EvictExpired()
	if kept() {
		t.Fatal("the tombstone stayed with every peer in sync")
	}

	if _, err := r.Apply(RegisterOp(in.Clone())); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	hold = time.Time{} // a peer never in sync
	clk = clk.Add(cfg.TombstoneMaxAge - time.Second)
	r.EvictExpired()
	if !kept() {
		t.Fatal("gone before the max age")
	}
	clk = clk.Add(2 * time.Second)
	r.EvictExpired()
	if kept() {
		t.Fatal("kept past muster.tombstone-max-age-ms")
	}
}

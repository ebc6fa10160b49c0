package registry

import (
	"cmp"
	"slices"
	"time"
)

// A cancel leaves a tombstone: the key and the cancel's write version.
// Replication, syncUp and anti-entropy all apply copies under one rule
// (the higher version wins), and a tombstone is a copy too, so a late
// register, a syncUp copy or a peer's stale copy with a lower version
// does not bring a cancelled instance back. A tombstone is kept for at
// least the instance's lease duration plus Config.TombstoneGrace: by then
// every stale copy elsewhere has expired (so anti-entropy would not adopt
// it), and anti-entropy has had a round to carry the cancel to every peer.
// At most Config.MaxTombstones are kept; beyond that the one that would
// expire first goes (counted in TombstoneStats.Dropped): a stale copy of that instance whose
// lease is still live somewhere could then be adopted again, and would go
// at its next eviction there. Evictions leave none: every node evicts on
// its own, and an instance renewing through another node must stay.

type tombstone struct {
	version uint64
	expires time.Time
	// made is when this node stored it: it may go once every peer has
	// been seen in sync after it (the hold, SetTombstoneHold).
	made time.Time
	// later are the pieces written after the cancel (an override, metadata
	// writes) on a copy that had not heard of it: they belong to the next
	// registration, if one comes (pieces.go); nil for none.
	later *Pieces
}

type tombKey struct {
	key     InstanceKey
	version uint64
	expires time.Time
}

// before orders the heap: by expiry, then by version (the older cancel
// first).
func (e tombKey) before(o tombKey) bool {
	if !e.expires.Equal(o.expires) {
		return e.expires.Before(o.expires)
	}
	return e.version < o.version
}

// tombstones is guarded by Registry.mu.
type tombstones struct {
	byApp map[string]map[string]tombstone
	// byExpiry is a min-heap on expiry, for pruning and the bound: leases
	// differ (up to a day), so cancels do not expire in the order they
	// were made. Entries whose version no longer matches byApp were
	// replaced or lifted, and are skipped; the heap is rebuilt when they
	// outnumber the live ones, so a register/cancel loop cannot grow it.
	byExpiry []tombKey
	n        int
	dropped  uint64
}

func (t *tombstones) get(k InstanceKey) (tombstone, bool) {
	ts, ok := t.byApp[k.App][k.ID]
	return ts, ok
}

func (t *tombstones) put(k InstanceKey, version uint64, expires, made time.Time, max int) {
	var later *Pieces
	if old, ok := t.get(k); ok {
		if old.version >= version {
			return
		}
		later = old.later
	} else {
		t.n++
	}
	if t.byApp == nil {
		t.byApp = map[string]map[string]tombstone{}
	}
	byID := t.byApp[k.App]
	if byID == nil {
		byID = map[string]tombstone{}
		t.byApp[k.App] = byID
	}
	byID[k.ID] = tombstone{version: version, expires: expires, made: made, later: laterThan(later, version)}
	t.push(tombKey{k, version, expires})
	for t.n > max && t.popFirst(time.Time{}, true, nil) {
		t.dropped++
	}
	if len(t.byExpiry) > 2*t.n+1024 {
		t.rebuild()
	}
}

// keepLater adds to k's tombstone the pieces of p written after its cancel.
func (t *tombstones) keepLater(k InstanceKey, p Pieces) {
	ts, ok := t.get(k)
	if !ok {
		return
	}
	if ts.later != nil {
		p = mergeLater(*ts.later, p)
	}
	ts.later = laterThan(&p, ts.version)
	t.byApp[k.App][k.ID] = ts
}

func (t *tombstones) remove(k InstanceKey) {
	byID := t.byApp[k.App]
	if _, ok := byID[k.ID]; !ok {
		return
	}
	delete(byID, k.ID)
	if len(byID) == 0 {
		delete(t.byApp, k.App)
	}
	t.n--
}

// popFirst removes the live tombstone that expires first if force, or if
// it expired before now and may go (prunable); it reports whether it
// removed one.
func (t *tombstones) popFirst(now time.Time, force bool, prunable func(tombstone) bool) bool {
	for len(t.byExpiry) > 0 {
		e := t.byExpiry[0]
		cur, ok := t.get(e.key)
		if !ok || cur.version != e.version {
			t.pop()
			continue
		}
		if !force && (!cur.expires.Before(now) || !prunable(cur)) {
			return false
		}
		t.pop()
		t.remove(e.key)
		return true
	}
	return false
}

// prune removes the expired tombstones that may go: made before hold
// (every peer has been in sync with this node since), or older than
// maxAge whatever the hold. The first that must stay ends the pass, so one
// held tombstone may keep later ones a while longer: never fewer.
func (t *tombstones) prune(now, hold time.Time, maxAge time.Duration) int {
	n := 0
	for t.popFirst(now, false, func(ts tombstone) bool {
		return ts.made.Before(hold) || now.Sub(ts.made) > maxAge
	}) {
		n++
	}
	return n
}

// rebuild drops the heap's stale entries.
func (t *tombstones) rebuild() {
	h := t.byExpiry[:0]
	for app, byID := range t.byApp {
		for id, ts := range byID {
			h = append(h, tombKey{InstanceKey{app, id}, ts.version, ts.expires})
		}
	}
	clear(t.byExpiry[len(h):])
	t.byExpiry = h
	for i := len(h)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

func (t *tombstones) push(e tombKey) {
	t.byExpiry = append(t.byExpiry, e)
	for i := len(t.byExpiry) - 1; i > 0; {
		parent := (i - 1) / 2
		if !t.byExpiry[i].before(t.byExpiry[parent]) {
			break
		}
		t.byExpiry[i], t.byExpiry[parent] = t.byExpiry[parent], t.byExpiry[i]
		i = parent
	}
}

func (t *tombstones) pop() {
	last := len(t.byExpiry) - 1
	t.byExpiry[0] = t.byExpiry[last]
	t.byExpiry[last] = tombKey{}
	t.byExpiry = t.byExpiry[:last]
	t.down(0)
}

func (t *tombstones) down(i int) {
	h := t.byExpiry
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].before(h[least]) {
			least = l
		}
		if r < len(h) && h[r].before(h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// TombstoneStats are the tombstones kept and dropped at the bound.
type TombstoneStats struct {
	Kept    int
	Dropped uint64
}

// Tombstones reports the tombstones kept now and those dropped at the
// bound (Config.MaxTombstones) since start.
func (r *Registry) Tombstones() TombstoneStats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return TombstoneStats{Kept: r.tombs.n, Dropped: r.tombs.dropped}
}

// tombstoneLocked records a cancel of k at version for the cancelled
// lease's duration (the default when 0; at most a maximal lease) plus the
// grace, or for ttl (a peer's tombstone's remaining life, at most a
// maximal lease plus the grace) when it is set.
func (r *Registry) tombstoneLocked(k InstanceKey, version uint64, lease, ttl time.Duration, now time.Time) {
	r.tombs.put(k, version, now.Add(r.tombstoneLife(lease, ttl)), now, r.cfg.MaxTombstones)
}

// tombstoneLife is how long a tombstone of a lease of that duration lives
// (see tombstoneLocked).
func (r *Registry) tombstoneLife(lease, ttl time.Duration) time.Duration {
	d := r.cfg.DefaultLeaseDuration
	if lease > 0 {
		d = min(lease, time.Duration(MaxLeaseDurationSecs)*time.Second)
	}
	d += r.cfg.TombstoneGrace
	if ttl > 0 {
		d = min(ttl, time.Duration(MaxLeaseDurationSecs)*time.Second+r.cfg.TombstoneGrace)
	}
	return d
}

// SetTombstoneHold sets how long tombstones must stay beyond their
// lifetime: hold returns a time such that every peer has been seen in
// sync with this node since (anti-entropy: package replication's
// AntiEntropy.TombstoneHold), and a tombstone made after it stays, at most
// Config.TombstoneMaxAge, so a peer cut off longer than a lease does not
// bring a cancelled instance back when it returns. nil (the default): a
// tombstone goes when its lifetime ends. Call it before Run.
func (r *Registry) SetTombstoneHold(hold func() time.Time) {
	r.tombHold.Store(&hold)
}

// tombstoneHold is the hold's time now; called outside mu (the hold's
// owner takes locks of its own).
func (r *Registry) tombstoneHold(now time.Time) time.Time {
	if f := r.tombHold.Load(); f != nil && *f != nil {
		return (*f)()
	}
	return now.Add(time.Hour) // no hold: every expired tombstone goes
}

// TombstoneEntry is a live tombstone as the data-dir snapshot keeps it
// (registry/persist): the cancelled key, the cancel's write version and
// how long the tombstone is kept still.
type TombstoneEntry struct {
	Key     InstanceKey
	Version uint64
	TTL     time.Duration
}

// LiveTombstones lists the tombstones that have not expired on the
// registry's clock, with their remaining lifetime, sorted by key so a
// snapshot written twice from the same state is the same file.
func (r *Registry) LiveTombstones() []TombstoneEntry {
	now := r.now()
	r.mu.RLock()
	out := make([]TombstoneEntry, 0, r.tombs.n)
	for app, byID := range r.tombs.byApp {
		for id, t := range byID {
			// One held past its lifetime (SetTombstoneHold) is kept on
			// disk too, for the least lifetime: after a restart it stays
			// until the peers are in sync again.
			out = append(out, TombstoneEntry{Key: InstanceKey{App: app, ID: id}, Version: t.version, TTL: max(t.expires.Sub(now), time.Millisecond)})
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b TombstoneEntry) int {
		if c := cmp.Compare(a.Key.App, b.Key.App); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.ID, b.Key.ID)
	})
	return out
}

package registry

import "time"

// A cancel leaves a tombstone: the key and the cancel's write version.
// Replication, syncUp and anti-entropy all apply copies under one rule
// (the higher version wins), and a tombstone is a copy too, so a late
// register, a syncUp copy or a peer's stale copy with a lower version
// does not bring a cancelled instance back. A tombstone is kept for at
// least the instance's lease duration plus Config.TombstoneGrace: by then
// every stale copy elsewhere has expired (so anti-entropy would not adopt
// it), and anti-entropy has had a round to carry the cancel to every peer.
// At most Config.MaxTombstones are kept; beyond that the oldest goes first
// (counted in TombstoneStats.Dropped): a stale copy of that instance whose
// lease is still live somewhere could then be adopted again, and would go
// at its next eviction there. Evictions leave none: every node evicts on
// its own, and an instance renewing through another node must stay.

type tombstone struct {
	version uint64
	expires time.Time
}

type tombKey struct {
	key     InstanceKey
	version uint64
}

// tombstones is guarded by Registry.mu.
type tombstones struct {
	byApp map[string]map[string]tombstone
	// order is the insertion order, for pruning and the bound; entries
	// whose version no longer matches byApp were replaced and are skipped.
	order   []tombKey
	head    int
	n       int
	dropped uint64
}

func (t *tombstones) get(k InstanceKey) (tombstone, bool) {
	ts, ok := t.byApp[k.App][k.ID]
	return ts, ok
}

func (t *tombstones) put(k InstanceKey, version uint64, expires time.Time, max int) {
	if old, ok := t.get(k); ok {
		if old.version >= version {
			return
		}
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
	byID[k.ID] = tombstone{version: version, expires: expires}
	t.order = append(t.order, tombKey{k, version})
	for t.n > max && t.popOldest(time.Time{}, true) {
		t.dropped++
	}
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

// popOldest removes the oldest live entry if force or it expired before
// now; it reports whether it removed one.
func (t *tombstones) popOldest(now time.Time, force bool) bool {
	for t.head < len(t.order) {
		e := t.order[t.head]
		cur, ok := t.get(e.key)
		if !ok || cur.version != e.version {
			t.advance()
			continue
		}
		if !force && !cur.expires.Before(now) {
			return false
		}
		t.advance()
		t.remove(e.key)
		return true
	}
	return false
}

func (t *tombstones) advance() {
	t.order[t.head] = tombKey{}
	t.head++
	if t.head > 1024 && t.head*2 > len(t.order) {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
}

// prune removes the expired tombstones at the front of the order; a
// tombstone behind an unexpired one waits for it (it is kept longer than
// needed, never shorter).
func (t *tombstones) prune(now time.Time) int {
	n := 0
	for t.popOldest(now, false) {
		n++
	}
	return n
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

// tombstoneLocked records a cancel of k at version for in's lease duration
// plus the grace.
func (r *Registry) tombstoneLocked(k InstanceKey, version uint64, in *Instance, now time.Time) {
	d := r.cfg.DefaultLeaseDuration
	if in != nil {
		d = r.leaseDuration(in)
	}
	r.tombs.put(k, version, now.Add(d+r.cfg.TombstoneGrace), r.cfg.MaxTombstones)
}

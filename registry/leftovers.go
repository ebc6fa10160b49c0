package registry

import "time"

// An eviction leaves no tombstone (tombstone.go): every node evicts on its
// own, and an instance renewing through another node must come back. But
// the evicted copy may hold pieces nobody else has: an override, a
// metadata write or a drain an operator made here on a copy whose client
// went on renewing elsewhere (a partition, with evictions held until it heals).
// Had the live registration reached this node before the eviction, the
// merge would have kept those pieces (mergeCopies); evicted first, they
// would be lost although acknowledged. So an eviction keeps them as a
// leftover: they wait, without keeping anything out, for the next copy of
// the instance a peer sends, and are merged into it as its own stored copy
// would have been. A registration by the client itself, here, drops them:
// an evicted instance that registers again has no override on a single
// Eureka server either (its eviction is a cancel). A leftover lives as
// long as a tombstone would, under the same hold, but not across a restart
// (the data-dir snapshot keeps instances and tombstones only).

type leftover struct {
	pieces  Pieces
	expires time.Time
	made    time.Time
}

// leftovers is guarded by Registry.mu. Evictions of instances with pieces
// of their own are rare, so it is a map, scanned when pruned.
type leftovers struct {
	byKey map[InstanceKey]leftover
}

// keep records the versioned override, metadata writes and drain of an
// evicted copy's pieces p (nothing when it has none), merged with an
// older leftover of k. At the bound max (MaxTombstones: far more evicted
// copies with pieces of their own than a partition leaves) it keeps
// nothing more and reports false: the caller says so in its log.
func (lo *leftovers) keep(k InstanceKey, p *Pieces, expires, now time.Time, max int) (kept bool) {
	later := laterThan(p, 0)
	if p.DrainVersion != 0 {
		if later == nil {
			later = &Pieces{Override: StatusUnknown}
		}
		later.DrainedAt, later.DrainedBy, later.DrainVersion = p.DrainedAt, p.DrainedBy, p.DrainVersion
	}
	if later == nil {
		return true
	}
	if old, ok := lo.byKey[k]; ok {
		*later = mergeLater(old.pieces, *later)
	} else if len(lo.byKey) >= max {
		return false
	}
	if lo.byKey == nil {
		lo.byKey = map[InstanceKey]leftover{}
	}
	lo.byKey[k] = leftover{pieces: *later, expires: expires, made: now}
	return true
}

// take removes and returns k's leftover pieces, nil for none.
func (lo *leftovers) take(k InstanceKey) *Pieces {
	l, ok := lo.byKey[k]
	if !ok {
		return nil
	}
	delete(lo.byKey, k)
	return &l.pieces
}

// drop forgets k's leftover.
func (lo *leftovers) drop(k InstanceKey) {
	if len(lo.byKey) > 0 {
		delete(lo.byKey, k)
	}
}

// prune removes the expired leftovers that may go, as tombstones.prune.
func (lo *leftovers) prune(now, hold time.Time, maxAge time.Duration) {
	for k, l := range lo.byKey {
		if l.expires.Before(now) && (l.made.Before(hold) || now.Sub(l.made) > maxAge) {
			delete(lo.byKey, k)
		}
	}
}

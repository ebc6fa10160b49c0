package registry

import (
	"math"
	"slices"
	"strings"
	"time"
)

// evictionCompensation is how late this run is: the time since the previous
// run minus the interval, floored at 0, and 0 on the first run. Every lease
// gets that much extra time, so a GC pause or a stalled machine does not
// evict clients whose heartbeats could not be processed
// (AbstractInstanceRegistry.EvictionTask#getCompensationTimeMs).
func evictionCompensation(now, last time.Time, interval time.Duration) time.Duration {
	if last.IsZero() {
		return 0
	}
	if d := now.Sub(last) - interval; d > 0 {
		return d
	}
	return 0
}

// evictionLimit caps one run at size − ⌊size × percent⌋ instances (10 % of
// 100 → 15 with the default 0.85), so a bug or a partition that
// self-preservation misses cannot empty the registry in one run.
func evictionLimit(size int, percent float64) int {
	return size - int(math.Floor(float64(size)*percent+1e-9))
}

// EvictExpired removes expired leases, unless self-preservation holds
// expiry back, and returns the keys it evicted. At most evictionLimit leases
// go per run, picked at random so that a large eviction spreads across apps.
// Evictions go to the change stream like any visible change, as OpEvict
// from OriginNode; replication does not send them: every node evicts on its
// own.
func (r *Registry) EvictExpired() []InstanceKey { return r.evictExpired(r.now()) }

func (r *Registry) evictExpired(now time.Time) []InstanceKey {
	hold := r.tombstoneHold(now)
	heldFor := r.evictionHeld(now)
	r.mu.Lock()
	v0 := r.version
	grace := evictionCompensation(now, r.lastEvictionAt, r.cfg.EvictionInterval)
	r.lastEvictionAt = now
	r.tombs.prune(now, hold, r.cfg.TombstoneMaxAge)
	r.leftovers.prune(now, hold, r.cfg.TombstoneMaxAge)
	r.pruneArrivalsLocked(now)
	sp := r.selfPreservationLocked(now)
	transition := sp.Active != r.spActive
	r.spActive = sp.Active
	if !sp.LeaseExpirationEnabled || heldFor != "" {
		r.mu.Unlock()
		if transition {
			r.logSelfPreservation(sp)
		}
		return nil
	}

	type candidate struct {
		key InstanceKey
		l   *lease
	}
	// Leases that never renewed once (a registration flood, say) are not
	// what the cap protects: they go all at once (selfpreservation.go).
	var expired, unproven []candidate
	for app, a := range r.apps {
		for _, l := range a.leases {
			if !l.expired(now, grace) {
				continue
			}
			if l.proven.Load() {
				expired = append(expired, candidate{InstanceKey{app, l.id}, l})
			} else {
				unproven = append(unproven, candidate{InstanceKey{app, l.id}, l})
			}
		}
	}
	limit := evictionLimit(r.instances, r.cfg.RenewalPercentThreshold)
	if len(expired) > limit {
		// Map order is random on its own; sort first so a seeded Rand
		// gives a repeatable pick in tests.
		slices.SortFunc(expired, func(a, b candidate) int {
			if c := strings.Compare(a.key.App, b.key.App); c != 0 {
				return c
			}
			return strings.Compare(a.key.ID, b.key.ID)
		})
		// Partial Fisher-Yates: the first limit entries become a random pick.
		for i := 0; i < limit; i++ {
			j := i + r.rand.IntN(len(expired)-i)
			expired[i], expired[j] = expired[j], expired[i]
		}
	}
	n := min(len(expired), limit)
	keys := make([]InstanceKey, 0, n+len(unproven))
	var notKept []InstanceKey // leftovers past the bound
	for _, c := range append(expired[:n], unproven...) {
		if c.l.inst.Pieces != nil &&
			!r.leftovers.keep(c.key, c.l.inst.Pieces, now.Add(r.tombstoneLife(r.tombstoneLease(c.l), 0)), now, r.cfg.MaxTombstones) {
			notKept = append(notKept, c.key)
		}
		r.removeLocked(c.key.App, c.key.ID, c.l, OpEvict, OriginNode, now, c.l.inst.WriteVersion)
		keys = append(keys, c.key)
	}
	r.evictions.Add(uint64(len(keys)))
	r.unlock(v0)

	if transition {
		r.logSelfPreservation(sp)
	}
	if len(keys) > 0 {
		ev := r.log.Info().Int(logEvicted, len(keys)).Int(logExpired, len(expired)+len(unproven)).
			Int(logNeverRenewed, len(unproven)).Dur(logCompensation, grace)
		if n < len(expired) {
			ev = ev.Int(logLimit, limit)
		}
		ev.Msg("evicted expired leases")
	}
	if len(notKept) > 0 {
		// Each one's later override, metadata writes or drain will not
		// be merged into the copy a peer sends next.
		r.log.Warn().Int(logNotKept, len(notKept)).Str(logApp, notKept[0].App).Str(logInstanceID, notKept[0].ID).
			Int(logLimit, r.cfg.MaxTombstones).
			Msg("evicted copies' later pieces not kept, the leftovers being at their bound (the tombstones'): a peer's next copy of these instances may lack an override, metadata write or drain made on them here; app and instance_id name the first")
	}
	return keys
}

// logSelfPreservation logs a turn of self-preservation on or off.
func (r *Registry) logSelfPreservation(sp SelfPreservation) {
	ev := r.log.Info().Int64(logRenewsLastMin, sp.RenewsLastMin).Int64(logRenewsThreshold, sp.RenewsThreshold).
		Float64(logExpectedRenews, sp.ExpectedRenewsPerMin)
	if sp.Active {
		ev.Msg("self-preservation active: renewals are below the threshold, expired leases are kept")
	} else {
		ev.Msg("self-preservation over: renewals recovered, expired leases are evicted again")
	}
}

// SetEvictionHold sets what holds evictions back: hold returns the name of
// a peer this node cannot reach now ("" for none). Its clients' renewals
// may be reaching that peer and not this node (a ring or one-way
// partition, where the peers still see each other through a third and
// this node is not short enough of renewals for self-preservation), so an
// expired lease here is not proof of a dead instance: nothing is evicted
// while some peer is unreachable, for at most Config.MaxEvictionHold in a
// row (a peer unreachable that long is taken for gone). nil (the default):
// no hold. Call it before Run.
func (r *Registry) SetEvictionHold(hold func() string) {
	r.evictHold.Store(&hold)
}

// evictionHeld returns the peer that holds evictions back now, "" when
// none does or the hold has lasted Config.MaxEvictionHold; it logs when a
// hold starts and ends. Called outside mu (the hold's owner takes locks
// of its own) and only from eviction runs.
func (r *Registry) evictionHeld(now time.Time) string {
	f := r.evictHold.Load()
	peer := ""
	if f != nil && *f != nil {
		peer = (*f)()
	}
	switch {
	case peer == "":
		if !r.heldSince.IsZero() {
			r.log.Info().Str(logPeer, r.heldBy).Msg("evictions resume: every peer is reachable again")
		}
		r.heldSince, r.heldBy = time.Time{}, ""
		return ""
	case r.heldSince.IsZero():
		r.heldSince, r.heldBy = now, peer
		r.log.Warn().Str(logPeer, peer).Msg("evictions held: a peer is unreachable and may be hearing renewals this node does not")
	case now.Sub(r.heldSince) > r.cfg.MaxEvictionHold:
		if r.heldBy != "" {
			r.log.Warn().Str(logPeer, peer).Dur(logHeld, now.Sub(r.heldSince)).Msg("evictions resume although a peer is still unreachable: the hold lasted muster.eviction-hold-max-ms")
			r.heldBy = ""
		}
		return ""
	}
	r.heldBy = peer
	return peer
}

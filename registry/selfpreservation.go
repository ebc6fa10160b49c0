package registry

import (
	"math"
	"sync"
	"time"
)

// SelfPreservation is the state of self-preservation, as /admin/status,
// metrics and the dashboard report it.
type SelfPreservation struct {
	// Enabled is the configuration flag.
	Enabled bool
	// Below is true when the renewals of the last complete window fell
	// below the threshold, whether or not self-preservation is enabled. It
	// is never true during the first window after the node opened, when the
	// renewal count cannot know yet (WarmingUp).
	Below bool
	// Active is Enabled && Below: expiry is held back right now.
	Active bool
	// WarmingUp is true until the first renewal window since opening has
	// completed. Nothing is evicted meanwhile.
	WarmingUp bool
	// LeaseExpirationEnabled says whether an eviction run would evict now.
	LeaseExpirationEnabled bool
	// ExpectedRenewsPerMin is Σ 60 s / renewal interval over the instances.
	ExpectedRenewsPerMin float64
	// RenewsThreshold is ⌊ExpectedRenewsPerMin × RenewalPercentThreshold⌋.
	RenewsThreshold int64
	// ArrivingRenewsPerMin is the part of ExpectedRenewsPerMin that belongs
	// to instances registered since the last complete window began. They
	// could not yet renew for a whole window, so the renewals of that window
	// are held to ⌊(expected − arriving) × percent⌋ instead; without this,
	// every large deployment would trip self-preservation for a minute.
	ArrivingRenewsPerMin float64
	// UnprovenRenewsPerMin is the part of ExpectedRenewsPerMin that belongs
	// to instances which have not renewed once since they registered here.
	// They are not held to the threshold until they do, so registrations
	// alone (a flood of instances that never renew) cannot switch
	// self-preservation on; see proveLease.
	UnprovenRenewsPerMin float64
	// RenewsLastMin is the renewals of the last complete window, scaled to a
	// minute.
	RenewsLastMin int64
}

// renewsThreshold is ⌊expected × percent⌋. The epsilon keeps products that
// are whole numbers in decimal (200 × 0.85) from flooring one too low.
func renewsThreshold(expected, percent float64) int64 {
	return int64(math.Floor(expected*percent + 1e-9))
}

// renewsPerMinute scales a window's count to a minute.
func renewsPerMinute(count int64, window time.Duration) int64 {
	if window == time.Minute {
		return count
	}
	return int64(math.Round(float64(count) * float64(time.Minute) / float64(window)))
}

// SelfPreservationState reports self-preservation at this moment.
func (r *Registry) SelfPreservationState() SelfPreservation {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.selfPreservationLocked(now)
}

func (r *Registry) selfPreservationLocked(now time.Time) SelfPreservation {
	count, complete := r.renewals.Count(now)
	arriving := r.provenArrivalsSince(r.renewals.lastWindowSlice(now))
	unproven := min(max(float64(r.unproven.Load())/1e6, 0), r.expected)
	arriving = min(arriving, r.expected-unproven)
	sp := SelfPreservation{
		Enabled:              r.cfg.SelfPreservation,
		WarmingUp:            !complete,
		ExpectedRenewsPerMin: r.expected,
		RenewsThreshold:      renewsThreshold(r.expected, r.cfg.RenewalPercentThreshold),
		ArrivingRenewsPerMin: arriving,
		UnprovenRenewsPerMin: unproven,
		RenewsLastMin:        renewsPerMinute(count, r.renewals.Window()),
	}
	// Eureka enables expiry only when renews > threshold and threshold > 0
	// (PeerAwareInstanceRegistryImpl#isLeaseExpirationEnabled), so an empty
	// or one-client server sits in self-preservation. Here expiry stops only
	// when renewals fall below the threshold, as the product promises.
	sp.Below = !sp.WarmingUp && sp.RenewsLastMin < renewsThreshold(r.expected-arriving-unproven, r.cfg.RenewalPercentThreshold)
	sp.Active = sp.Enabled && sp.Below
	// Nothing is evicted while warming up: the count cannot tell a
	// partition from a fleet of dead instances yet.
	sp.LeaseExpirationEnabled = !sp.Enabled || (!sp.WarmingUp && !sp.Below)
	return sp
}

// UpdateRenewThreshold recounts the expected renewals from the instances
// whose leases are live, and adopts the recount only when it is above
// RenewalPercentThreshold × the current expectation, or when
// self-preservation is off (PeerAwareInstanceRegistryImpl#updateRenewalThreshold).
// So a mass outage, whose leases are expired but kept, cannot lower the bar,
// while a slow drift is followed. Run calls it every
// RenewThresholdUpdateInterval. It reports whether the expectation changed.
func (r *Registry) UpdateRenewThreshold() bool { return r.updateRenewThreshold(r.now()) }

func (r *Registry) updateRenewThreshold(now time.Time) bool {
	r.mu.Lock()
	before := r.expected
	adopted, recount := r.recountExpectedLocked(now)
	r.mu.Unlock()
	switch {
	case adopted:
		r.log.Info().Float64(logFrom, before).Float64(logTo, recount).
			Int64(logRenewsThreshold, renewsThreshold(recount, r.cfg.RenewalPercentThreshold)).
			Msg("expected renewals recounted")
	case recount != before:
		r.log.Info().Float64(logExpectedRenews, before).Float64(logRecount, recount).
			Msg("expected renewals kept: the recount is too far below the expectation to be trusted")
	}
	return adopted
}

func (r *Registry) recountExpectedLocked(now time.Time) (adopted bool, recount float64) {
	for _, a := range r.apps {
		for _, l := range a.leases {
			if !l.expired(now, 0) {
				recount += l.renewsPerMin
			}
		}
	}
	if math.Abs(recount-r.expected) < 1e-6 {
		return false, r.expected
	}
	if r.cfg.SelfPreservation && recount <= r.cfg.RenewalPercentThreshold*r.expected {
		return false, recount
	}
	r.expected = recount
	return true, recount
}

// arrivalLog is self-preservation's record of new leases: how many
// arrived in each slice of the renewal rate, and the sums of the proven
// ones, so that SelfPreservationState adds a few dozen sums instead of
// walking every arrival. A lease holds the id of its slice's entry
// (lease.arrival), not the other way round: a map of the leases of the
// last two windows was a million entries and a million pointers after a
// fleet registered, for every GC cycle to follow (docs/performance.md, "A
// light collector at 1M"). Forgetting the old arrivals is dropping their
// slices' entries; a lease whose entry is gone is no arrival any more,
// and ids are never reused, so no lease can meet a later entry under its
// old id. Its maps change under Registry.mu held for writing; the proven
// sums also change on a first heartbeat, under a read stripe, so they
// have their own lock.
type arrivalLog struct {
	slices map[int64]*arrivalSlice  // by the renewal rate's slice number
	byID   map[uint32]*arrivalSlice // by the id the slice's leases hold
	lastID uint32                   // the last id given; 0 is no slice
	oldest int64                    // the lowest slice number in slices, if any
	// mu guards the proven sums (nProven, proven) of the slices.
	mu sync.Mutex
}

func newArrivalLog() arrivalLog {
	return arrivalLog{slices: map[int64]*arrivalSlice{}, byID: map[uint32]*arrivalSlice{}}
}

// arrivalSlice is the arrivals of one slice of the renewal rate.
type arrivalSlice struct {
	id      uint32
	number  int64   // the renewal rate's slice (MeasuredRate.sliceAt)
	n       int     // arrivals; under Registry.mu
	nProven int     // proven arrivals; under arrivalLog.mu
	proven  float64 // Σ renewsPerMin of the proven arrivals; under arrivalLog.mu
}

// arrivalOf returns the slice l arrived in, nil when l is no arrival (it
// arrived before the last two windows, or before OpenForTraffic). The
// caller holds a read stripe of mu at least.
func (r *Registry) arrivalOf(l *lease) *arrivalSlice {
	if l.arrival == 0 {
		return nil
	}
	return r.arrivals.byID[l.arrival]
}

// provenArrivalsSince is Σ renewsPerMin of the proven arrivals in slices
// from first on: of the leases that arrived since the last complete
// window began (an unproven arrival is counted once, as unproven). It adds
// one sum per slice of the last two windows or so, whatever the number of
// arrivals. The caller holds a read stripe of mu at least.
func (r *Registry) provenArrivalsSince(first int64) float64 {
	arriving := 0.0
	r.arrivals.mu.Lock()
	for n, s := range r.arrivals.slices {
		if n >= first {
			arriving += s.proven
		}
	}
	r.arrivals.mu.Unlock()
	return arriving
}

// countProvenArrival adds (sign 1) or removes (sign −1) a proven arrival's
// rate from its slice's sum. The caller holds arrivals.mu.
func (s *arrivalSlice) countProven(rate float64, sign int) {
	s.nProven += sign
	if s.nProven == 0 {
		s.proven = 0 // no rounding residue once the slice has none
		return
	}
	s.proven += float64(sign) * rate
}

// pruneArrivalsLocked forgets the arrivals too old to matter: the slices
// that began more than two windows ago (the renewals counted reach one
// window and a slice back). It costs one comparison while there is none
// to forget, and one step per slice when there is, whatever the number of
// leases in them. Both a new arrival and every eviction run call it: a
// mass registration followed by nothing but heartbeats (a fleet that came
// up together, a syncUp copy) must not be counted as arriving for longer.
func (r *Registry) pruneArrivalsLocked(now time.Time) {
	if len(r.arrivals.slices) == 0 {
		return
	}
	cutoff := r.renewals.sliceAt(now.Add(-2 * r.cfg.RenewalRateWindow))
	if r.arrivals.oldest > cutoff {
		return
	}
	oldest := int64(math.MaxInt64)
	for n, s := range r.arrivals.slices {
		if n <= cutoff {
			r.dropArrivalSliceLocked(s)
		} else {
			oldest = min(oldest, n)
		}
	}
	r.arrivals.oldest = oldest
}

func (r *Registry) dropArrivalSliceLocked(s *arrivalSlice) {
	delete(r.arrivals.slices, s.number)
	delete(r.arrivals.byID, s.id)
}

// addArrivalLocked records l, a new lease expected to renew rate times a
// minute, as arriving at now (and forgets the old arrivals).
func (r *Registry) addArrivalLocked(l *lease, rate float64, now time.Time) {
	r.pruneArrivalsLocked(now)
	number := r.renewals.sliceAt(now)
	slice := r.arrivals.slices[number]
	if slice == nil {
		r.arrivals.lastID++
		if r.arrivals.lastID == 0 { // never, in practice: a new id a slice
			r.arrivals.lastID++
		}
		slice = &arrivalSlice{id: r.arrivals.lastID, number: number}
		if len(r.arrivals.slices) == 0 || number < r.arrivals.oldest {
			r.arrivals.oldest = number
		}
		r.arrivals.slices[number] = slice
		r.arrivals.byID[slice.id] = slice
	}
	slice.n++
	l.arrival = slice.id
	if l.proven.Load() {
		r.arrivals.mu.Lock()
		slice.countProven(rate, 1)
		r.arrivals.mu.Unlock()
	}
}

// rerateArrivalLocked changes the expected renewals of l's arrival from
// old to new, if it is still counted: to 0 when the lease goes (a
// crash-looping instance that registers and cancels must not keep
// lowering the bar), to its new rate when it registers again with another
// interval.
func (r *Registry) rerateArrivalLocked(l *lease, old, new float64) {
	slice := r.arrivalOf(l)
	if slice == nil {
		return
	}
	if new == 0 {
		l.arrival = 0
		if l.proven.Load() {
			r.arrivals.mu.Lock()
			slice.countProven(old, -1)
			r.arrivals.mu.Unlock()
		}
		if slice.n--; slice.n == 0 {
			r.dropArrivalSliceLocked(slice)
		}
		return
	}
	if l.proven.Load() {
		r.arrivals.mu.Lock()
		slice.countProven(old, -1)
		slice.countProven(new, 1)
		r.arrivals.mu.Unlock()
	}
}

// OpenForTraffic ends start-up: the expected renewals are seeded from the
// instances in the registry (those registered so far, e.g. copied from a
// peer by syncUp), the renewal window restarts, and the next eviction run
// is the first. It returns the number of instances.
func (r *Registry) OpenForTraffic() int {
	now := r.now()
	r.mu.Lock()
	expected := 0.0
	for _, a := range r.apps {
		for _, l := range a.leases {
			expected += l.renewsPerMin
		}
	}
	r.expected = expected
	// What is here at opening was copied from a peer that served it (or
	// registered during start-up): it is held to the threshold at once,
	// as Eureka's openForTraffic seeds it.
	for _, a := range r.apps {
		for _, l := range a.leases {
			l.proven.Store(true)
		}
	}
	r.unproven.Store(0)
	r.lastEvictionAt = time.Time{}
	r.spActive = false
	r.renewals.Reset(now)
	// The first window is a warm-up in which nothing is evicted, so what
	// arrived before it is due a full window of renewals after it, and no
	// arrival (a syncUp copy may have filled the log): forgetting the
	// slices is enough, the leases' ids find nothing now.
	clear(r.arrivals.slices)
	clear(r.arrivals.byID)
	n := r.instances
	r.mu.Unlock()
	r.opened.Store(true)
	r.log.Info().Int(logInstances, n).Float64(logExpectedRenews, expected).
		Int64(logRenewsThreshold, renewsThreshold(expected, r.cfg.RenewalPercentThreshold)).
		Msg("open for traffic")
	return n
}

// Self-preservation counts only instances that have shown they renew.
//
// Expected renewals come from what instances declare at registration
// (renewalIntervalInSecs), so registrations alone could raise the bar: one
// request carrying 50,000 instances with a 1 s interval asked for 3 million
// renewals a minute, none came, self-preservation switched on and dead
// instances were served indefinitely. So a lease is "unproven" from its
// registration until its first renewal (a client's heartbeat or a peer's
// replicated one). Unproven leases still count in ExpectedRenewsPerMin and
// the reported threshold (so the figures are Eureka's), but the test for
// Below leaves them out, and an eviction run removes all the expired ones,
// without the per-run cap that protects instances that were renewing.
// A genuine mass outage is of instances that had been renewing: they are
// proven, and self-preservation switches on exactly as before. Instances
// present at OpenForTraffic (copied by syncUp) count as proven.
//
// The sum of the unproven leases' rates is kept in millionths in an atomic
// integer, because the first renewal happens under the read lock.

func micros(rate float64) int64 { return int64(math.Round(rate * 1e6)) }

// rerateUnprovenLocked moves an unproven lease's share of the expected
// renewals from old to new (0 for a lease that arrives or leaves).
func (r *Registry) rerateUnprovenLocked(l *lease, old, new float64) {
	if l.proven.Load() {
		return
	}
	r.unproven.Add(micros(new) - micros(old))
}

// proveLease marks l's first renewal. It runs under the read lock (at least),
// so l.renewsPerMin is stable; the CompareAndSwap makes one of several
// concurrent first heartbeats do it.
func (r *Registry) proveLease(l *lease) {
	if !l.proven.Load() && l.proven.CompareAndSwap(false, true) {
		r.unproven.Add(-micros(l.renewsPerMin))
		// The arrivals' maps and l.arrival change only under the write
		// lock, so reading them here is safe; the sums take arrivals.mu.
		if slice := r.arrivalOf(l); slice != nil {
			r.arrivals.mu.Lock()
			slice.countProven(l.renewsPerMin, 1)
			r.arrivals.mu.Unlock()
		}
	}
}

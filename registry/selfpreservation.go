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
	for _, byID := range r.apps {
		for _, l := range byID {
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

// arrival records a new lease, so that self-preservation does not hold an
// instance to a full window of renewals in the window it arrived in.
type arrival struct {
	at           time.Time
	renewsPerMin float64
	slice        int64 // the renewal rate's slice holding at (MeasuredRate.sliceAt)
}

// arrivalLog is self-preservation's record of new leases: each arrival,
// and their sums by slice of the renewal rate, so that
// SelfPreservationState adds a few dozen sums instead of walking every
// arrival. Its maps change under Registry.mu held for writing; the proven
// sums also change on a first heartbeat, under a read stripe, so they have
// their own lock.
type arrivalLog struct {
	leases map[*lease]arrival // new leases of the last two windows
	pruned time.Time          // when leases last lost its old entries
	peak   int                // most entries leases held since it was last rebuilt
	slices map[int64]*arrivalSlice
	// mu guards the proven sums (nProven, proven) of slices' entries.
	mu sync.Mutex
}

func newArrivalLog() arrivalLog {
	return arrivalLog{leases: map[*lease]arrival{}, slices: map[int64]*arrivalSlice{}}
}

// arrivalSlice is the arrivals of one slice of the renewal rate.
type arrivalSlice struct {
	n       int     // arrivals; under Registry.mu
	nProven int     // proven arrivals; under arrivalLog.mu
	proven  float64 // Σ renewsPerMin of the proven arrivals; under arrivalLog.mu
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

// pruneArrivalsLocked forgets, at most once a window, the arrivals too old
// to matter (older than two windows). Both a new arrival and every
// eviction run call it: a mass registration followed by nothing but
// heartbeats (a fleet that came up together, a syncUp copy) must not keep
// its arrivals, ~115 MB and a million pointers at 1M for the collector to
// follow every cycle, until the next registration comes. A map that
// emptied out to under a quarter of its peak is rebuilt, since a Go map
// keeps its largest table.
func (r *Registry) pruneArrivalsLocked(now time.Time) {
	if now.Sub(r.arrivals.pruned) < r.cfg.RenewalRateWindow {
		return
	}
	r.arrivals.pruned = now
	if len(r.arrivals.leases) == 0 && r.arrivals.peak == 0 {
		return
	}
	cutoff := now.Add(-2 * r.cfg.RenewalRateWindow)
	for k, old := range r.arrivals.leases {
		if old.at.Before(cutoff) {
			r.dropArrivalLocked(k, old)
		}
	}
	if len(r.arrivals.leases) < r.arrivals.peak/4 {
		r.resetArrivalsLocked(r.arrivals.leases)
	}
}

// resetArrivalsLocked makes arrivals a new map holding keep's entries (nil:
// none), sized for them. Not maps.Clone or clear, which keep the table's
// size.
func (r *Registry) resetArrivalsLocked(keep map[*lease]arrival) {
	m := make(map[*lease]arrival, len(keep))
	for l, a := range keep {
		m[l] = a
	}
	r.arrivals.leases = m
	r.arrivals.peak = len(m)
}

// addArrivalLocked records a new lease (and prunes the old ones once a
// window).
func (r *Registry) addArrivalLocked(l *lease, a arrival) {
	r.pruneArrivalsLocked(a.at)
	a.slice = r.renewals.sliceAt(a.at)
	slice := r.arrivals.slices[a.slice]
	if slice == nil {
		slice = &arrivalSlice{}
		r.arrivals.slices[a.slice] = slice
	}
	slice.n++
	if l.proven.Load() {
		r.arrivals.mu.Lock()
		slice.countProven(a.renewsPerMin, 1)
		r.arrivals.mu.Unlock()
	}
	r.arrivals.leases[l] = a
	r.arrivals.peak = max(r.arrivals.peak, len(r.arrivals.leases))
}

// dropArrivalLocked forgets l's arrival a.
func (r *Registry) dropArrivalLocked(l *lease, a arrival) {
	delete(r.arrivals.leases, l)
	slice := r.arrivals.slices[a.slice]
	if l.proven.Load() {
		r.arrivals.mu.Lock()
		slice.countProven(a.renewsPerMin, -1)
		r.arrivals.mu.Unlock()
	}
	if slice.n--; slice.n == 0 {
		delete(r.arrivals.slices, a.slice)
	}
}

// rerateArrivalLocked changes the expected renewals of l's arrival, if it
// is still counted: to 0 when the lease goes (a crash-looping instance that
// registers and cancels must not keep lowering the bar), to its new rate
// when it registers again with another interval.
func (r *Registry) rerateArrivalLocked(l *lease, rate float64) {
	a, ok := r.arrivals.leases[l]
	if !ok {
		return
	}
	if rate == 0 {
		r.dropArrivalLocked(l, a)
		return
	}
	if l.proven.Load() {
		r.arrivals.mu.Lock()
		slice := r.arrivals.slices[a.slice]
		slice.countProven(a.renewsPerMin, -1)
		slice.countProven(rate, 1)
		r.arrivals.mu.Unlock()
	}
	a.renewsPerMin = rate
	r.arrivals.leases[l] = a
}

// OpenForTraffic ends start-up: the expected renewals are seeded from the
// instances in the registry (those registered so far, e.g. copied from a
// peer by syncUp), the renewal window restarts, and the next eviction run
// is the first. It returns the number of instances.
func (r *Registry) OpenForTraffic() int {
	now := r.now()
	r.mu.Lock()
	expected := 0.0
	for _, byID := range r.apps {
		for _, l := range byID {
			expected += l.renewsPerMin
		}
	}
	r.expected = expected
	// What is here at opening was copied from a peer that served it (or
	// registered during start-up): it is held to the threshold at once,
	// as Eureka's openForTraffic seeds it.
	for _, byID := range r.apps {
		for _, l := range byID {
			l.proven.Store(true)
		}
	}
	r.unproven.Store(0)
	r.lastEvictionAt = time.Time{}
	r.spActive = false
	r.renewals.Reset(now)
	// The first window is a warm-up in which nothing is evicted, so what
	// arrived before it is due a full window of renewals after it.
	r.resetArrivalsLocked(nil) // a syncUp copy may have filled it
	clear(r.arrivals.slices)
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
		// The arrivals map changes only under the write lock, so reading
		// it here is safe; its sums take arrivals.mu.
		if a, ok := r.arrivals.leases[l]; ok {
			r.arrivals.mu.Lock()
			r.arrivals.slices[a.slice].countProven(a.renewsPerMin, 1)
			r.arrivals.mu.Unlock()
		}
	}
}

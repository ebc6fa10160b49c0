// Package registry is Muster's core: a deterministic state machine holding
// every application, instance and lease of one node, with Eureka's status
// override rules, self-preservation, eviction, the delta queue and
// versioned read snapshots. It does no I/O; every time-dependent decision
// reads the injected clock (Config.Now) once and passes `now` down, and only
// Run owns tickers.
//
// # Leases
//
// A lease expires at last renewal + duration (leaseInfo.durationInSecs,
// default 90 s), plus the eviction run's compensation for lateness. Eureka
// counts the duration twice after a renewal (Lease.java, bug 1); Muster
// does not, so a dead instance goes after 90 s + at most one eviction
// interval, not 180 s.
//
// # Self-preservation
//
//	expected renewals/min = Σ over instances of 60 s / renewal interval
//	                        (leaseInfo.renewalIntervalInSecs, or
//	                        ExpectedRenewalInterval = 30 s when missing or 0)
//	threshold             = ⌊expected × RenewalPercentThreshold (0.85)⌋
//	renewals last minute  = renewals counted in the last full
//	                        RenewalRateWindow (60 s), which slides in 5 s
//	                        steps, scaled to a minute; every successful
//	                        renewal counts, replicated too
//
// 100 instances renewing every 30 s expect 200 renewals a minute, threshold
// 170. Self-preservation is active when renewals fall below the threshold:
// then nothing is evicted until they recover. Instances registered within
// the counted window are not yet held to it (ArrivingRenewsPerMin), so a
// large deployment does not trip it. The window slides rather than tumbles
// (Eureka's MeasuredRate) so that a mass outage is seen within about half a
// window, well before the dead leases expire. It is never active during the
// first window after OpenForTraffic (the count cannot know yet), and nothing
// is evicted in that window either. Register, cancel and eviction adjust the
// expectation at once; UpdateRenewThreshold recounts it from the live
// leases every RenewThresholdUpdateInterval (15 min) and adopts the recount
// only when it is above 0.85 × the current expectation (or
// self-preservation is off), so a mass outage cannot lower the bar.
//
// Registrations alone cannot raise the bar: an instance is held to the
// threshold only once it has renewed (its own heartbeat or a peer's
// replicated one); until then its share is UnprovenRenewsPerMin, left out
// of the test, and once its lease expires it is evicted without the per-run
// cap. A flood of instances that never renew therefore never switches
// self-preservation on; a mass outage of renewing instances does, as
// before. Instances present at OpenForTraffic (copied by syncUp) count as
// renewing. See selfpreservation.go.
//
// # Limits
//
// Config.Limits bound instances (node and app), metadata, name lengths and
// how far in the future a lastDirtyTimestamp may be; a write beyond one is
// refused whole with a *LimitError (ErrCapacity, ErrAppFull, ErrClockSkew
// or ErrLimitExceeded) and counted (LimitRejections). Lease fields beyond
// MaxRenewalIntervalSecs and MaxLeaseDurationSecs are clamped.
//
// # Tasks (Run)
//
//   - every EvictionInterval (60 s): EvictExpired — at most
//     size − ⌊size × 0.85⌋ expired leases per run, in random order, plus
//     every expired lease that never renewed;
//   - every RenewThresholdUpdateInterval (15 min): UpdateRenewThreshold;
//   - every DeltaRetentionInterval (30 s): PruneDeltas drops changes older
//     than DeltaRetention (3 min) from the delta.
//
// # Reads
//
// Every change a reader can see (register, cancel, eviction, status or
// metadata change) bumps the version; heartbeats do not. Snapshot returns
// one immutable Snapshot per version — the full registry, the delta and
// their common apps hashcode — shared by every reader, so payloads can be
// encoded once per version. An instance stays visible in every read until
// it is cancelled or evicted, expired or not (Eureka hides expired leases
// from instance GETs only, bug 12). AppRenewals returns the renewals
// counted per app since start, for the dashboard's self-preservation
// history; a heartbeat adds to a counter its lease points to.
//
// # Changes
//
// SetChangeHook receives every successful register, heartbeat, cancel and
// status change in the order applied, after the lock is released; this is
// how replication learns what to send. Changes marked Replicated came from
// a peer and are not sent on.
package registry

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
// A persistent lease (metadata muster.lease: persistent; persistent.go)
// never expires: it is never evicted and leaves only by cancel, its
// expected renewals are 0 (so it counts in no renewal threshold), and its
// cancel's tombstone lasts a maximal lease. The health checks are its
// liveness.
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
//     every expired lease that never renewed; it also forgets the
//     arrivals older than two windows, which otherwise only the next
//     registration would (a fleet that registered together and then only
//     renews would keep counting as arriving; forgetting is dropping a
//     few per-slice counts, whatever the number of leases);
//   - every RenewThresholdUpdateInterval (15 min): UpdateRenewThreshold;
//   - every DeltaRetentionInterval (30 s): PruneDeltas drops changes older
//     than DeltaRetention (3 min) from the delta.
//
// # Reads
//
// Every change a reader can see (register, cancel, eviction, status or
// metadata change) bumps the version; heartbeats do not. A status write or
// a register that leaves the stored instance as it was still bumps it, since
// peers must hear of it (Eureka replicates those too). Snapshot returns
// one immutable Snapshot per version — the full registry, the delta and
// their common apps hashcode — shared by every reader, so payloads can be
// encoded once per version. Snapshots are built incrementally
// (snapshot_build.go): the change stream's ring names the apps changed
// since the previous snapshot and only their views are rebuilt; every
// other AppView, and every unchanged delta group, is reused with its
// Version, so encoders can cache per app and a snapshot costs O(apps) plus
// the changed apps' instances. A view's lastRenewalTimestamps are those of
// its app's last change (Eureka's response cache serves cached ones too). An instance stays visible in every read until
// it is cancelled or evicted, expired or not (Eureka hides expired leases
// from instance GETs only, bug 12). AppRenewals returns the renewals
// counted per app since start, for the dashboard's self-preservation
// history; a heartbeat adds to a counter its lease points to.
//
// # Writes: one operation type
//
// Every write is an Op given to Apply: register, renew, cancel, status,
// override removal, metadata, the health checks' mark (health.go) and the
// operator's drain (drain.go), each with its Origin (client, peer, sync, anti-entropy; evictions come from
// the node itself, marks from its health checks). A client request, a
// replicated item, a syncUp copy and a 409 repair take the same path and
// the same rules; the origin decides only what Eureka's "isReplication"
// decides (the status rules, and whether the change is sent on).
//
// # The change stream
//
// Every visible change gets the next version (its Seq: gap-free, one more
// than the previous change's; the node's own sequence, which means nothing
// on another node) and is appended, under the write lock and so
// in apply order, to an outbox: a ring of the last Config.OutboxSize
// (16384) events. Consumers (replication; later the payload cache,
// watchers, metrics) each hold a Cursor from Subscribe and read at their
// own pace, outside every registry lock; the registry never waits for
// them, it only pokes each cursor's channel without blocking after it
// releases its lock. Ordering: a cursor sees every change once, in Seq
// order, from the moment it subscribed. Back-pressure: none on writers; a
// consumer that falls more than OutboxSize events behind gets resync from
// Cursor.Read instead of the overwritten events (never a silent gap), and
// rebuilds its state from a Snapshot (replication sends every peer a
// heartbeat for every live instance, and the peers ask for what they lack).
//
// A flow looks like: httpapi applies RegisterOp from OriginClient →
// the registry stores it, version n, event n → the replicator's cursor
// reads event n → each peer's sender batches it → the peer applies it from
// OriginPeer, and it goes no further: only OriginClient changes (and this
// node's health-check marks, OriginHealthCheck) are sent to peers.
//
// # Renewals
//
// Heartbeats change no version and are not events. A client's renewal
// sets a flag on its lease and, the first time since the last take, pushes
// the lease onto one of 16 lock-free stacks; the replication feed takes
// them (TakeRenewals, every 500 ms, or sooner when RenewalsBacklogged says
// a batch's worth waits: each stack counts its pushes and the one that
// reaches its share of the bound pokes) and sends one heartbeat per
// renewed lease with its newest state. Nothing is lost, repeated renewals of one instance coalesce, and
// the backlog can never exceed the number of instances. A peer's
// heartbeats are not fed. The heartbeat path takes its processor's read
// stripe of the registry lock (16 stripes; writers take all), stores the
// renewal time atomically and counts into its processor's cells of sharded
// counters, so heartbeats on different cores share no lock and no hot
// cache line. It finds the lease through the key index (keyindex.go: one
// table from a seeded hash of app and id to the lease's address, which
// the collector does not scan, the key checked on the lease) rather than
// through the app, and reads nothing of the instance: what the status
// rules and the lastDirtyTimestamp check need is copied onto the lease
// when the instance is stored. At a million instances each of those loads is a cache miss.
//
// # Write versions and the merge of pieces
//
// Every write accepted from a client (register, status, override removal,
// metadata, cancel) is stamped with a version from the registry's hybrid
// logical clock (hlc.go): Unix ms of Config.Now << 16 | a 16-bit counter,
// always above every version issued or observed here — even a write that
// leaves the instance as it was. Every versioned copy that arrives from a
// peer, syncUp or anti-entropy is observed, so a write made after seeing
// another gets a larger version whatever the two clocks say; writes that
// never saw each other are ordered by their nodes' clocks (a skew of s
// cannot reorder writes made more than s apart). Renewals change no
// version. Versions never go to Eureka clients.
//
// A version belongs to the piece of the instance its writer owns
// (pieces.go): the client's registration (Instance.WriteVersion), the
// operator's override, each metadata key written by PUT …/metadata, the
// health mark and the drain (Instance.Pieces). Two copies of an instance, wherever
// they meet (a replicated item, a 409 answer, a syncUp copy, an
// anti-entropy repair), are merged piece by piece, the higher version of
// each winning (mergeCopies); what readers see is derived from the pieces
// with Eureka's status rules (resolvePieces). A write from a peer without
// a version (a Java Eureka server) follows Eureka's lastDirtyTimestamp
// rules and stores version 0, which any versioned write beats; an
// unversioned snapshot copy (syncUp over GET /apps) never replaces a
// versioned one.
//
// A cancel leaves a tombstone with its version (tombstone.go) for the
// instance's lease duration plus Config.TombstoneGrace, and beyond that
// while a peer has not been in sync since (SetTombstoneHold), at most
// Config.TombstoneMaxAge and Config.MaxTombstones of them (the oldest
// goes first); a copy whose registration is not newer than it is refused,
// so no late register, syncUp copy or anti-entropy repair brings a
// cancelled instance back. A peer's cancel older than the stored copy is ignored;
// one of an instance this node never had keeps the lease the cancel
// carries (Op.LeaseDuration), the default lease without one. The live
// tombstones outlive a restart in the data-dir snapshot (LiveTombstones,
// registry/persist). Evictions leave none: each node evicts on its own;
// they leave the evicted copy's override and metadata writes instead, for
// the next copy a peer sends (leftovers.go).
//
// # Digests
//
// Each stored instance has a 64-bit digest over every client-visible field
// and its version (not the lease stamps each node sets itself); an app's
// digest is the sum of its instances', the root the sum of all. Both are
// updated on every change in O(1), so anti-entropy (package replication)
// compares two registries with one number and narrows down to apps
// (AppDigests) and instances (AppEntries, with tombstones) only where they
// differ, then copies what it lacks (Copy) and applies it from
// OriginAntiEntropy: a missing instance's lease counts as renewed at the
// holder's last renewal (Op.RenewedAt), a replaced one keeps its own.
//
// # Start-up
//
// BeginSync/EndSync bracket a syncUp copy (Origin OriginSync): cancels
// meanwhile leave tombstones the copy respects, and peers' status writes
// are applied again after it, all under the write lock. OpenForTraffic
// ends start-up; RefuseReadsFor and ReadsAllowed are the refuse-reads
// policy after a syncUp that reached no peer, on the registry's clock;
// RefuseReadsUntilRenewed refuses until every client has had time to renew
// once (the longest of ExpectedRenewalInterval and the intervals
// registering instances declare, plus a margin, within a limit); the
// cluster's own nodes' self-registrations (Config.ClusterNode) are no
// clients to wait for and never lengthen it.
package registry

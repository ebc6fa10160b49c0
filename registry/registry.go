package registry

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// lease is the registry's record of one instance. Its fields are ordered
// so that it fills a 128-byte size class without padding (at a million
// instances every 16 bytes here is 16 MB) and a heartbeat's lookup and
// status check read the first 64 bytes only.
type lease struct {
	// inst is the current immutable instance; replaced, never modified,
	// under Registry.mu.
	inst *Instance
	// id is the instance's id, the string of inst (set with it), and app
	// its app's leases, slot its place there (keyindex.go).
	id   string
	app  *appLeases
	slot uint32
	// keyCheck is a second hash of the key, what a lookup checks besides
	// the id's length (keyindex.go); set by indexLocked.
	keyCheck uint32
	// lastRenewal is the last renewal in Unix nanoseconds. Heartbeats store
	// it atomically under a read stripe, so renewals never wait for each
	// other.
	lastRenewal atomic.Int64
	// renewOutcome, lastDirty and version are what a heartbeat needs of
	// inst, copied here when inst is stored (setInstLocked): a renewal
	// then reads the lease alone. At a million instances the instance is
	// one more cache miss (and TLB miss) per heartbeat.
	lastDirty int64 // inst.LastDirtyTimestamp
	// proven is set by the lease's first renewal (see selfpreservation.go):
	// until then it is not held to the renewal threshold.
	proven       atomic.Bool
	renewOutcome [2]renewOutcome // for a client's [0] and a peer's [1] renewal
	// removed is set when the lease leaves the registry (cancel or
	// eviction; removeLocked, under the write lock). The renewal feed reads
	// it under a read stripe to drop leases that went while they waited,
	// without looking each one up again.
	removed bool
	// persistent is set while inst asks for a lease that never expires
	// (persistent.go); derived from inst when it is stored.
	persistent bool

	// appRenewals is the app's renewal total (apprenewals.go), shared by
	// the app's leases, so a heartbeat counts it without a lookup.
	appRenewals *shardedCounter
	version     uint64 // inst.CopyVersion()
	// clientSeen is when a client last registered or renewed this lease
	// through this node (Unix nanoseconds; 0 if never): what a peer's
	// catch-up may replay (ClientLive).
	clientSeen atomic.Int64
	// renewPending and nextRenewed link the lease into the renewal feed
	// (renewals.go): set by a client heartbeat, cleared by TakeRenewals.
	renewPending atomic.Bool
	// arrival is the id of the arrivals' slice this lease arrived in (0:
	// none; selfpreservation.go). It fills renewPending's padding.
	arrival     uint32
	nextRenewed *lease
	// duration and renewsPerMin are derived from inst when it is stored.
	duration     time.Duration
	renewsPerMin float64
	// digest is InstanceDigest(inst), kept for anti-entropy (digest.go).
	digest uint64
}

func (l *lease) expired(now time.Time, grace time.Duration) bool {
	if l.persistent {
		return false
	}
	return leaseExpired(now, time.Unix(0, l.lastRenewal.Load()), l.duration, grace)
}

// leaseExpired is the lease rule: a lease expires once now passes the last
// renewal plus its duration plus grace. Eureka's Lease.renew stores
// now+duration and isExpired adds the duration again, so a dead instance
// lingers for twice its lease (Lease.java, Netflix/eureka#531); Muster counts
// the duration once.
func leaseExpired(now, lastRenewal time.Time, duration, grace time.Duration) bool {
	return now.After(lastRenewal.Add(duration + grace))
}

// Stats are running totals since start, for metrics, and the persistent
// instances held now.
type Stats struct {
	Registrations, Renewals, Cancels, Evictions uint64
	Persistent                                  int
}

// Registry is the whole registry of one node: apps, instances, leases,
// self-preservation, eviction, the delta queue and the change stream. It is
// safe for concurrent use. Writes go through Apply; reads of the whole
// registry through Snapshot; consumers of changes through Subscribe and
// the renewal feed.
type Registry struct {
	cfg  Config
	now  func() time.Time
	rand *rand.Rand
	log  zerolog.Logger

	renewals    *MeasuredRate
	appRenewals appRenewals // per-app totals for the dashboard (apprenewals.go)

	registrations, cancels, evictions atomic.Uint64
	renewalCount                      shardedCounter
	limitHits                         limitCounters // writes refused, per limit
	unproven                          atomic.Int64  // expected renewals/min of unproven leases, in millionths

	// opened and readsRefusedUntil are the start-up state (startup.go);
	// untilRenewedFrom, -Margin and -Limit are set while a refusal
	// waits for every client to renew once (RefuseReadsUntilRenewed), and
	// longestDeclared is the longest renewal interval an instance has
	// declared since the registry started.
	opened             atomic.Bool
	readsRefusedUntil  atomic.Int64 // Unix ns
	untilRenewedFrom   atomic.Int64 // Unix ns; 0: no such refusal
	untilRenewedMargin atomic.Int64 // ns
	untilRenewedLimit  atomic.Int64 // ns
	longestDeclared    atomic.Int64 // ns

	// tombHold is SetTombstoneHold's function, read outside mu.
	tombHold atomic.Pointer[func() time.Time]
	// evictHold is SetEvictionHold's function, read outside mu; heldSince
	// and heldBy are the current hold (evictionHeld: eviction runs only,
	// which Run serialises).
	evictHold atomic.Pointer[func() string]
	heldSince time.Time
	heldBy    string

	// out is the change stream; its own mutex is taken inside mu.
	out *outbox

	// The renewal feed (renewals.go): lock-free, outside mu.
	renewFeed  atomic.Bool
	renewWoken atomic.Bool // renewWake was poked since the last take
	// renewStripeBound is how many leases one stack may gather before the
	// push that reaches it pokes renewFull (0: never); see
	// RenewalsBacklogged.
	renewStripeBound atomic.Int64
	_                cacheLinePad
	renewHeads       [lockStripes]struct {
		p atomic.Pointer[lease]
		// n counts the pushes since the stack was last taken, on the
		// head's own line: the push has just written it.
		n atomic.Int64
		_ [128 - 16]byte
	}
	renewWake chan struct{}
	renewFull chan struct{}

	// mu guards everything below it, up to snapMu. Heartbeats take one read
	// stripe; writers take all of it.
	mu           stripedRWMutex
	apps         map[string]*appLeases // app → its leases (keyindex.go)
	byKey        map[uint64]leaseAddr  // the key index (keyindex.go)
	collided     map[InstanceKey]*lease
	hashKey      keyHasher
	checkKey     keyHasher // independent of hashKey: lease.keyCheck
	instances    int
	version      uint64 // Seq of the newest event: bumped by every visible change
	deltaVersion uint64 // bumped by every change of the delta's content
	// drains holds, for each drained lease, when this node applied its
	// drain (noteDrainLocked). Beside the leases, not in them: drains are
	// rare and a lease must stay in its size class.
	drains         map[*lease]drainApplied
	deltas         deltaQueue
	expected       float64    // expected renewals per minute
	arrivals       arrivalLog // how many leases arrived in the last two windows (selfpreservation.go)
	lastEvictionAt time.Time
	spActive       bool       // self-preservation was active at the last check (for logging transitions)
	sync           *syncState // non-nil while a syncUp copy is being applied (sync.go)
	clock          hlc        // write versions (hlc.go)
	dig            digests    // digest sums (digest.go)
	tombs          tombstones // cancels (tombstone.go)
	leftovers      leftovers  // pieces of evicted copies (leftovers.go)
	persistent     persistentCounts

	// snapMu guards building snap, so concurrent readers build a new
	// snapshot only once.
	snapMu sync.Mutex
	snap   atomic.Pointer[Snapshot]
}

// New returns an empty registry. It starts no goroutines; call Run for the
// periodic tasks, or call the task methods yourself.
func New(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{
		cfg: cfg, now: cfg.Now, rand: cfg.Rand,
		apps: map[string]*appLeases{}, byKey: map[uint64]leaseAddr{}, collided: map[InstanceKey]*lease{},
		hashKey: seededKeyHash(), checkKey: seededKeyHash(), arrivals: newArrivalLog(),
		persistent: newPersistentCounts(),
		out:        newOutbox(cfg.OutboxSize), renewWake: make(chan struct{}, 1), renewFull: make(chan struct{}, 1),
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.rand == nil {
		r.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	r.log = cfg.Logger.With().Str(logComponent, "registry").Logger()
	r.renewals = NewMeasuredRate(cfg.RenewalRateWindow, r.now())
	return r, nil
}

// unlock releases mu (held for writing) and wakes the stream's consumers
// if the write produced events. No consumer code runs here: a wake-up is a
// non-blocking send.
func (r *Registry) unlock(before uint64) {
	changed := r.version != before
	r.mu.Unlock()
	if changed {
		r.out.notify()
	}
}

// Stats returns running totals.
func (r *Registry) Stats() Stats {
	return Stats{
		Registrations: r.registrations.Load(),
		Renewals:      uint64(r.renewalCount.load()),
		Cancels:       r.cancels.Load(),
		Evictions:     r.evictions.Load(),
		Persistent:    r.PersistentCount(),
	}
}

// Version returns the current content version: the Seq of the newest event.
func (r *Registry) Version() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.version
}

// Len returns the number of registered instances.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.instances
}

// renewsPerMin is how often an instance is expected to renew in a minute:
// 60 s over its own renewal interval, or over ExpectedRenewalInterval when it
// gives none (Eureka assumes one interval for every client); 0 for a
// persistent instance, which need not renew at all.
func (r *Registry) renewsPerMin(in *Instance) float64 {
	if IsPersistent(in) {
		return 0
	}
	interval := r.cfg.ExpectedRenewalInterval
	if in.RenewalIntervalSecs > 0 {
		interval = time.Duration(in.RenewalIntervalSecs) * time.Second
	}
	return float64(time.Minute) / float64(interval)
}

func (r *Registry) leaseDuration(in *Instance) time.Duration {
	if in.LeaseDurationSecs > 0 {
		return time.Duration(in.LeaseDurationSecs) * time.Second
	}
	return r.cfg.DefaultLeaseDuration
}

// resolveStatus is Eureka's status rule chain (PeerAwareInstanceRegistryImpl:
// DownOrStartingRule, OverrideExistsRule, LeaseExistsRule, then the
// instance's own status). incoming is the status being registered or
// renewed, override the status override in force ("" or UNKNOWN for none),
// existing the stored instance if any.
func resolveStatus(incoming, override Status, existing *Instance, replicated bool) Status {
	if incoming != StatusUp && incoming != StatusOutOfService {
		return incoming
	}
	if override != "" && override != StatusUnknown {
		return override
	}
	if !replicated && existing != nil && (existing.Status == StatusUp || existing.Status == StatusOutOfService) {
		return existing.Status
	}
	return incoming
}

// Apply applies one operation: every write to the registry goes through
// here, whatever its origin. It returns the stored instance after the
// operation (for a cancel, the removed copy) and:
//   - ErrInstanceNotFound when the operation needs an instance that is not
//     registered;
//   - ErrInvalidInstance or ErrInvalidStatus for bad input, which changes
//     nothing;
//   - for a renewal, ErrStatusUnknown when the status rules resolve to
//     UNKNOWN (the lease is not renewed and the client must register
//     again), ErrNewerDirtyTimestamp when the caller's lastDirtyTimestamp is
//     newer than the stored one (renewed, but the caller must register
//     again), and ErrStaleDirtyTimestamp when a peer's is older (renewed,
//     and the stored instance should win: the peer gets it with a 409).
//
// A visible change gets the next version and goes to the change stream
// (Subscribe) before the lock is released; a client's renewal changes no
// version and goes to the renewal feed instead. A renewal allocates
// nothing and takes no lock that all renewals share.
func (r *Registry) Apply(op Op) (*Instance, error) {
	return r.apply(op, r.now())
}

func (r *Registry) apply(op Op, now time.Time) (*Instance, error) {
	switch op.Kind {
	case OpRenew:
		return r.renew(op, now)
	case OpRegister:
		return r.register(op, now)
	case OpCancel:
		return r.cancel(op, now)
	case OpStatus:
		return r.updateStatus(op, now)
	case OpDeleteOverride:
		return r.deleteStatusOverride(op, now)
	case OpMetadata:
		return r.updateMetadata(op, now)
	case OpHealth:
		return r.setHealth(op, now)
	case OpDrain:
		return r.setDrain(op, now)
	}
	return nil, fmt.Errorf("%w: operation %s cannot be applied", ErrInvalidOp, op.Kind)
}

// changeLocked records a visible change: the next version, a delta entry
// for in (whose ActionType says what happened) and an event in the stream.
func (r *Registry) changeLocked(kind OpKind, origin Origin, in *Instance, now time.Time) {
	r.deltaVersion++
	r.deltas.push(deltaRecord{at: now, key: InstanceKey{in.App, in.ID()}, inst: in, lastRenewal: now.UnixMilli()})
	r.eventLocked(kind, origin, in, now)
}

// eventLocked gives a change the next version and appends it to the stream,
// without a delta entry: for writes that peers must hear about but that
// leave the stored instance as it was (a status write that changes nothing,
// a register that keeps the newer stored copy). Eureka replicates those
// too.
func (r *Registry) eventLocked(kind OpKind, origin Origin, in *Instance, now time.Time) {
	r.version++
	r.out.appendLocked(Event{Seq: r.version, Kind: kind, Origin: origin, Key: InstanceKey{in.App, in.ID()}, Instance: in, At: now})
}

func (r *Registry) register(op Op, now time.Time) (*Instance, error) {
	in := op.Instance
	if in == nil {
		return nil, fmt.Errorf("%w: register without an instance", ErrInvalidInstance)
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	in = in.Clone()
	in.App = upperASCII(in.App)
	clampLease(in)
	nowMs := now.UnixMilli()
	if in.LastDirtyTimestamp == 0 {
		in.LastDirtyTimestamp = nowMs
	}
	if err := r.checkInstanceLimits(in, now); err != nil {
		return nil, err
	}
	r.noteRenewalInterval(in, now)
	id := in.ID()
	key := InstanceKey{in.App, id}
	replicated := op.Origin.fromPeer()

	if op.Origin == OriginSync && in.WriteVersion != 0 && r.checkVersionSkew(in.WriteVersion, now) != nil {
		// A start-up copy (syncUp, the data dir's snapshot) written under
		// a clock far ahead of ours: loaded without its version rather
		// than lost, it loses to any versioned copy (checkVersionSkew).
		in.WriteVersion = 0
	}
	if replicated && in.WriteVersion != 0 {
		return r.registerCopy(op, in, key, now)
	}
	if replicated {
		in.WriteVersion = 0 // a write from a peer without versions
	}

	r.mu.Lock()
	v0 := r.version
	stored, created, err := r.registerLocked(op, in, key, now)
	r.unlock(v0)
	if created {
		r.log.Debug().Str(logApp, in.App).Str(logInstanceID, id).Stringer(logOrigin, op.Origin).Msg("registered")
	}
	return stored, err
}

// registerLocked is register under mu held for writing: it stores in, an
// unversioned write, unless a stored copy, a tombstone or a syncUp in
// progress says otherwise, and returns the stored instance and whether the
// instance is new here.
func (r *Registry) registerLocked(op Op, in *Instance, key InstanceKey, now time.Time) (stored *Instance, created bool, err error) {
	replicated := op.Origin.fromPeer()
	nowMs := now.UnixMilli()
	if r.sync != nil && r.sync.skipLocked(op, key) {
		return nil, false, nil
	}
	if _, gone := r.tombs.get(key); gone && (op.Origin == OriginSync || op.Origin == OriginAntiEntropy) {
		// An unversioned copy (from a Java peer's registry) of an instance
		// cancelled here: the cancel is newer than anything the copy can
		// prove.
		return nil, false, nil
	}
	l := r.lookupLocked(key.App, key.ID)
	if l != nil && l.inst.WriteVersion != 0 && (op.Origin == OriginSync || op.Origin == OriginAntiEntropy) {
		// An unversioned copy from a registry snapshot (syncUp over
		// Eureka's wire) is older than any versioned write that already
		// reached this node.
		return l.inst, false, nil
	}
	if op.OnlyIfNewer && (l == nil || l.inst.LastDirtyTimestamp >= in.LastDirtyTimestamp) {
		return nil, false, nil
	}
	if l == nil {
		if err := r.checkCapacityLocked(in.App); err != nil {
			return nil, false, err
		}
	}
	if IsPersistent(in) {
		if err := r.checkPersistentLocked(op, key, l); err != nil {
			return nil, false, err
		}
	}
	var existing *Instance
	if l != nil {
		existing = l.inst
		// Eureka keeps the stored copy when it is strictly newer; on a tie
		// the incoming body wins (AbstractInstanceRegistry#register).
		if existing.LastDirtyTimestamp > in.LastDirtyTimestamp {
			l.lastRenewal.Store(now.UnixNano())
			r.noteClientLocked(l, op, now)
			r.registrations.Add(1)
			r.eventLocked(OpRegister, op.Origin, existing, now)
			return existing, false, nil
		}
	}

	// The registration is this write's piece; the override, the health
	// mark and metadata writes are the stored copy's (pieces.go).
	p := Pieces{Override: StatusUnknown}
	var base *Instance // for Eureka's LeaseExistsRule: the status apart from an override
	in.Health = nil
	if existing != nil {
		p = existing.pieces()
		base = &Instance{Status: baseStatus(existing)}
		in.Health = existing.Health // server-owned: a client's register keeps it
	}
	if !p.overrideSet() && p.OverrideVersion == 0 && in.OverriddenStatus != "" && in.OverriddenStatus != StatusUnknown {
		// An override the body carries where none was ever written here
		// (a Java peer's copy): Eureka's register adopts it.
		p.Override = in.OverriddenStatus
	}
	p.RegStatus = resolveStatus(in.Status, StatusUnknown, base, replicated)
	if !replicated {
		in.WriteVersion = r.clock.next(now)
	}
	if t, gone := r.tombs.get(key); gone && l == nil {
		// Registered again after a cancel: a copy written before it
		// elsewhere must not bring back what the cancel removed, and
		// what was written after it is this registration's.
		p = withLater(p, in.Metadata, t.later, t.version)
	}
	setPieces(in, p)
	in.ActionType = ActionAdded
	in.LastUpdatedTimestamp = nowMs
	in.EvictionTimestamp = 0
	// As Eureka's register (a new Lease each time), a registration restarts
	// the lease's registration time and keeps its service-up time.
	in.RegistrationTimestamp = nowMs
	in.ServiceUpTimestamp = 0
	if existing != nil {
		in.ServiceUpTimestamp = existing.ServiceUpTimestamp
	}
	if in.Status == StatusUp && in.ServiceUpTimestamp == 0 {
		in.ServiceUpTimestamp = nowMs
	}
	in = r.storeLocked(l, in, op, key, now, now)
	return in, existing == nil, nil
}

// storeLocked stores a packed copy of in (a new instance when l is nil)
// with its lease renewed at renewedAt, as a visible change, lifts the
// key's tombstone (the instance is back for real) and returns the stored
// copy.
func (r *Registry) storeLocked(l *lease, in *Instance, op Op, key InstanceKey, now, renewedAt time.Time) *Instance {
	in = packInstance(in)
	if id := in.ID(); id == key.ID {
		key.ID = id // the packed copy: the app's map and the lease keep no other
	}
	rate := r.renewsPerMin(in)
	was, reregistered := false, true
	if l != nil {
		was, reregistered = l.persistent, in.WriteVersion == 0 || in.WriteVersion != l.inst.WriteVersion
	}
	if l == nil {
		l = &lease{appRenewals: r.appRenewals.counter(in.App), id: key.ID}
		r.addLeaseLocked(l, in.App)
		r.instances++
		r.expected += rate
		r.addArrivalLocked(l, rate, now)
		r.rerateUnprovenLocked(l, 0, rate)
	} else {
		r.expected += rate - l.renewsPerMin
		r.rerateArrivalLocked(l, l.renewsPerMin, rate)
		r.rerateUnprovenLocked(l, l.renewsPerMin, rate)
	}
	r.setInstLocked(l, in)
	l.id = key.ID
	l.duration = r.leaseDuration(in)
	l.renewsPerMin = rate
	l.lastRenewal.Store(renewedAt.UnixNano())
	r.notePersistentLocked(l, in, op, key, was, reregistered)
	r.noteClientLocked(l, op, now)
	r.changeLocked(OpRegister, op.Origin, in, now)
	r.registrations.Add(1)
	r.tombs.remove(key)
	r.leftovers.drop(key)
	if r.sync != nil {
		r.sync.copiedLocked(op, key)
	}
	return in
}

// registerCopy applies a versioned copy from a peer, syncUp or
// anti-entropy: it is merged into the stored copy piece by piece
// (mergeCopies), unless the key's tombstone is at least as new as the
// copy's registration (the cancel came last). Only this node's lease
// stamps are its own. It returns the stored instance after the merge (nil
// when cancelled here).
func (r *Registry) registerCopy(op Op, in *Instance, key InstanceKey, now time.Time) (*Instance, error) {
	if in.OverriddenStatus == "" {
		in.OverriddenStatus = StatusUnknown
	}
	if err := r.checkVersionSkew(in.CopyVersion(), now); err != nil {
		return nil, err
	}

	r.mu.Lock()
	v0 := r.version
	stored, err := r.registerCopyLocked(op, in, key, now)
	r.unlock(v0)
	return stored, err
}

// registerCopyLocked is registerCopy under mu held for writing.
func (r *Registry) registerCopyLocked(op Op, in *Instance, key InstanceKey, now time.Time) (*Instance, error) {
	nowMs := now.UnixMilli()
	r.clock.observe(in.CopyVersion())
	if r.sync != nil && r.sync.skipLocked(op, key) {
		return nil, nil
	}
	if t, gone := r.tombs.get(key); gone && t.version >= in.WriteVersion {
		// Cancelled after this registration; pieces written after the
		// cancel on a copy that had not heard of it wait for the next.
		if in.Pieces != nil {
			r.tombs.keepLater(key, *in.Pieces)
		}
		return nil, nil
	}
	l := r.lookupLocked(key.App, key.ID)
	if l == nil && op.OnlyIfNewer {
		return nil, nil
	}
	renewedAt := now
	var existing *Instance
	added := true
	if l != nil {
		existing = l.inst
		merged, reregistered := mergeCopies(existing, in)
		if InstanceDigest(merged) == l.digest {
			return existing, nil // nothing newer in the copy
		}
		in, added = merged, reregistered
		if op.Origin == OriginAntiEntropy {
			renewedAt = time.Unix(0, l.lastRenewal.Load())
		}
	} else {
		if err := r.checkCapacityLocked(key.App); err != nil {
			return nil, err
		}
		if !op.RenewedAt.IsZero() && op.RenewedAt.Before(now) {
			renewedAt = op.RenewedAt
		}
		p := in.pieces()
		if t, gone := r.tombs.get(key); gone { // registered again after that cancel
			p = withLater(p, p.regMetadata(in), t.later, t.version)
		}
		if left := r.leftovers.take(key); left != nil { // evicted here, alive there
			p = withLater(p, p.regMetadata(in), left, 0)
		}
		setPieces(in, p)
	}
	// A registration (here, or one that replaced ours) is ADDED, as on the
	// node that accepted it and on Eureka's peers; a change of another
	// piece is MODIFIED.
	in.ActionType = ActionModified
	in.LastUpdatedTimestamp = nowMs
	in.EvictionTimestamp = 0
	in.RegistrationTimestamp = nowMs
	in.ServiceUpTimestamp = 0
	if existing != nil {
		in.ServiceUpTimestamp = existing.ServiceUpTimestamp
		if !added {
			in.RegistrationTimestamp = existing.RegistrationTimestamp
		}
	}
	if added {
		in.ActionType = ActionAdded
	}
	if in.Status == StatusUp && in.ServiceUpTimestamp == 0 {
		in.ServiceUpTimestamp = nowMs
	}
	return r.storeLocked(l, in, op, key, now, renewedAt), nil
}

func (r *Registry) renew(op Op, now time.Time) (*Instance, error) {
	app := upperASCII(op.App)
	replicated := op.Origin.fromPeer()
	stripe := r.mu.rlockStripe()
	l := r.lookupLocked(app, op.ID)
	if l == nil {
		r.mu.runlockStripe(stripe)
		return nil, ErrInstanceNotFound
	}
	in := l.inst
	switch l.renewOutcome[boolIndex(replicated)] {
	case renewRefused:
		r.mu.runlockStripe(stripe)
		return nil, ErrStatusUnknown
	case renewCorrects:
		// Rare: an override and the stored status disagree. Eureka corrects
		// the status silently; here it is a visible change like any other.
		r.mu.runlockStripe(stripe)
		return r.renewCorrectingStatus(op, app, now)
	}
	lastDirty, version := l.lastDirty, l.version
	l.lastRenewal.Store(now.UnixNano())
	r.proveLease(l)
	if !l.persistent { // expected by no threshold, so not counted against one
		r.renewals.increment(now, stripe)
	}
	r.renewalCount.addAt(stripe, 1)
	l.appRenewals.addAt(stripe, 1)
	if op.Origin == OriginClient {
		l.clientSeen.Store(now.UnixNano())
		r.feedRenewal(l, stripe)
	}
	r.mu.runlockStripe(stripe)
	return r.checkDirtyTimestamp(op, app, in, lastDirty, version, now)
}

// renewOutcome is what the status rules make of a renewal of the stored
// instance (resolveStatus with the instance's own status and override).
type renewOutcome uint8

const (
	renewKeeps    renewOutcome = iota // the stored status stands: a plain renewal
	renewRefused                      // the rules resolve to UNKNOWN: ErrStatusUnknown
	renewCorrects                     // the rules resolve to another status: stored as a change
)

// renewOutcomeOf is resolveStatus applied to a renewal of in.
func renewOutcomeOf(in *Instance, replicated bool) renewOutcome {
	switch resolved := resolveStatus(in.Status, in.OverriddenStatus, in, replicated); {
	case resolved == StatusUnknown:
		return renewRefused
	case resolved != in.Status:
		return renewCorrects
	}
	return renewKeeps
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lockInstance takes the write lock and looks app/id up (app upper-cased
// already): the lease and the version before the write, or
// ErrInstanceNotFound with the lock released.
func (r *Registry) lockInstance(app, id string) (*lease, uint64, error) {
	r.mu.Lock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.Unlock()
		return nil, 0, ErrInstanceNotFound
	}
	return l, r.version, nil
}

func (r *Registry) renewCorrectingStatus(op Op, app string, now time.Time) (*Instance, error) {
	l, v0, err := r.lockInstance(app, op.ID)
	if err != nil {
		return nil, err
	}
	in := l.inst
	resolved := resolveStatus(in.Status, in.OverriddenStatus, in, op.Origin.fromPeer())
	if resolved == StatusUnknown {
		r.mu.Unlock()
		return nil, ErrStatusUnknown
	}
	if resolved != in.Status {
		in = in.Clone()
		in.Status = resolved
		applyHealth(in)
		in.WriteVersion = r.clock.next(now) // this node's own correction
		in = r.modifyLocked(l, in, OpRenew, op.Origin, now)
	}
	l.lastRenewal.Store(now.UnixNano())
	r.noteClientLocked(l, op, now)
	r.proveLease(l)
	if !l.persistent {
		r.renewals.Increment(now)
	}
	r.renewalCount.add(1)
	l.appRenewals.add(1)
	r.unlock(v0)
	return r.checkDirtyTimestamp(op, app, in, in.LastDirtyTimestamp, in.WriteVersion, now)
}

// checkDirtyTimestamp applies EUREKA.md §5.3 after a successful renewal
// of in, whose lastDirtyTimestamp and write version the caller passes (a
// heartbeat has them from the lease, without reading in).
func (r *Registry) checkDirtyTimestamp(op Op, app string, in *Instance, lastDirty int64, version uint64, now time.Time) (*Instance, error) {
	replicated := op.Origin.fromPeer()
	if replicated && op.Version != 0 && r.cfg.SyncWhenTimestampDiffers {
		// A Muster peer: its copy's write version decides, as everywhere
		// else. 404 makes it send its copy, 409 gives it ours.
		switch {
		case op.Version > version:
			return in, ErrNewerDirtyTimestamp
		case op.Version < version:
			return in, ErrStaleDirtyTimestamp
		}
		return in, nil
	}
	if op.LastDirtyTimestamp == 0 || !r.cfg.SyncWhenTimestampDiffers {
		return in, nil
	}
	switch {
	case op.LastDirtyTimestamp > lastDirty:
		if replicated && op.OverriddenStatus != "" && op.OverriddenStatus != StatusUnknown &&
			op.OverriddenStatus != in.OverriddenStatus {
			in = r.storeOverride(app, op.ID, op.OverriddenStatus, op.Origin, now)
		}
		return in, ErrNewerDirtyTimestamp
	case op.LastDirtyTimestamp < lastDirty && replicated:
		return in, ErrStaleDirtyTimestamp
	}
	return in, nil
}

// storeOverride records a status override a peer reported with a heartbeat
// (Eureka's storeOverriddenStatusIfRequired) and applies it at once. Not
// replicated: it came from a peer.
func (r *Registry) storeOverride(app, id string, override Status, origin Origin, now time.Time) *Instance {
	r.mu.Lock()
	v0 := r.version
	defer r.unlock(v0)
	l := r.lookupLocked(app, id)
	if l == nil {
		return nil
	}
	in := l.inst.Clone()
	p := l.inst.pieces()
	p.Override, p.OverrideValue, p.OverrideVersion = override, "", 0 // from a peer without versions
	setPieces(in, p)
	return r.modifyLocked(l, in, OpStatus, origin, now)
}

func (r *Registry) cancel(op Op, now time.Time) (*Instance, error) {
	app := upperASCII(op.App)
	key := InstanceKey{app, op.ID}
	if op.Version != 0 && op.Origin.fromPeer() {
		if err := r.checkVersionSkew(op.Version, now); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	v0 := r.version
	removed, err := r.cancelLocked(op, key, now)
	r.unlock(v0)
	if removed != nil {
		r.log.Debug().Str(logApp, app).Str(logInstanceID, op.ID).Stringer(logOrigin, op.Origin).Msg("cancelled")
	}
	return removed, err
}

// cancelLocked is cancel under mu held for writing. It returns the removed
// copy, nil for a stale cancel, or ErrInstanceNotFound.
func (r *Registry) cancelLocked(op Op, key InstanceKey, now time.Time) (*Instance, error) {
	app := key.App
	if r.sync != nil {
		r.sync.cancelledLocked(key)
	}
	if op.Version != 0 && op.Origin.fromPeer() {
		r.clock.observe(op.Version)
	}
	l := r.lookupLocked(app, op.ID)
	if l == nil {
		if op.Version != 0 && op.Origin.fromPeer() {
			// Cancelled before its register got here: the tombstone keeps
			// a late register out.
			r.tombstoneLocked(key, op.Version, op.LeaseDuration, op.TombstoneTTL, now)
		}
		return nil, ErrInstanceNotFound
	}
	var version uint64
	switch {
	case !op.Origin.fromPeer():
		version = r.clock.next(now)
	case op.Version != 0:
		if op.Version < l.inst.WriteVersion {
			// The instance was registered again after this cancel: it
			// stays, but what it held from before the cancel goes.
			r.cancelPiecesLocked(l, op, now)
			return nil, nil
		}
		version = op.Version
	default: // a peer without versions
		version = l.inst.WriteVersion
	}
	removed := r.removeLocked(app, op.ID, l, OpCancel, op.Origin, now, version)
	r.tombstoneLocked(key, version, r.tombstoneLease(l), op.TombstoneTTL, now)
	if l.inst.Pieces != nil {
		r.tombs.keepLater(key, *l.inst.Pieces) // written after the cancel elsewhere
	}
	r.cancels.Add(1)
	return removed, nil
}

// cancelPiecesLocked applies a cancel older than l's registration: the
// pieces written before it (an override, metadata writes, a mark) belong
// to the cancelled incarnation and go, as they did where the cancel came
// first and the registration after it.
func (r *Registry) cancelPiecesLocked(l *lease, op Op, now time.Time) {
	p := l.inst.pieces()
	if op.Version <= p.Since {
		return
	}
	in := l.inst.Clone()
	p.Since = op.Version
	setPieces(in, p)
	if InstanceDigest(in) != l.digest {
		r.writePieceLocked(l, in, OpRegister, op.Origin, now)
	}
}

// removeLocked deletes a lease (cancel or eviction) and returns the DELETED
// copy of its instance that went into the delta and the stream.
func (r *Registry) removeLocked(app, id string, l *lease, kind OpKind, origin Origin, now time.Time, version uint64) *Instance {
	r.swapDigestLocked(app, l.digest, 0)
	l.removed = true
	if len(r.drains) > 0 {
		delete(r.drains, l)
	}
	if r.dropLeaseLocked(l) {
		delete(r.dig.apps, app) // its sum is 0 now
	}
	r.instances--
	r.forgetPersistentLocked(l)
	r.rerateArrivalLocked(l, l.renewsPerMin, 0)
	r.rerateUnprovenLocked(l, l.renewsPerMin, 0)
	r.expected -= l.renewsPerMin
	if r.expected < 1e-9 {
		r.expected = 0
	}
	in := l.inst.Clone()
	in.WriteVersion = version
	in.ActionType = ActionDeleted
	in.LastUpdatedTimestamp = now.UnixMilli()
	in.EvictionTimestamp = now.UnixMilli()
	r.changeLocked(kind, origin, in, now)
	return in
}

// lockLease takes the write lock, finds the lease of op and renews it at
// now. When there is none it releases the lock and returns
// ErrInstanceNotFound. While a syncUp copy is applied, a peer's status
// write is noted first, to be applied again after the copy.
func (r *Registry) lockLease(op Op, app string, now time.Time) (*lease, error) {
	r.mu.Lock()
	if r.sync != nil {
		r.sync.noteLocked(op, InstanceKey{app, op.ID})
	}
	l := r.lookupLocked(app, op.ID)
	if l == nil {
		r.mu.Unlock()
		return nil, ErrInstanceNotFound
	}
	l.lastRenewal.Store(now.UnixNano())
	return l, nil
}

// pieceVersionLocked is the version of a piece written by op: the next
// one for a write accepted here, 0 (unknown) for a peer's write that came
// without one (a Java Eureka peer): any versioned write beats it.
func (r *Registry) pieceVersionLocked(op Op, now time.Time) uint64 {
	if op.Origin.fromPeer() {
		return 0
	}
	return r.clock.next(now)
}

// writePieceLocked stores a packed copy of in, a copy of l's instance
// with one piece written: as a MODIFIED change when readers see a
// difference, else as an event only (peers must still hear of the write,
// and its new version). It returns the stored copy.
func (r *Registry) writePieceLocked(l *lease, in *Instance, kind OpKind, origin Origin, now time.Time) *Instance {
	old := l.inst
	if in.Status != old.Status || in.OverriddenStatus != old.OverriddenStatus ||
		in.LastDirtyTimestamp != old.LastDirtyTimestamp || !slices.Equal(in.Metadata, old.Metadata) ||
		!sameHealth(in.Health, old.Health) {
		return r.modifyLocked(l, in, kind, origin, now)
	}
	in = packInstance(in)
	r.setInstLocked(l, in)
	r.eventLocked(kind, origin, in, now)
	return in
}

// modifyLocked stores a packed copy of in, a changed copy of l's
// instance, as a visible MODIFIED change, and returns the stored copy.
func (r *Registry) modifyLocked(l *lease, in *Instance, kind OpKind, origin Origin, now time.Time) *Instance {
	in.ActionType = ActionModified
	in.LastUpdatedTimestamp = now.UnixMilli()
	in = packInstance(in)
	r.setInstLocked(l, in)
	r.changeLocked(kind, origin, in, now)
	return in
}

// lockStatusWrite is the prologue of the status writes (updateStatus,
// deleteStatusOverride): it checks op's status and lastDirtyTimestamp,
// then takes the write lock and renews the lease (lockLease). On an error
// the lock is not held.
func (r *Registry) lockStatusWrite(op Op, app string, now time.Time) (*lease, error) {
	if err := op.Status.check(); err != nil {
		return nil, err
	}
	if err := r.checkDirtySkew(op.LastDirtyTimestamp, now); err != nil {
		return nil, err
	}
	return r.lockLease(op, app, now)
}

// updateStatus sets a status override (PUT .../status?value=). The lease is
// renewed. lastDirty can only raise the stored lastDirtyTimestamp. Every
// accepted write is a new version of the override piece, even one that
// changes nothing here: it is the operator's latest word, and must win over
// an older one made on another node (pieces.go).
func (r *Registry) updateStatus(op Op, now time.Time) (*Instance, error) {
	status, app := op.Status, upperASCII(op.App)
	l, err := r.lockStatusWrite(op, app, now)
	if err != nil {
		return nil, err
	}
	v0 := r.version
	old := l.inst
	in := old
	if !op.Origin.fromPeer() || status != old.Status || status != old.OverriddenStatus || op.LastDirtyTimestamp > old.LastDirtyTimestamp {
		in = old.Clone()
		p := old.pieces()
		p.Override, p.OverrideValue, p.OverrideVersion = status, "", r.pieceVersionLocked(op, now)
		in.LastDirtyTimestamp = max(in.LastDirtyTimestamp, op.LastDirtyTimestamp)
		setPieces(in, p)
		if in.Status == StatusUp && in.ServiceUpTimestamp == 0 {
			in.ServiceUpTimestamp = now.UnixMilli()
		}
		in = r.writePieceLocked(l, in, OpStatus, op.Origin, now)
	} else {
		r.eventLocked(OpStatus, op.Origin, in, now)
	}
	r.unlock(v0)
	if old.Status != in.Status || old.OverriddenStatus != in.OverriddenStatus {
		r.log.Info().Str(logApp, app).Str(logInstanceID, op.ID).Str(logFrom, string(old.Status)).
			Str(logTo, string(in.Status)).Stringer(logOrigin, op.Origin).Msg("status override set")
	}
	return in, nil
}

// deleteStatusOverride removes a status override (DELETE .../status) and,
// when one was in force, sets the status to op.Status (Eureka's default is
// UNKNOWN, which makes the client's next heartbeat answer 404 so that it
// registers again with its real status). The lease is renewed. Like a set,
// every accepted removal is a new version of the override piece, even
// where no override was in force: an override set meanwhile on another
// node must not outlive a later removal.
func (r *Registry) deleteStatusOverride(op Op, now time.Time) (*Instance, error) {
	status, app := op.Status, upperASCII(op.App)
	l, err := r.lockStatusWrite(op, app, now)
	if err != nil {
		return nil, err
	}
	v0 := r.version
	old := l.inst
	in := old
	inForce := old.OverriddenStatus != StatusUnknown && old.OverriddenStatus != ""
	if inForce || !op.Origin.fromPeer() {
		in = old.Clone()
		p := old.pieces()
		p.Override, p.OverrideValue, p.OverrideVersion = StatusUnknown, "", r.pieceVersionLocked(op, now)
		if inForce {
			p.OverrideValue = status
		}
		in.LastDirtyTimestamp = max(in.LastDirtyTimestamp, op.LastDirtyTimestamp)
		setPieces(in, p)
		in = r.writePieceLocked(l, in, OpDeleteOverride, op.Origin, now)
	} else {
		r.eventLocked(OpDeleteOverride, op.Origin, in, now)
	}
	r.unlock(v0)
	if inForce {
		r.log.Info().Str(logApp, app).Str(logInstanceID, op.ID).Str(logStatus, string(in.Status)).
			Stringer(logOrigin, op.Origin).Msg("status override removed")
	}
	return in, nil
}

// updateMetadata adds or replaces metadata entries (PUT .../metadata).
// Each key written is a piece of its own with the write's version (the
// overlay, pieces.go), so a registration made meanwhile on another node
// keeps its data and the keys written after it stay. Peers receive it as
// a Register of the whole instance, as from Eureka's
// InstanceResource#updateMetadata.
func (r *Registry) updateMetadata(op Op, now time.Time) (*Instance, error) {
	if _, ok := op.Metadata[LeaseMetadataKey]; ok {
		return nil, invalid(LeaseMetadataKey + " is set by registration only: register the instance again with it (or without it)")
	}
	app := upperASCII(op.App)
	r.mu.Lock()
	l := r.lookupLocked(app, op.ID)
	if l == nil {
		r.mu.Unlock()
		return nil, ErrInstanceNotFound
	}
	v0 := r.version
	old := l.inst
	in := old.Clone()
	p := old.pieces()
	p = withOverlay(p, p.regMetadata(old), op.Metadata, r.pieceVersionLocked(op, now))
	setPieces(in, p)
	if err := r.checkMetadata(in.Metadata, in.DataCenterInfo.Metadata); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	l.lastRenewal.Store(now.UnixNano())
	in = r.writePieceLocked(l, in, OpMetadata, op.Origin, now)
	r.unlock(v0)
	return in, nil
}

// Instance returns one instance with its live lease renewal time.
func (r *Registry) Instance(app, id string) (InstanceView, bool) {
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	l := r.lookupLocked(app, id)
	if l == nil {
		return InstanceView{}, false
	}
	return InstanceView{Instance: l.inst, LastRenewalTimestamp: l.lastRenewal.Load() / int64(time.Millisecond)}, true
}

// InstanceByID returns the first instance with this id in any app, apps
// taken in name order (GET /instances/{id}).
func (r *Registry) InstanceByID(id string) (InstanceView, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var found *lease
	var foundApp string
	for app := range r.apps {
		if l := r.lookupLocked(app, id); l != nil && (found == nil || app < foundApp) {
			found, foundApp = l, app
		}
	}
	if found == nil {
		return InstanceView{}, false
	}
	return InstanceView{Instance: found.inst, LastRenewalTimestamp: found.lastRenewal.Load() / int64(time.Millisecond)}, true
}

package registry

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// lease is the registry's record of one instance.
type lease struct {
	// inst is the current immutable instance; replaced, never modified,
	// under Registry.mu.
	inst *Instance
	// lastRenewal is the last renewal in Unix nanoseconds. Heartbeats store
	// it atomically under the read lock, so renewals never wait for each
	// other.
	lastRenewal atomic.Int64
	// duration and renewsPerMin are derived from inst when it is stored.
	duration     time.Duration
	renewsPerMin float64
	// proven is set by the lease's first renewal (see selfpreservation.go):
	// until then it is not held to the renewal threshold.
	proven atomic.Bool
	// appRenewals is the app's renewal total (apprenewals.go), shared by
	// the app's leases, so a heartbeat counts it without a lookup.
	appRenewals *atomic.Uint64
}

func (l *lease) expired(now time.Time, grace time.Duration) bool {
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

// arrival records a new lease, so that self-preservation does not hold an
// instance to a full window of renewals in the window it arrived in.
type arrival struct {
	at           time.Time
	renewsPerMin float64
}

// Heartbeat carries the optional parts of a renewal request.
type Heartbeat struct {
	// LastDirtyTimestamp is the caller's lastDirtyTimestamp in ms; 0 means
	// the caller sent none and no timestamp check is made.
	LastDirtyTimestamp int64
	// OverriddenStatus is the status override a peer replicates along with a
	// heartbeat; "" or UNKNOWN means none.
	OverriddenStatus Status
	// Replicated is true when the heartbeat comes from a peer.
	Replicated bool
}

// Stats are running totals since start, for metrics.
type Stats struct {
	Registrations, Renewals, Cancels, Evictions uint64
}

// Registry is the whole registry of one node: apps, instances, leases,
// self-preservation, eviction and the delta queue. It is safe for
// concurrent use. Reads of the whole registry go through Snapshot.
type Registry struct {
	cfg  Config
	now  func() time.Time
	rand *rand.Rand
	log  zerolog.Logger

	renewals    *MeasuredRate
	appRenewals appRenewals // per-app totals for the dashboard (apprenewals.go)

	registrations, renewalCount, cancels, evictions atomic.Uint64
	limitHits                                       limitCounters // writes refused, per limit
	unproven                                        atomic.Int64  // expected renewals/min of unproven leases, in millionths

	// mu guards everything below it, up to snapMu.
	mu             sync.RWMutex
	apps           map[string]map[string]*lease // app → instance id → lease
	instances      int
	version        uint64 // bumped by every visible change
	deltaVersion   uint64 // bumped by every change of the delta's content
	deltas         deltaQueue
	expected       float64            // expected renewals per minute
	arrivals       map[*lease]arrival // new leases of the last two windows
	arrivalsPruned time.Time          // when arrivals last lost its old entries
	lastEvictionAt time.Time
	spActive       bool // self-preservation was active at the last check (for logging transitions)

	// snapMu makes concurrent readers build a new snapshot only once.
	snapMu sync.Mutex
	snap   atomic.Pointer[Snapshot]

	// hookMu is taken before mu is released and held while the hook runs,
	// so the hook sees changes in the order they were applied without being
	// called under mu.
	hookMu sync.Mutex
	hook   atomic.Pointer[func(Change)]
}

// New returns an empty registry. It starts no goroutines; call Run for the
// periodic tasks, or call the task methods yourself.
func New(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, now: cfg.Now, rand: cfg.Rand, apps: map[string]map[string]*lease{}, arrivals: map[*lease]arrival{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.rand == nil {
		r.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	r.log = cfg.Logger.With().Str("component", "registry").Logger()
	r.renewals = NewMeasuredRate(cfg.RenewalRateWindow, r.now())
	return r, nil
}

// SetChangeHook sets the function that hears about every successful
// register, renewal, cancel and status change (not evictions). It runs
// after the registry's lock is released, one call at a time, in the order
// the changes were applied; it must not block and must not call back into
// the registry's write methods. Set it before traffic starts.
func (r *Registry) SetChangeHook(hook func(Change)) {
	if hook == nil {
		r.hook.Store(nil)
		return
	}
	r.hook.Store(&hook)
}

// unlockAndNotify releases mu (held for writing) and passes ch to the hook.
func (r *Registry) unlockAndNotify(ch Change) {
	hook := r.hook.Load()
	if hook == nil {
		r.mu.Unlock()
		return
	}
	r.hookMu.Lock()
	r.mu.Unlock()
	(*hook)(ch)
	r.hookMu.Unlock()
}

// Stats returns running totals.
func (r *Registry) Stats() Stats {
	return Stats{
		Registrations: r.registrations.Load(),
		Renewals:      r.renewalCount.Load(),
		Cancels:       r.cancels.Load(),
		Evictions:     r.evictions.Load(),
	}
}

// Version returns the current content version.
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

func (r *Registry) lookupLocked(app, id string) *lease {
	return r.apps[app][id]
}

// renewsPerMin is how often an instance is expected to renew in a minute:
// 60 s over its own renewal interval, or over ExpectedRenewalInterval when it
// gives none (Eureka assumes one interval for every client).
func (r *Registry) renewsPerMin(in *Instance) float64 {
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

// bumpLocked records a visible change: a new content version and a delta
// entry for in (whose ActionType says what happened).
func (r *Registry) bumpLocked(in *Instance, now time.Time) {
	r.version++
	r.deltaVersion++
	r.deltas.push(deltaRecord{at: now, key: InstanceKey{in.App, in.ID()}, inst: in, lastRenewal: now.UnixMilli()})
}

// Register stores inst, taking ownership of it (the caller must not modify
// it afterwards). replicated says it came from a peer or from syncUp. It
// returns the instance as stored, which may be the older stored copy when
// that one has the newer lastDirtyTimestamp.
func (r *Registry) Register(inst *Instance, replicated bool) (*Instance, error) {
	return r.register(inst, replicated, false, r.now())
}

// Adopt stores a peer's copy of an instance this node holds, when the
// peer's is newer (a later lastDirtyTimestamp): the peer answered our
// replicated heartbeat with 409 and its copy (PeerEurekaNode#
// syncInstancesIfTimestampDiffers). Unlike Eureka it does nothing when the
// instance is gone here: it was cancelled meanwhile, and adopting it would
// bring it back on this node alone. The write counts as replicated. It
// reports whether the copy was taken.
func (r *Registry) Adopt(inst *Instance) (bool, error) {
	stored, err := r.register(inst, true, true, r.now())
	return stored != nil, err
}

func (r *Registry) register(in *Instance, replicated, adoptOnly bool, now time.Time) (*Instance, error) {
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
	id := in.ID()

	r.mu.Lock()
	l := r.lookupLocked(in.App, id)
	if adoptOnly && (l == nil || l.inst.LastDirtyTimestamp >= in.LastDirtyTimestamp) {
		r.mu.Unlock()
		return nil, nil
	}
	if l == nil {
		if err := r.checkCapacityLocked(in.App); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	var existing *Instance
	if l != nil {
		existing = l.inst
		// Eureka keeps the stored copy when it is strictly newer; on a tie
		// the incoming body wins (AbstractInstanceRegistry#register).
		if existing.LastDirtyTimestamp > in.LastDirtyTimestamp {
			l.lastRenewal.Store(now.UnixNano())
			r.registrations.Add(1)
			r.unlockAndNotify(Change{Action: ActionRegister, Key: InstanceKey{in.App, id}, Instance: existing, Replicated: replicated, At: now})
			return existing, nil
		}
	}

	override := StatusUnknown
	if existing != nil && existing.OverriddenStatus != StatusUnknown && existing.OverriddenStatus != "" {
		override = existing.OverriddenStatus
	} else if in.OverriddenStatus != StatusUnknown && in.OverriddenStatus != "" {
		override = in.OverriddenStatus
	}
	in.OverriddenStatus = override
	in.Status = resolveStatus(in.Status, override, existing, replicated)
	in.ActionType = ActionAdded
	in.LastUpdatedTimestamp = nowMs
	in.EvictionTimestamp = 0
	in.RegistrationTimestamp = nowMs
	in.ServiceUpTimestamp = 0
	if existing != nil {
		// Unlike Eureka (bug 23), a re-registration keeps the lease's
		// registration time.
		in.RegistrationTimestamp = existing.RegistrationTimestamp
		in.ServiceUpTimestamp = existing.ServiceUpTimestamp
	}
	if in.Status == StatusUp && in.ServiceUpTimestamp == 0 {
		in.ServiceUpTimestamp = nowMs
	}

	rate := r.renewsPerMin(in)
	if l == nil {
		l = &lease{appRenewals: r.appRenewals.counter(in.App)}
		byID := r.apps[in.App]
		if byID == nil {
			byID = map[string]*lease{}
			r.apps[in.App] = byID
		}
		byID[id] = l
		r.instances++
		r.expected += rate
		r.addArrivalLocked(l, arrival{at: now, renewsPerMin: rate})
		r.rerateUnprovenLocked(l, 0, rate)
	} else {
		r.expected += rate - l.renewsPerMin
		r.rerateArrivalLocked(l, rate)
		r.rerateUnprovenLocked(l, l.renewsPerMin, rate)
	}
	l.inst = in
	l.duration = r.leaseDuration(in)
	l.renewsPerMin = rate
	l.lastRenewal.Store(now.UnixNano())
	r.bumpLocked(in, now)
	r.registrations.Add(1)
	if existing == nil {
		r.log.Debug().Str("app", in.App).Str("instance_id", id).Bool("replicated", replicated).Msg("registered")
	}
	r.unlockAndNotify(Change{Action: ActionRegister, Key: InstanceKey{in.App, id}, Instance: in, Replicated: replicated, At: now})
	return in, nil
}

// Renew records a heartbeat. It returns the stored instance and:
//   - ErrInstanceNotFound when no such instance is registered;
//   - ErrStatusUnknown when the status rules resolve to UNKNOWN (after an
//     override was deleted): the lease is not renewed and the client must
//     register again;
//   - ErrNewerDirtyTimestamp when hb carries a newer lastDirtyTimestamp
//     than the stored one: the lease was renewed, but the caller must
//     register again with its newer data;
//   - ErrStaleDirtyTimestamp when a peer's heartbeat carries an older one:
//     the lease was renewed, and the stored instance should win.
//
// A renewal does not change the registry version. It allocates nothing.
func (r *Registry) Renew(app, id string, hb Heartbeat) (*Instance, error) {
	return r.renew(app, id, hb, r.now())
}

func (r *Registry) renew(app, id string, hb Heartbeat, now time.Time) (*Instance, error) {
	app = upperASCII(app)
	r.mu.RLock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.RUnlock()
		return nil, ErrInstanceNotFound
	}
	in := l.inst
	resolved := resolveStatus(in.Status, in.OverriddenStatus, in, hb.Replicated)
	if resolved == StatusUnknown {
		r.mu.RUnlock()
		return nil, ErrStatusUnknown
	}
	if resolved != in.Status {
		// Rare: an override and the stored status disagree. Eureka corrects
		// the status silently; here it is a visible change like any other.
		r.mu.RUnlock()
		return r.renewCorrectingStatus(app, id, hb, now)
	}
	l.lastRenewal.Store(now.UnixNano())
	r.proveLease(l)
	r.renewals.Increment(now)
	r.renewalCount.Add(1)
	l.appRenewals.Add(1)
	if hook := r.hook.Load(); hook != nil {
		ch := Change{Action: ActionHeartbeat, Key: InstanceKey{app, id}, Instance: in, Replicated: hb.Replicated, At: now}
		r.hookMu.Lock()
		r.mu.RUnlock()
		(*hook)(ch)
		r.hookMu.Unlock()
	} else {
		r.mu.RUnlock()
	}
	return r.checkDirtyTimestamp(app, id, in, hb, now)
}

func (r *Registry) renewCorrectingStatus(app, id string, hb Heartbeat, now time.Time) (*Instance, error) {
	r.mu.Lock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.Unlock()
		return nil, ErrInstanceNotFound
	}
	in := l.inst
	resolved := resolveStatus(in.Status, in.OverriddenStatus, in, hb.Replicated)
	if resolved == StatusUnknown {
		r.mu.Unlock()
		return nil, ErrStatusUnknown
	}
	if resolved != in.Status {
		in = in.Clone()
		in.Status = resolved
		r.modifyLocked(l, in, now)
	}
	l.lastRenewal.Store(now.UnixNano())
	r.proveLease(l)
	r.renewals.Increment(now)
	r.renewalCount.Add(1)
	l.appRenewals.Add(1)
	r.unlockAndNotify(Change{Action: ActionHeartbeat, Key: InstanceKey{app, id}, Instance: in, Replicated: hb.Replicated, At: now})
	return r.checkDirtyTimestamp(app, id, in, hb, now)
}

// checkDirtyTimestamp applies EUREKA.md §5.3 after a successful renewal.
func (r *Registry) checkDirtyTimestamp(app, id string, in *Instance, hb Heartbeat, now time.Time) (*Instance, error) {
	if hb.LastDirtyTimestamp == 0 || !r.cfg.SyncWhenTimestampDiffers {
		return in, nil
	}
	switch {
	case hb.LastDirtyTimestamp > in.LastDirtyTimestamp:
		if hb.Replicated && hb.OverriddenStatus != "" && hb.OverriddenStatus != StatusUnknown &&
			hb.OverriddenStatus != in.OverriddenStatus {
			in = r.storeOverride(app, id, hb.OverriddenStatus, now)
		}
		return in, ErrNewerDirtyTimestamp
	case hb.LastDirtyTimestamp < in.LastDirtyTimestamp && hb.Replicated:
		return in, ErrStaleDirtyTimestamp
	}
	return in, nil
}

// storeOverride records a status override a peer reported with a heartbeat
// (Eureka's storeOverriddenStatusIfRequired) and applies it at once. Not
// replicated: it came from a peer.
func (r *Registry) storeOverride(app, id string, override Status, now time.Time) *Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lookupLocked(app, id)
	if l == nil {
		return nil
	}
	in := l.inst.Clone()
	in.OverriddenStatus = override
	in.Status = resolveStatus(in.Status, override, l.inst, true)
	r.modifyLocked(l, in, now)
	return in
}

// Cancel removes an instance (an explicit deregistration). It returns
// ErrInstanceNotFound when there is none.
func (r *Registry) Cancel(app, id string, replicated bool) error {
	return r.cancel(app, id, replicated, r.now())
}

func (r *Registry) cancel(app, id string, replicated bool, now time.Time) error {
	app = upperASCII(app)
	r.mu.Lock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.Unlock()
		return ErrInstanceNotFound
	}
	removed := r.removeLocked(app, id, l, now)
	r.cancels.Add(1)
	r.log.Debug().Str("app", app).Str("instance_id", id).Bool("replicated", replicated).Msg("cancelled")
	r.unlockAndNotify(Change{Action: ActionCancel, Key: InstanceKey{app, id}, Instance: removed, Replicated: replicated, At: now})
	return nil
}

// removeLocked deletes a lease (cancel or eviction) and returns the DELETED
// copy of its instance that went into the delta.
func (r *Registry) removeLocked(app, id string, l *lease, now time.Time) *Instance {
	byID := r.apps[app]
	delete(byID, id)
	if len(byID) == 0 {
		delete(r.apps, app)
	}
	r.instances--
	r.rerateArrivalLocked(l, 0)
	r.rerateUnprovenLocked(l, l.renewsPerMin, 0)
	r.expected -= l.renewsPerMin
	if r.expected < 1e-9 {
		r.expected = 0
	}
	in := l.inst.Clone()
	in.ActionType = ActionDeleted
	in.LastUpdatedTimestamp = now.UnixMilli()
	in.EvictionTimestamp = now.UnixMilli()
	r.bumpLocked(in, now)
	return in
}

// lockLease takes the write lock, finds the lease and renews it at now. When
// there is none it releases the lock and returns ErrInstanceNotFound.
func (r *Registry) lockLease(app, id string, now time.Time) (*lease, error) {
	r.mu.Lock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.Unlock()
		return nil, ErrInstanceNotFound
	}
	l.lastRenewal.Store(now.UnixNano())
	return l, nil
}

// modifyLocked stores in, a changed copy of l's instance, as a visible
// MODIFIED change.
func (r *Registry) modifyLocked(l *lease, in *Instance, now time.Time) {
	in.ActionType = ActionModified
	in.LastUpdatedTimestamp = now.UnixMilli()
	l.inst = in
	r.bumpLocked(in, now)
}

// UpdateStatus sets a status override (PUT .../status?value=). The lease is
// renewed. lastDirty (ms, 0 for none) can only raise the stored
// lastDirtyTimestamp. Like Eureka it is replicated even when nothing changed.
func (r *Registry) UpdateStatus(app, id string, status Status, lastDirty int64, replicated bool) (*Instance, error) {
	return r.updateStatus(app, id, status, lastDirty, replicated, r.now())
}

func (r *Registry) updateStatus(app, id string, status Status, lastDirty int64, replicated bool, now time.Time) (*Instance, error) {
	if err := status.check(); err != nil {
		return nil, err
	}
	if err := r.checkDirtySkew(lastDirty, now); err != nil {
		return nil, err
	}
	app = upperASCII(app)
	l, err := r.lockLease(app, id, now)
	if err != nil {
		return nil, err
	}
	old := l.inst
	in := old
	if status != old.Status || status != old.OverriddenStatus || lastDirty > old.LastDirtyTimestamp {
		in = old.Clone()
		in.Status = status
		in.OverriddenStatus = status
		if status == StatusUp && in.ServiceUpTimestamp == 0 {
			in.ServiceUpTimestamp = now.UnixMilli()
		}
		in.LastDirtyTimestamp = max(in.LastDirtyTimestamp, lastDirty)
		r.modifyLocked(l, in, now)
	}
	r.unlockAndNotify(Change{Action: ActionStatusUpdate, Key: InstanceKey{app, id}, Instance: in, Replicated: replicated, At: now})
	if old.Status != status {
		r.log.Info().Str("app", app).Str("instance_id", id).Str("from", string(old.Status)).
			Str("to", string(status)).Bool("replicated", replicated).Msg("status override set")
	}
	return in, nil
}

// DeleteStatusOverride removes a status override (DELETE .../status) and
// sets the status to status (Eureka's default is UNKNOWN, which makes the
// client's next heartbeat answer 404 so that it registers again with its
// real status). The lease is renewed.
func (r *Registry) DeleteStatusOverride(app, id string, status Status, lastDirty int64, replicated bool) (*Instance, error) {
	return r.deleteStatusOverride(app, id, status, lastDirty, replicated, r.now())
}

func (r *Registry) deleteStatusOverride(app, id string, status Status, lastDirty int64, replicated bool, now time.Time) (*Instance, error) {
	if err := status.check(); err != nil {
		return nil, err
	}
	if err := r.checkDirtySkew(lastDirty, now); err != nil {
		return nil, err
	}
	app = upperASCII(app)
	l, err := r.lockLease(app, id, now)
	if err != nil {
		return nil, err
	}
	in := l.inst
	removed := in.OverriddenStatus != StatusUnknown && in.OverriddenStatus != ""
	if removed {
		in = in.Clone()
		in.OverriddenStatus = StatusUnknown
		in.Status = status
		in.LastDirtyTimestamp = max(in.LastDirtyTimestamp, lastDirty)
		r.modifyLocked(l, in, now)
	}
	r.unlockAndNotify(Change{Action: ActionDeleteStatusOverride, Key: InstanceKey{app, id}, Instance: in, Replicated: replicated, At: now})
	if removed {
		r.log.Info().Str("app", app).Str("instance_id", id).Str("status", string(status)).
			Bool("replicated", replicated).Msg("status override removed")
	}
	return in, nil
}

// UpdateMetadata adds or replaces metadata entries (PUT .../metadata). Like
// Eureka's InstanceResource#updateMetadata it is a re-registration of the
// changed instance, so peers receive it as a Register.
func (r *Registry) UpdateMetadata(app, id string, updates map[string]string) (*Instance, error) {
	now := r.now()
	app = upperASCII(app)
	r.mu.Lock()
	l := r.lookupLocked(app, id)
	if l == nil {
		r.mu.Unlock()
		return nil, ErrInstanceNotFound
	}
	in := l.inst.Clone()
	in.Metadata = in.Metadata.With(updates)
	if err := r.checkMetadata(in.Metadata, in.DataCenterInfo.Metadata); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	l.lastRenewal.Store(now.UnixNano())
	r.modifyLocked(l, in, now)
	r.unlockAndNotify(Change{Action: ActionRegister, Key: InstanceKey{app, id}, Instance: in, At: now})
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
	for app, byID := range r.apps {
		if l, ok := byID[id]; ok && (found == nil || app < foundApp) {
			found, foundApp = l, app
		}
	}
	if found == nil {
		return InstanceView{}, false
	}
	return InstanceView{Instance: found.inst, LastRenewalTimestamp: found.lastRenewal.Load() / int64(time.Millisecond)}, true
}

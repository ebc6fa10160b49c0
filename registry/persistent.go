package registry

import (
	"fmt"
	"strings"
	"time"
)

// Persistent instances do not heartbeat. A registration whose metadata
// holds LeaseMetadataKey = "persistent" (any letter case) gets a lease
// that never expires: it is never evicted, whatever self-preservation
// says, and leaves only by cancel. Its liveness comes from the server's
// health checks instead (package healthcheck probes it unless it opts
// out), and their mark turns it DOWN as any other instance's.
//
// The marker is part of the instance, so every node derives the same
// lease from the same copy (replication, syncUp, anti-entropy, the
// data-dir snapshot): the latest registration decides, a registration
// without the marker turns the lease back into an ordinary one renewed
// from then on. PUT …/metadata may not write the key: it would make a
// lease persistent past the caps and the role checks of a registration.
//
// A persistent lease expects no renewals: its share of the expected
// renewals is 0, so it counts in no renewal threshold (at registration, in
// UpdateRenewThreshold's recount, at cancel, and in OpenForTraffic's
// seed, which all add or subtract lease.renewsPerMin). Heartbeats are
// still accepted, and counted in Stats, but not in the renewal rate the
// threshold is compared with: nothing expects them there.
//
// Its tombstone lasts a maximal lease (MaxLeaseDurationSecs) plus the
// grace, then the hold: an ordinary stale copy elsewhere expires within
// its lease, a persistent one never does, so the cancel must outlive the
// longest partition the hold covers (TombstoneMaxAge).
//
// Caps (Limits.MaxPersistentPerApp, MaxPersistentPerUser) bound client
// registrations of new persistent instances; copies from peers pass,
// unlike the other limits: the node that accepted the registration
// enforced the caps, and a peer's count may lag behind it. The owner is the user that registered the
// instance through this node (Op.Owner; "" for anonymous), known to this
// node only: the per-user cap counts what a user registered through this
// node.

// LeaseMetadataKey is the instance metadata entry that makes its lease
// persistent (value LeasePersistent).
const LeaseMetadataKey = "muster.lease"

// LeasePersistent is the one value LeaseMetadataKey takes.
const LeasePersistent = "persistent"

// IsPersistent reports whether in's metadata asks for a persistent lease.
// A value other than LeasePersistent is refused by Validate, so it is
// false here.
func IsPersistent(in *Instance) bool {
	v, ok := in.Metadata.Get(LeaseMetadataKey)
	return ok && strings.EqualFold(strings.TrimSpace(v), LeasePersistent)
}

// checkLeaseMarker refuses a marker with any other value: a typo would
// otherwise register an ordinary lease, evicted 90 s after its instance
// stops heartbeating, which it never started doing.
func checkLeaseMarker(md Metadata) error {
	v, ok := md.Get(LeaseMetadataKey)
	if !ok || strings.EqualFold(strings.TrimSpace(v), LeasePersistent) {
		return nil
	}
	return invalid(fmt.Sprintf("metadata %s is %s: the only value is %q (leave the key out for an ordinary lease)",
		LeaseMetadataKey, QuotePrefix(v), LeasePersistent))
}

// ErrPersistentFull: a cap on persistent instances is reached (403, as a
// full app).
var ErrPersistentFull = fmt.Errorf("%w: persistent instances at capacity", ErrLimitExceeded)

// persistentCounts are the persistent leases by app, and those
// registered through this node by owner. Guarded by Registry.mu.
type persistentCounts struct {
	byApp   map[string]int
	total   int
	owners  map[InstanceKey]string // key → the user that registered it here
	byOwner map[string]int
}

func newPersistentCounts() persistentCounts {
	return persistentCounts{byApp: map[string]int{}, owners: map[InstanceKey]string{}, byOwner: map[string]int{}}
}

// add counts (sign 1) or uncounts (−1) a persistent lease of app.
func (p *persistentCounts) add(app string, sign int) {
	p.total += sign
	if n := p.byApp[app] + sign; n > 0 {
		p.byApp[app] = n
	} else {
		delete(p.byApp, app)
	}
}

// setOwner makes owner the owner of key (a persistent lease registered
// here), moving it from its previous owner.
func (p *persistentCounts) setOwner(key InstanceKey, owner string) {
	if old, ok := p.owners[key]; ok {
		if old == owner {
			return
		}
		p.dropOwner(key)
	}
	p.owners[key] = owner
	p.byOwner[owner]++
}

// dropOwner forgets key's owner, if it has one here.
func (p *persistentCounts) dropOwner(key InstanceKey) {
	old, ok := p.owners[key]
	if !ok {
		return
	}
	delete(p.owners, key)
	if n := p.byOwner[old] - 1; n > 0 {
		p.byOwner[old] = n
	} else {
		delete(p.byOwner, old)
	}
}

// checkPersistentLocked refuses a client's registration of a persistent
// instance at key beyond the caps. l is the stored lease, nil for a new
// instance. A
// registration of a lease that is persistent already does not count again
// for its app, nor for its owner if the same user registers it.
func (r *Registry) checkPersistentLocked(op Op, key InstanceKey, l *lease) error {
	if op.Origin != OriginClient {
		return nil
	}
	lim := r.cfg.Limits
	if l == nil || !l.persistent {
		if n := r.persistent.byApp[key.App]; n >= lim.MaxPersistentPerApp {
			return r.refuse(LimitPersistentPerApp, ErrPersistentFull, "app %s holds %d persistent instances", QuotePrefix(key.App), n)
		}
	}
	if owner, ok := r.persistent.owners[key]; !ok || owner != op.Owner {
		if n := r.persistent.byOwner[op.Owner]; n >= lim.MaxPersistentPerUser {
			who := "anonymous clients"
			if op.Owner != "" {
				who = "user " + QuotePrefix(op.Owner)
			}
			return r.refuse(LimitPersistentPerUser, ErrPersistentFull, "%s registered %d persistent instances through this node", who, n)
		}
	}
	return nil
}

// notePersistentLocked follows a lease's persistence and owner when in is
// stored on l (was: whether l was persistent before; false for a new
// lease). A client's registration makes its user the owner; a newer
// registration from elsewhere (another node accepted it) takes the
// ownership away from this node.
func (r *Registry) notePersistentLocked(l *lease, in *Instance, op Op, key InstanceKey, was, reregistered bool) {
	persistent := IsPersistent(in)
	l.persistent = persistent
	switch {
	case persistent && !was:
		r.persistent.add(key.App, 1)
	case !persistent && was:
		r.persistent.add(key.App, -1)
	}
	switch {
	case !persistent:
		r.persistent.dropOwner(key)
	case op.Origin == OriginClient:
		r.persistent.setOwner(key, op.Owner)
	case reregistered:
		// Its client registered it through another node since: this node
		// no longer vouches for it (ClientLive), nor counts it for a user.
		r.persistent.dropOwner(key)
		l.clientSeen.Store(0)
	}
}

// forgetPersistentLocked uncounts l when it leaves the registry.
func (r *Registry) forgetPersistentLocked(l *lease) {
	if !l.persistent {
		return
	}
	r.persistent.add(l.app.name, -1)
	r.persistent.dropOwner(l.keyOf())
}

// tombstoneLease is how long l's cancel is remembered before the grace
// and the hold: its lease, or a maximal lease for a persistent one.
func (r *Registry) tombstoneLease(l *lease) time.Duration {
	if l.persistent {
		return time.Duration(MaxLeaseDurationSecs) * time.Second
	}
	return r.leaseDuration(l.inst)
}

// PersistentCount returns the persistent instances this node holds.
func (r *Registry) PersistentCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.persistent.total
}

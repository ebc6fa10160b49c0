package registry

import "time"

// noteClientLocked records that a client registered or renewed l through
// this node.
func (r *Registry) noteClientLocked(l *lease, op Op, now time.Time) {
	if op.Origin == OriginClient {
		l.clientSeen.Store(now.UnixNano())
	}
}

// ClientLive returns the instances whose clients registered or renewed
// them through this node within the last two of their renewal intervals:
// the instances this node vouches for. A peer's replication catch-up
// replays heartbeats for these and for nothing else. Replaying every live
// lease instead would resurrect on every peer an instance that was
// cancelled elsewhere while this node was cut off: its stale copy here is
// still inside its lease, the peer answers the heartbeat 404, and Eureka's
// repair dialogue registers it again. An instance whose client talks to
// this node is replayed the same way by its next heartbeat anyway; the
// catch-up only brings that forward.
func (r *Registry) ClientLive() []*Instance {
	now := r.now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*Instance
	for _, a := range r.apps {
		for _, l := range a.leases {
			if r.clientLiveLocked(l, now) {
				out = append(out, l.inst)
			}
		}
	}
	return out
}

// IsClientLive tells whether the instance is one ClientLive returns: its
// client registered or renewed it through this node within the last two
// of its renewal intervals (the console shows it as "this node").
func (r *Registry) IsClientLive(app, id string) bool {
	now := r.now()
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	l := r.lookupLocked(app, id)
	return l != nil && r.clientLiveLocked(l, now)
}

func (r *Registry) clientLiveLocked(l *lease, now time.Time) bool {
	seen := l.clientSeen.Load()
	if seen == 0 {
		return false
	}
	if l.persistent {
		// Its client need not renew: the registration through this node
		// is what vouches for it, until a newer one elsewhere
		// (notePersistentLocked).
		return true
	}
	interval := r.cfg.ExpectedRenewalInterval
	if l.inst.RenewalIntervalSecs > 0 {
		interval = time.Duration(l.inst.RenewalIntervalSecs) * time.Second
	}
	return now.Sub(time.Unix(0, seen)) <= 2*interval
}

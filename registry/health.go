package registry

import "time"

// The health checks' status (package healthcheck) is a third kind of
// status beside the client's and the operator's override: server-owned,
// set and lifted only by the node that probes the instance, and replicated
// like any other write. Precedence, computed in one place (applyHealth):
//
//  1. an override in force (OUT_OF_SERVICE, UP, …) wins: the operator's
//     word stands over the probe's;
//  2. else a mark turns a UP status into DOWN (Hides is set);
//  3. else the client's status (STARTING, DOWN, UNKNOWN …) stands: a mark
//     never hides a status that is not UP, so UNKNOWN keeps sending the
//     client back to register and STARTING stays STARTING.
//
// Instance.Status always holds the result, so every reader (payloads,
// deltas, VIP lookups, DNS, watches, the hashcode) sees DOWN without
// knowing about health checks. ClientStatus undoes rule 2.

// HealthMark is the server-owned mark of an instance that fails its health
// checks. Stored marks are immutable, like the instances that hold them.
type HealthMark struct {
	// Reason is the failing probe's result, e.g. "http 503" or
	// "connect: connection refused".
	Reason string
	// Since is when the instance was marked (ms since epoch).
	Since int64
	// By is the name of the node that marked it.
	By string
	// Hides is true while the mark turns the instance's UP into DOWN.
	Hides bool
}

// applyHealth sets in.Status to the effective status (the rules above). On
// entry in.Status is what the client's status and the override rules
// resolved; in.Health is replaced by a copy when it changes.
func applyHealth(in *Instance) {
	h := in.Health
	if h == nil {
		return
	}
	noOverride := in.OverriddenStatus == "" || in.OverriddenStatus == StatusUnknown
	hides := in.Status == StatusUp && noOverride
	if hides != h.Hides {
		c := *h
		c.Hides = hides
		in.Health = &c
	}
	if hides {
		in.Status = StatusDown
	}
}

// ClientStatus is the status in would have without the health checks' and
// the drain's marks: the client's status or the override in force.
func (in *Instance) ClientStatus() Status {
	if p := in.Pieces; p != nil && p.drainHid != "" {
		return p.drainHid
	}
	if in.Health != nil && in.Health.Hides {
		return StatusUp
	}
	return in.Status
}

func sameHealth(a, b *HealthMark) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Reason == b.Reason && a.Since == b.Since && a.By == b.By
}

// setHealth applies a HealthOp: it sets, replaces or lifts the mark of the
// instance and recomputes its status. Unlike the status writes it does not
// renew the lease: a probe is not a sign of life from the client. A write
// that changes nothing is not a change (the prober calls it only when its
// verdict differs from the stored mark).
func (r *Registry) setHealth(op Op, now time.Time) (*Instance, error) {
	if op.Origin != OriginHealthCheck {
		return nil, ErrInvalidOp
	}
	app := upperASCII(op.App)
	l, v0, err := r.lockInstance(app, op.ID)
	if err != nil {
		return nil, err
	}
	old := l.inst
	if sameHealth(old.Health, op.Health) {
		r.mu.Unlock()
		return old, nil
	}
	in := old.Clone()
	p := old.pieces()
	p.HealthVersion = r.clock.next(now)
	in.Health = nil
	if op.Health != nil {
		mark := *op.Health
		mark.Hides = false
		in.Health = &mark
	}
	setPieces(in, p)
	in = r.modifyLocked(l, in, OpHealth, op.Origin, now)
	r.unlock(v0)
	r.log.Info().Str(logApp, app).Str(logInstanceID, op.ID).Str(logFrom, string(old.Status)).
		Str(logTo, string(in.Status)).Bool(logHealthMarked, in.Health != nil).Msg("health-check status set")
	return in, nil
}

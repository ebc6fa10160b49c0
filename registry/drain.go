package registry

import "time"

// The drain mark (POST /admin/drain/{app}/{id}) is a fourth writer of an
// instance's status, server-owned like the health mark: an operator asks
// a node to take an instance out of the traffic before it stops, and every
// node then serves it OUT_OF_SERVICE. Precedence (resolvePieces):
//
//  1. an override in force wins: the operator's explicit word on the
//     status stands over the drain;
//  2. else a drain serves OUT_OF_SERVICE, whatever the client says;
//  3. else the health mark (health.go) may turn UP into DOWN.
//
// The mark is a piece of its own (Pieces.DrainedAt, DrainVersion), so a
// later undrain wins over an earlier drain on every node after any
// partition, and it ends with its incarnation: a cancel drops it like the
// override (setPieces), and an undrain writes "not drained" at a newer
// version. Eureka clients see only the status.

// DrainMark is an instance's drain as a reader of the registry sees it.
type DrainMark struct {
	// At is when the drain was asked for (ms since epoch): the receipt's
	// drainedAt. Re-draining a drained instance keeps it.
	At int64
	// By is the name of the node that accepted the drain.
	By string
	// Seq is the registry version (Snapshot.Version) at which this node
	// applied the mark: a read served at a version not below it has the
	// instance as OUT_OF_SERVICE. Node-local: another node applies the
	// same mark at a version of its own.
	Seq uint64
}

// drainHides reports whether p's drain decides the status: drained and
// no override in force.
func (p *Pieces) drainHides() bool {
	return p.DrainedAt != 0 && !p.overrideSet()
}

// Drain returns the drain mark of in, false when it is not drained. Seq is
// not known from an instance alone (Registry.Drain has it).
func (in *Instance) Drain() (DrainMark, bool) {
	if in.Pieces == nil || in.Pieces.DrainedAt == 0 {
		return DrainMark{}, false
	}
	return DrainMark{At: in.Pieces.DrainedAt, By: in.Pieces.DrainedBy}, true
}

// DrainOp drains app/id (at ms since epoch, by the node name) or, with at
// 0, undrains it. It is an operator's write: sent on to peers.
func DrainOp(app, id string, at int64, by string) Op {
	return Op{Kind: OpDrain, App: app, ID: id, DrainedAt: at, DrainedBy: by}
}

// setDrain applies a DrainOp. Like the health mark it does not renew the
// lease. Draining a drained instance keeps the first drain's time and
// node (what makes a repeated POST idempotent) but is still a new version
// of the piece, like an override that changes nothing: it is the
// operator's latest word, and must win over an undrain made earlier on
// the other side of a partition. Undraining an instance that is not
// drained writes nothing (the API answers 404: nothing was undone).
func (r *Registry) setDrain(op Op, now time.Time) (*Instance, error) {
	if op.Origin != OriginClient || op.DrainedAt < 0 {
		return nil, ErrInvalidOp
	}
	app := upperASCII(op.App)
	l, v0, err := r.lockInstance(app, op.ID)
	if err != nil {
		return nil, err
	}
	old := l.inst
	p := old.pieces()
	if p.DrainedAt == 0 && op.DrainedAt == 0 {
		r.mu.Unlock()
		return old, nil
	}
	in := old.Clone()
	p.DrainVersion = r.clock.next(now)
	switch {
	case op.DrainedAt == 0:
		p.DrainedAt, p.DrainedBy = 0, ""
	case p.DrainedAt == 0:
		p.DrainedAt, p.DrainedBy = op.DrainedAt, op.DrainedBy
	}
	setPieces(in, p)
	in = r.writePieceLocked(l, in, OpDrain, op.Origin, now)
	r.unlock(v0)
	if old.Status != in.Status || (old.Pieces == nil || old.Pieces.DrainedAt == 0) != (op.DrainedAt == 0) {
		r.log.Info().Str(logApp, app).Str(logInstanceID, op.ID).Str(logFrom, string(old.Status)).
			Str(logTo, string(in.Status)).Bool(logDrained, op.DrainedAt != 0).Msg("drain set")
	}
	return in, nil
}

// drainApplied is when this node applied a drain: the drain (its time and
// node: a re-drain, a newer version of the same drain, is not a new one)
// and the registry version (Seq) of the event that made it visible.
type drainApplied struct {
	at  int64
	by  string
	seq uint64
}

// noteDrainLocked keeps r.drains up to date as in is stored as l's
// instance, just before the event that makes it visible: a drain new here
// (or newer than the one held) is applied at the next Seq.
func (r *Registry) noteDrainLocked(l *lease, in *Instance) {
	p := in.Pieces
	if p == nil || p.DrainedAt == 0 {
		if len(r.drains) > 0 {
			delete(r.drains, l)
		}
		return
	}
	if a, ok := r.drains[l]; ok && a.at == p.DrainedAt && a.by == p.DrainedBy {
		return
	}
	if r.drains == nil {
		r.drains = map[*lease]drainApplied{}
	}
	r.drains[l] = drainApplied{at: p.DrainedAt, by: p.DrainedBy, seq: r.version + 1}
}

// Drain returns the drain mark of app/id with the version at which this
// node applied it; false when the instance is unknown or not drained.
func (r *Registry) Drain(app, id string) (DrainMark, *Instance, bool) {
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	l := r.lookupLocked(app, id)
	if l == nil {
		return DrainMark{}, nil, false
	}
	m, ok := l.inst.Drain()
	m.Seq = r.drains[l].seq
	return m, l.inst, ok
}

// DrainedInstance is one drained instance (Registry.Drained).
type DrainedInstance struct {
	Key  InstanceKey
	Mark DrainMark
}

// Drained lists the drained instances, in no particular order.
func (r *Registry) Drained() []DrainedInstance {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]DrainedInstance, 0, len(r.drains))
	for l, a := range r.drains {
		if m, ok := l.inst.Drain(); ok {
			m.Seq = a.seq
			out = append(out, DrainedInstance{Key: l.keyOf(), Mark: m})
		}
	}
	return out
}

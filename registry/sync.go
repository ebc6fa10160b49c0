package registry

// syncState is what the registry keeps while a syncUp copy from a peer is
// being applied (BeginSync … EndSync). Peers replicate to a node while it
// copies, and the copy was taken before some of those writes, so:
//   - a cancel (from a client or a peer) leaves a tombstone, and a copied
//     register of that key is skipped: the copy must not bring back what
//     was cancelled meanwhile;
//   - a peer's status write is noted and applied again after the copy,
//     because it may have found nothing to change (the instance was not
//     copied yet) or been overwritten by the older copy.
//
// The check and the write happen under Registry.mu in Apply, so a cancel
// cannot slip between them.
type syncState struct {
	tombstones map[InstanceKey]struct{}
	replays    []Op
}

// skipLocked reports whether a copied register must be dropped because
// the instance was cancelled during the copy.
func (s *syncState) skipLocked(op Op, key InstanceKey) bool {
	if op.Origin != OriginSync {
		return false
	}
	_, gone := s.tombstones[key]
	return gone
}

// copiedLocked notes a register. A register from anywhere but the copy
// (a client or peer registering again) lifts a tombstone: the instance is
// back for real.
func (s *syncState) copiedLocked(op Op, key InstanceKey) {
	if op.Origin != OriginSync {
		delete(s.tombstones, key)
	}
}

func (s *syncState) cancelledLocked(key InstanceKey) {
	s.tombstones[key] = struct{}{}
}

// noteLocked keeps a peer's status write for replay after the copy.
func (s *syncState) noteLocked(op Op, key InstanceKey) {
	if op.Origin != OriginPeer || (op.Kind != OpStatus && op.Kind != OpDeleteOverride) {
		return
	}
	op.App, op.ID = key.App, key.ID
	s.replays = append(s.replays, op)
}

// BeginSync starts applying a syncUp copy: from now until EndSync, cancels
// leave tombstones that copied registers (Origin OriginSync) respect, and
// peers' status writes are kept for replay. Calling it again starts over
// (a new attempt from another peer).
func (r *Registry) BeginSync() {
	r.mu.Lock()
	r.sync = &syncState{tombstones: map[InstanceKey]struct{}{}}
	r.mu.Unlock()
}

// EndSync ends the copy: the peers' status writes seen during it are
// applied again, in order (one that already applied changes nothing), and
// the tombstones are dropped. It returns how many writes were replayed.
func (r *Registry) EndSync() int {
	r.mu.Lock()
	s := r.sync
	r.sync = nil
	r.mu.Unlock()
	if s == nil {
		return 0
	}
	now := r.now()
	for _, op := range s.replays {
		_, _ = r.apply(op, now)
	}
	return len(s.replays)
}

// Syncing reports whether a syncUp copy is being applied.
func (r *Registry) Syncing() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sync != nil
}

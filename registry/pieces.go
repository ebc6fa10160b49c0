package registry

import (
	"cmp"
	"slices"
	"strings"
)

// An instance is written by several writers, each owning a piece of it:
//
//	piece          written by                          its version
//	registration   the client (register)               Instance.WriteVersion
//	override       the operator (PUT / DELETE status)  Pieces.OverrideVersion
//	metadata keys  PUT …/metadata (per key)            MetaWrite.Version
//	health mark    the node that probes it             Pieces.HealthVersion
//	drain mark     the operator (POST /admin/drain)    Pieces.DrainVersion
//	lease          renewals (only move forward)        —
//	cancel         whoever cancels                     the tombstone's version
//
// Every write a node accepts stamps its piece with the next version of the
// node's hybrid logical clock (hlc.go), even a write that changes nothing
// there: it is still the operator's or the client's latest word. Where two
// copies of an instance meet (replication, a 409 answer, syncUp,
// anti-entropy) they are merged piece by piece, the higher version of each
// piece winning (mergeCopies). The merge is commutative, associative and
// idempotent, so every node ends with the same copy whatever order the
// copies reach it in, and the last acknowledged write of each piece wins
// after any partition. What clients read (Status, OverriddenStatus,
// Metadata) is derived from the pieces by resolvePieces, with Eureka's
// status rules reading the versions for "which came last".
//
// The registration's version is also the instance's existence: a cancel's
// tombstone beats every copy whose registration is not newer, whatever its
// other pieces say, and a registration newer than the cancel brings the
// instance back (the client registered again).

// Pieces is what the piece-wise merge needs beyond what clients see. An
// instance that only ever had a registration has none (nil): its Status is
// the client's and it has no override, overlay or mark. Immutable once
// stored, like the instance.
type Pieces struct {
	// RegStatus is the status of the client's last registration, after
	// Eureka's rules at the node that accepted it but without the override.
	RegStatus Status
	// Override is the override piece: the override in force, or UNKNOWN
	// once removed (or never set).
	Override Status
	// OverrideValue is, for a removal that found an override in force, the
	// status the removal gave the instance (DELETE …/status?value=,
	// default UNKNOWN); "" otherwise.
	OverrideValue Status
	// OverrideVersion is the version of the override piece's last write; 0
	// for none, or a write from a peer without versions (a Java server).
	OverrideVersion uint64
	// HealthVersion is the version of the last health mark set or lifted.
	HealthVersion uint64
	// DrainedAt is when the instance was drained (ms since epoch; drain.go),
	// 0 when it is not (never drained, or undrained since); DrainedBy is
	// the node that accepted the drain. DrainVersion is the version of the
	// last drain or undrain.
	DrainedAt    int64
	DrainedBy    string
	DrainVersion uint64
	// drainHid is, while the drain decides the status, the status the
	// instance would have without it (ClientStatus). Derived by
	// resolvePieces, never sent.
	drainHid Status
	// RegMetadata is the registration's own metadata, while Overlay is not
	// empty (Instance.Metadata is then both together).
	RegMetadata Metadata
	// Overlay is the metadata writes (PUT …/metadata) newer than the
	// registration, by key. A registration replaces all metadata, as on a
	// single Eureka server, so entries not newer than it are dropped.
	Overlay []MetaWrite
	// Since is the version of the latest cancel of this instance that its
	// registration came after: the instance was registered again since.
	// Pieces older than it belong to the cancelled incarnation and are
	// dropped (a cancel removes the override too, as Eureka's does), even
	// where a copy written before the cancel still holds them.
	Since uint64
}

// MetaWrite is one metadata key written by PUT …/metadata, with its version.
type MetaWrite struct {
	Key, Value string
	Version    uint64
}

// pieces returns in's pieces; for an instance without any, those of a
// bare registration (a stored one), or of a copy whose override and mark
// came without versions (from a node that sends no pieces).
func (in *Instance) pieces() Pieces {
	if in.Pieces != nil {
		return *in.Pieces
	}
	p := Pieces{RegStatus: in.ClientStatus(), Override: StatusUnknown}
	if in.OverriddenStatus != "" && in.OverriddenStatus != StatusUnknown {
		p.Override = in.OverriddenStatus
	}
	return p
}

// regMetadata is the registration's own metadata.
func (p *Pieces) regMetadata(in *Instance) Metadata {
	if len(p.Overlay) > 0 {
		return p.RegMetadata
	}
	return in.Metadata
}

// overrideSet reports whether an override is in force.
func (p *Pieces) overrideSet() bool {
	return p.Override != "" && p.Override != StatusUnknown
}

// maxVersion is the highest version of any piece.
func (p *Pieces) maxVersion() uint64 {
	v := max(p.OverrideVersion, p.HealthVersion, p.DrainVersion)
	for _, w := range p.Overlay {
		v = max(v, w.Version)
	}
	return v
}

// CopyVersion is the highest version of any piece of in: two copies with
// different CopyVersions differ in at least one piece. A heartbeat between
// Muster peers carries it, so a peer whose copy lacks a newer piece asks
// for the other's copy (404) or gets it (409).
func (in *Instance) CopyVersion() uint64 {
	if in.Pieces == nil {
		return in.WriteVersion
	}
	return max(in.WriteVersion, in.Pieces.maxVersion())
}

// setPieces stores p in in (nil when p says no more than a bare
// registration) and derives what clients see from it.
func setPieces(in *Instance, p Pieces) {
	if p.Since != 0 {
		// The cancelled incarnation's pieces go with it.
		if p.OverrideVersion < p.Since {
			p.Override, p.OverrideValue, p.OverrideVersion = StatusUnknown, "", 0
		}
		if p.HealthVersion < p.Since {
			p.HealthVersion, in.Health = 0, nil
		}
		if p.DrainVersion < p.Since {
			p.DrainedAt, p.DrainedBy, p.DrainVersion = 0, "", 0
		}
	}
	// A new slice (p may share its overlay with a stored instance), sorted
	// by key, one entry a key.
	p.Overlay = slices.DeleteFunc(mergeOverlay(p.Overlay, nil), func(w MetaWrite) bool {
		return w.Version <= in.WriteVersion || w.Version < p.Since
	})
	if len(p.Overlay) == 0 {
		p.Overlay = nil
	}
	if len(p.Overlay) == 0 {
		p.RegMetadata = nil
	}
	if p.Override == "" {
		p.Override = StatusUnknown
	}
	if !p.overrideSet() && p.OverrideValue == "" && p.OverrideVersion == 0 && p.HealthVersion == 0 &&
		p.DrainVersion == 0 && len(p.Overlay) == 0 && in.Health == nil && p.Since == 0 {
		in.Pieces = nil
		in.Status = p.RegStatus
		in.OverriddenStatus = StatusUnknown
		return
	}
	in.Pieces = &p
	resolvePieces(in)
}

// resolvePieces sets what readers see — Status, OverriddenStatus and
// Metadata — from in's pieces, with Eureka's status rules:
//   - an override in force decides the status, unless the client's
//     registration is newer and says DOWN, STARTING or UNKNOWN
//     (DownOrStartingRule applied to the later write);
//   - a removal newer than the registration leaves the status it set;
//   - otherwise the registration's status stands;
//
// then a drain serves OUT_OF_SERVICE (drain.go), and the health mark may
// turn a UP into DOWN (applyHealth). Versions of
// 0 (writes relayed by a Java server) count as newest among themselves.
func resolvePieces(in *Instance) {
	p := in.Pieces
	if p == nil {
		in.OverriddenStatus = StatusUnknown
		return
	}
	s := p.RegStatus
	laterThanReg := p.OverrideVersion >= in.WriteVersion
	if p.overrideSet() {
		if laterThanReg || s == StatusUp || s == StatusOutOfService {
			s = p.Override
		}
		in.OverriddenStatus = p.Override
	} else {
		if p.OverrideValue != "" && laterThanReg {
			s = p.OverrideValue
		}
		in.OverriddenStatus = StatusUnknown
	}
	p.drainHid = ""
	if p.drainHides() {
		p.drainHid, s = s, StatusOutOfService
	}
	in.Status = s
	if len(p.Overlay) > 0 {
		md := make(map[string]string, len(p.RegMetadata)+len(p.Overlay))
		for _, kv := range p.RegMetadata {
			md[kv.Key] = kv.Value
		}
		for _, w := range p.Overlay {
			md[w.Key] = w.Value
		}
		in.Metadata = NewMetadata(md)
	}
	applyHealth(in)
}

// baseStatus is the status in has apart from an override in force: the
// removal's status when a removal came after the registration, else the
// registration's. Eureka's LeaseExistsRule reads it when the client
// registers again.
func baseStatus(in *Instance) Status {
	p := in.pieces()
	if !p.overrideSet() && p.OverrideValue != "" && p.OverrideVersion >= in.WriteVersion {
		return p.OverrideValue
	}
	return p.RegStatus
}

// withOverlay returns p with the metadata writes of updates at version v
// added to its overlay; reg is the registration's own metadata.
func withOverlay(p Pieces, reg Metadata, updates map[string]string, v uint64) Pieces {
	if len(p.Overlay) == 0 {
		p.RegMetadata = reg
	}
	writes := make([]MetaWrite, 0, len(updates))
	for k, val := range updates {
		writes = append(writes, MetaWrite{Key: k, Value: val, Version: v})
	}
	p.Overlay = mergeOverlay(p.Overlay, writes)
	return p
}

// mergeOverlay is the union of two overlays by key, the higher version (on
// a tie the greater value) winning; the result is sorted by key and shares
// nothing with a or b.
func mergeOverlay(a, b []MetaWrite) []MetaWrite {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make([]MetaWrite, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.SortFunc(out, func(x, y MetaWrite) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		// The winner first: higher version, then greater value.
		if c := cmp.Compare(y.Version, x.Version); c != 0 {
			return c
		}
		return strings.Compare(y.Value, x.Value)
	})
	return slices.CompactFunc(out, func(x, y MetaWrite) bool { return x.Key == y.Key })
}

// mergeCopies merges a versioned copy in into the stored ex, piece by
// piece (the higher version of each wins; a tie goes to the greater
// content, so every node picks the same). It returns the merged instance
// (a new one; lease stamps are the caller's) and whether in's registration
// replaced ex's: a registration of its own, which readers see as ADDED.
func mergeCopies(ex, in *Instance) (merged *Instance, reregistered bool) {
	pe, pi := ex.pieces(), in.pieces()
	regWon := in.WriteVersion > ex.WriteVersion ||
		in.WriteVersion == ex.WriteVersion && regDigest(in, &pi) > regDigest(ex, &pe)
	var p Pieces
	if regWon {
		merged = in.Clone()
		p.RegStatus, p.RegMetadata = pi.RegStatus, pi.regMetadata(in)
	} else {
		merged = ex.Clone()
		p.RegStatus, p.RegMetadata = pe.RegStatus, pe.regMetadata(ex)
	}
	merged.LastDirtyTimestamp = max(ex.LastDirtyTimestamp, in.LastDirtyTimestamp)

	o := pe
	if overrideBeats(&pi, &pe) {
		o = pi
	}
	p.Override, p.OverrideValue, p.OverrideVersion = o.Override, o.OverrideValue, o.OverrideVersion

	merged.Health, p.HealthVersion = ex.Health, pe.HealthVersion
	if pi.HealthVersion > pe.HealthVersion ||
		pi.HealthVersion == pe.HealthVersion && healthDigest(in.Health) > healthDigest(ex.Health) {
		merged.Health, p.HealthVersion = in.Health, pi.HealthVersion
	}
	if merged.Health != nil {
		c := *merged.Health
		c.Hides = false // applyHealth decides it again for the merged status
		merged.Health = &c
	}

	d := pe
	if drainBeats(&pi, &pe) {
		d = pi
	}
	p.DrainedAt, p.DrainedBy, p.DrainVersion = d.DrainedAt, d.DrainedBy, d.DrainVersion

	p.Overlay = mergeOverlay(pe.Overlay, pi.Overlay)
	p.Since = max(pe.Since, pi.Since)
	merged.Pieces = nil
	merged.Status = p.RegStatus
	setPieces(merged, p)
	return merged, regWon && in.WriteVersion != ex.WriteVersion
}

// overrideBeats reports whether a's override piece beats b's.
func overrideBeats(a, b *Pieces) bool {
	if a.OverrideVersion != b.OverrideVersion {
		return a.OverrideVersion > b.OverrideVersion
	}
	if c := strings.Compare(string(a.Override), string(b.Override)); c != 0 {
		return c > 0
	}
	return a.OverrideValue > b.OverrideValue
}

// drainBeats reports whether a's drain piece beats b's: the newer
// version, on a tie the later drain, then the greater node name.
func drainBeats(a, b *Pieces) bool {
	if a.DrainVersion != b.DrainVersion {
		return a.DrainVersion > b.DrainVersion
	}
	if a.DrainedAt != b.DrainedAt {
		return a.DrainedAt > b.DrainedAt
	}
	return a.DrainedBy > b.DrainedBy
}

// regDigest is the digest of in's registration alone, for ties between
// two registrations with one version (made on two nodes in the same
// clock tick).
func regDigest(in *Instance, p *Pieces) uint64 {
	c := in.Clone()
	c.Status, c.Metadata = p.RegStatus, p.regMetadata(in)
	c.OverriddenStatus, c.Health, c.Pieces, c.LastDirtyTimestamp = StatusUnknown, nil, nil, 0
	return InstanceDigest(c)
}

func healthDigest(h *HealthMark) uint64 {
	if h == nil {
		return 0
	}
	d := digester(fnvOffset)
	d.str(h.Reason)
	d.u64(uint64(h.Since))
	d.str(h.By)
	return uint64(d)
}

// laterThan is what of p was written after a cancel at version v: the
// override piece and metadata writes newer than it (a mark is probed
// again), nil when nothing is. They wait in the cancel's tombstone for a
// registration newer than the cancel, whose instance they belong to: a
// write made after the cancel is not undone by it.
func laterThan(p *Pieces, v uint64) *Pieces {
	if p == nil {
		return nil
	}
	var out Pieces
	out.Override = StatusUnknown
	if p.OverrideVersion > v {
		out.Override, out.OverrideValue, out.OverrideVersion = p.Override, p.OverrideValue, p.OverrideVersion
	}
	for _, w := range p.Overlay {
		if w.Version > v {
			out.Overlay = append(out.Overlay, w)
		}
	}
	if out.OverrideVersion == 0 && len(out.Overlay) == 0 {
		return nil
	}
	return &out
}

// mergeLater merges two sets of pieces kept in a tombstone.
func mergeLater(a, b Pieces) Pieces {
	out := a
	if overrideBeats(&b, &a) {
		out.Override, out.OverrideValue, out.OverrideVersion = b.Override, b.OverrideValue, b.OverrideVersion
	}
	if drainBeats(&b, &a) {
		out.DrainedAt, out.DrainedBy, out.DrainVersion = b.DrainedAt, b.DrainedBy, b.DrainVersion
	}
	out.Overlay = mergeOverlay(a.Overlay, b.Overlay)
	return out
}

// withLater is p, the pieces of a registration made after a cancel at
// version since, with the pieces written after that cancel (a tombstone's
// later) merged in.
func withLater(p Pieces, reg Metadata, later *Pieces, since uint64) Pieces {
	p.Since = max(p.Since, since)
	if later == nil {
		return p
	}
	if overrideBeats(later, &p) {
		p.Override, p.OverrideValue, p.OverrideVersion = later.Override, later.OverrideValue, later.OverrideVersion
	}
	if drainBeats(later, &p) { // a tombstone's later has none; an eviction's leftover may
		p.DrainedAt, p.DrainedBy, p.DrainVersion = later.DrainedAt, later.DrainedBy, later.DrainVersion
	}
	if len(later.Overlay) > 0 {
		if len(p.Overlay) == 0 {
			p.RegMetadata = reg
		}
		p.Overlay = mergeOverlay(p.Overlay, later.Overlay)
	}
	return p
}

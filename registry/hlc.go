package registry

import "time"

// hlc is the registry's hybrid logical clock: every write accepted from a
// client gets next(), and every versioned copy arriving from a peer is
// observed, so a write made after seeing another always gets a larger
// version, whatever the two nodes' clocks say. A version is
//
//	Unix ms of the registry's clock << 16 | 16-bit counter
//
// The physical part keeps versions of writes made on different nodes in
// real-time order when they are further apart than the clocks' skew; the
// counter orders writes within one millisecond, and writes after a copy
// from a node whose clock runs ahead (its version is observed, and the
// counter counts on from it until the local clock catches up). A counter
// that overflows carries into the milliseconds: versions stay increasing.
// Guarded by Registry.mu (held for writing).
type hlc struct {
	last uint64
}

// next returns a version larger than every version issued or observed.
func (h *hlc) next(now time.Time) uint64 {
	pt := uint64(max(now.UnixMilli(), 0)) << 16
	if pt > h.last {
		h.last = pt
	} else {
		h.last++
	}
	return h.last
}

// observe takes in a version made elsewhere.
func (h *hlc) observe(v uint64) {
	if v > h.last {
		h.last = v
	}
}

// VersionTime is the wall-clock part of a write version (the accepting
// node's clock when it made the write), for logs and tests.
func VersionTime(v uint64) time.Time { return time.UnixMilli(int64(v >> 16)) }

package registry

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"unsafe"
)

// The indexes: every lease by its app (Registry.apps, for what goes app by
// app: snapshots, digests, eviction, the per-app limit) and by a seeded
// 64-bit hash of its key (Registry.byKey, the key index). A heartbeat
// finds its lease through the key index with one probe of one table, then
// checks the lease's own key; the app map would take a probe of the app
// table and three or four dependent loads into the app's own map, each a
// cache and TLB miss at a million instances (~12 % of a heartbeat's CPU,
// 4 µs of ~35, when apps was a map of maps).
//
// The check reads the lease alone: a second seeded hash of the key,
// independent of the index's, kept in the lease (lease.keyCheck, 32 bits
// in padding), and the id's length. Comparing the key's strings meant two
// or three more dependent loads (the id's bytes, the app's leases, its
// name), each a miss on a node that sleeps between a peer's batches: ~⅓
// of a replication receiver's CPU in the bench's clients-on-one-node
// layout (issue 43). A key that is not registered passes the check only
// if it shares both hashes and the length with a registered one: ~n/2^96
// per lookup with n instances, 10^-23 at a million (a key registered
// beside another of the same index hash is looked up in collided, by its
// strings, as before).
//
// The app map holds one pointer an instance, to its lease, in a slice per
// app (appLeases.leases, in no order; each lease knows its slot, and when
// a lease leaves its app, the app's last lease takes its slot). Every GC
// cycle marks every lease, and each pointer from somewhere else in the
// heap to an object is a lookup of the target's span, a cache and TLB
// miss at a million instances; the map of maps keyed by the instance's id
// string that this replaced held two of those an instance
// (docs/performance.md, "A light collector at 1M").
//
// The key index holds each lease's address, not a pointer the collector
// sees: its table is pointer-free and never scanned, and a heartbeat still
// reaches its lease in one step. That is sound because a lease is in the
// key index only while it is in its app's slice, which the collector
// scans: both change together under the write lock (addLeaseLocked,
// dropLeaseLocked), a lookup turns the address back into a pointer under
// a read stripe at least, and the collector does not move objects. A
// table of lease pointers cost ~250 ns an instance of every GC cycle at a
// million (BenchmarkRegistry_GC); an index of the app's number and the
// slot instead, ~700 ns a renewal (BenchmarkRegistry_RenewRandom/1000k).
//
// Two registered keys whose hashes are equal (about once in 10^7 fills of
// a million instances, and not to be provoked: the seed is random) share a
// slot holding keyCollided, and live in Registry.collided by their keys.
// The mark stays when one of them goes: any key of that hash registered
// later goes to collided too.

// leaseAddr is a lease's address in the key index.
type leaseAddr uintptr

// keyCollided marks an index slot that two or more keys hash to: no
// lease's address.
const keyCollided leaseAddr = 1

func addrOf(l *lease) leaseAddr { return leaseAddr(unsafe.Pointer(l)) }

// lease returns the lease at a, which must be in its app's slice (see
// above). The address is read as a pointer in place: converting a uintptr
// value to a pointer is what the unsafe rules forbid, since nothing
// vouches that the object is still there; here the app's slice does.
func (a *leaseAddr) lease() *lease { return *(**lease)(unsafe.Pointer(a)) }

// appLeases is one app's leases.
type appLeases struct {
	// name is the upper-cased app name, a copy of its own: it must not
	// keep the first instance's strings alive.
	name   string
	leases []*lease // in no order; lease.slot is each one's index
}

// keyHasher hashes an instance key for the index.
type keyHasher func(app, id string) uint64

// seededKeyHash returns the index's hash under a random seed.
func seededKeyHash() keyHasher {
	seed := maphash.MakeSeed()
	return func(app, id string) uint64 {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(app)
		// The length keeps ("AB", "C") and ("A", "BC") apart.
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(app)))
		_, _ = h.Write(n[:])
		h.WriteString(id)
		return h.Sum64()
	}
}

// keyOf is l's key: its app's name and its id.
func (l *lease) keyOf() InstanceKey { return InstanceKey{App: l.app.name, ID: l.id} }

// lookupLocked returns the lease of (app, id), nil if there is none.
// Called with mu held (a read stripe is enough).
func (r *Registry) lookupLocked(app, id string) *lease {
	a, ok := r.byKey[r.hashKey(app, id)]
	switch {
	case !ok:
		return nil
	case a == keyCollided:
		return r.collided[InstanceKey{App: app, ID: id}]
	}
	if l := a.lease(); l.keyCheck == r.keyCheckOf(app, id) && len(l.id) == len(id) {
		return l
	}
	return nil
}

// keyCheckOf is the check a lease of (app, id) carries (see above).
func (r *Registry) keyCheckOf(app, id string) uint32 { return uint32(r.checkKey(app, id)) }

// addLeaseLocked puts l, a new lease whose id is set, into app's leases
// (making the app when it has none) and into the key index.
func (r *Registry) addLeaseLocked(l *lease, app string) {
	a := r.apps[app]
	if a == nil {
		a = &appLeases{name: strings.Clone(app)}
		r.apps[a.name] = a
	}
	l.app, l.slot = a, uint32(len(a.leases))
	a.leases = append(a.leases, l)
	r.indexLocked(l)
}

// dropLeaseLocked takes l out of its app's leases (and the app out of
// apps when it was the last) and out of the key index. It reports whether
// the app went.
func (r *Registry) dropLeaseLocked(l *lease) (appGone bool) {
	r.unindexLocked(l)
	a := l.app
	last := len(a.leases) - 1
	if moved := a.leases[last]; moved != l {
		a.leases[l.slot], moved.slot = moved, l.slot
	}
	a.leases[last] = nil
	a.leases = a.leases[:last]
	if last == 0 {
		delete(r.apps, a.name)
		return true
	}
	if cap(a.leases) > 64 && last < cap(a.leases)/4 {
		// An app that shrank a lot gives its array back.
		a.leases = slices.Clip(slices.Clone(a.leases))
	}
	return false
}

// indexLocked adds l, placed in its app, to the key index.
func (r *Registry) indexLocked(l *lease) {
	l.keyCheck = r.keyCheckOf(l.app.name, l.id)
	h := r.hashKey(l.app.name, l.id)
	other, taken := r.byKey[h]
	if !taken {
		r.byKey[h] = addrOf(l)
		return
	}
	if other != keyCollided {
		o := other.lease()
		r.collided[o.keyOf()] = o
		r.byKey[h] = keyCollided
	}
	r.collided[l.keyOf()] = l
}

// unindexLocked removes l from the key index.
func (r *Registry) unindexLocked(l *lease) {
	h := r.hashKey(l.app.name, l.id)
	switch r.byKey[h] {
	case keyCollided:
		delete(r.collided, l.keyOf())
	case addrOf(l):
		delete(r.byKey, h)
	}
}

// all is the app's leases; none for a nil app (one not in apps).
func (a *appLeases) all() []*lease {
	if a == nil {
		return nil
	}
	return a.leases
}

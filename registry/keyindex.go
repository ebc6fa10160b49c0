package registry

import (
	"encoding/binary"
	"hash/maphash"
)

// The key index: every lease by a seeded 64-bit hash of its key, beside
// Registry.apps. A heartbeat finds its lease with one probe of one table
// whose slots hold the hash and the pointer, then checks the lease's own
// key; apps (app → id → lease) takes a probe of the app table, and three
// or four dependent loads into the app's own map (its header, directory,
// table, group) and its key. At 10k instances all of that is in cache; at
// a million each load is a cache and TLB miss, and the two-level lookup
// was ~12 % of a heartbeat's CPU (4 µs of ~35). apps stays for what goes
// app by app (snapshots, digests, eviction, the per-app limit).
//
// Two registered keys whose hashes are equal (about once in 10^7 fills of
// a million instances, and not to be provoked: the seed is random) share
// a slot holding keyCollided, and a lookup that meets it asks apps. The
// mark stays when one of them goes: a lookup through apps is always right.

// keyCollided marks an index slot that two or more keys hash to.
var keyCollided = &lease{}

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

// lookupLocked returns the lease of (app, id), nil if there is none.
// Called with mu held (a read stripe is enough).
func (r *Registry) lookupLocked(app, id string) *lease {
	l := r.byKey[r.hashKey(app, id)]
	switch {
	case l == keyCollided:
		return r.apps[app][id]
	case l == nil || l.key.ID != id || l.key.App != app:
		return nil
	}
	return l
}

// indexLocked adds the new lease l of key to the index.
func (r *Registry) indexLocked(l *lease, key InstanceKey) {
	h := r.hashKey(key.App, key.ID)
	if _, taken := r.byKey[h]; taken {
		r.byKey[h] = keyCollided
		return
	}
	r.byKey[h] = l
}

// unindexLocked removes l from the index.
func (r *Registry) unindexLocked(l *lease) {
	h := r.hashKey(l.key.App, l.key.ID)
	if r.byKey[h] == l {
		delete(r.byKey, h)
	}
}

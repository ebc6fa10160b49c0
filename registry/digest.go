package registry

import (
	"slices"
	"time"
)

// Digests let two nodes find out, cheaply, whether they hold the same
// registry (anti-entropy, package replication). Each stored instance has a
// 64-bit digest over everything a client sees of it plus its write
// version; an app's digest is the sum of its instances' digests and the
// root digest the sum of all of them. Both sums are kept up to date on
// every change (O(1) per change, no scan): two nodes with equal roots hold
// the same instances at the same versions, with overwhelming probability.
// Lease timestamps, lastUpdatedTimestamp and actionType are left out: each
// node stamps them for itself.

// fnv-1a, 64 bit: small, stable across versions and processes (a seeded
// hash such as hash/maphash would differ between nodes).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

type digester uint64

func (d *digester) byte(b byte) {
	*d = (*d ^ digester(b)) * fnvPrime
}

func (d *digester) str(s string) {
	for i := 0; i < len(s); i++ {
		*d = (*d ^ digester(s[i])) * fnvPrime
	}
	d.byte(0xff) // separator: ("ab","c") ≠ ("a","bc")
}

func (d *digester) u64(v uint64) {
	for i := 0; i < 8; i++ {
		d.byte(byte(v >> (8 * i)))
	}
}

func (d *digester) bool(b bool) {
	if b {
		d.byte(1)
	} else {
		d.byte(0)
	}
}

func (d *digester) metadata(md Metadata) {
	d.u64(uint64(len(md)))
	for _, kv := range md {
		d.str(kv.Key)
		d.str(kv.Value)
	}
}

// InstanceDigest is the digest of in: every client-visible field (as the
// wire shows it: a missing override is UNKNOWN, missing lease figures are
// 30 s and 90 s), the write version and the pieces. Never 0.
func InstanceDigest(in *Instance) uint64 {
	d := digester(fnvOffset)
	d.str(in.App)
	d.str(in.ID())
	d.str(in.InstanceID)
	d.str(in.HostName)
	d.str(in.IPAddr)
	d.str(in.Sid)
	d.str(string(in.Status))
	override := in.OverriddenStatus
	if override == "" {
		override = StatusUnknown
	}
	d.str(string(override))
	d.u64(uint64(in.Port.Number))
	d.bool(in.Port.Enabled)
	d.u64(uint64(in.SecurePort.Number))
	d.bool(in.SecurePort.Enabled)
	d.u64(uint64(in.CountryID))
	d.str(in.DataCenterInfo.Class)
	d.str(in.DataCenterInfo.Name)
	d.metadata(in.DataCenterInfo.Metadata)
	renew, duration := in.RenewalIntervalSecs, in.LeaseDurationSecs
	if renew == 0 {
		renew = 30
	}
	if duration == 0 {
		duration = 90
	}
	d.u64(uint64(renew))
	d.u64(uint64(duration))
	d.metadata(in.Metadata)
	d.str(in.AppGroupName)
	d.str(in.HomePageURL)
	d.str(in.StatusPageURL)
	d.str(in.HealthCheckURL)
	d.str(in.SecureHealthCheckURL)
	d.str(in.VIPAddress)
	d.str(in.SecureVIPAddress)
	d.str(in.ASGName)
	d.bool(in.IsCoordinatingDiscoveryServer)
	d.u64(uint64(in.LastDirtyTimestamp))
	d.u64(in.WriteVersion)
	if h := in.Health; h != nil {
		d.byte(1)
		d.str(h.Reason)
		d.u64(uint64(h.Since))
		d.str(h.By)
		d.bool(h.Hides)
	}
	if p := in.Pieces; p != nil {
		d.byte(2)
		d.str(string(p.RegStatus))
		d.str(string(p.Override))
		d.str(string(p.OverrideValue))
		d.u64(p.OverrideVersion)
		d.u64(p.HealthVersion)
		d.u64(uint64(p.DrainedAt))
		d.str(p.DrainedBy)
		d.u64(p.DrainVersion)
		d.metadata(p.RegMetadata)
		d.u64(uint64(len(p.Overlay)))
		for _, w := range p.Overlay {
			d.str(w.Key)
			d.str(w.Value)
			d.u64(w.Version)
		}
		d.u64(p.Since)
	}
	if d == 0 {
		d = 1
	}
	return uint64(d)
}

// digests are the running sums; guarded by Registry.mu.
type digests struct {
	root uint64
	apps map[string]uint64
}

// swapLocked replaces old (0: none) with new (0: none) in app's sums.
func (r *Registry) swapDigestLocked(app string, old, new uint64) {
	if r.dig.apps == nil {
		r.dig.apps = map[string]uint64{}
	}
	r.dig.root += new - old
	r.dig.apps[app] += new - old
}

// setInstLocked stores in as l's instance, with what a heartbeat reads of
// it, and keeps the digests up to date.
func (r *Registry) setInstLocked(l *lease, in *Instance) {
	d := InstanceDigest(in)
	r.swapDigestLocked(in.App, l.digest, d)
	l.inst, l.digest = in, d
	if id := in.ID(); id == l.id {
		// The new pack's copy: the old one must not outlive the write
		// that replaced it for the lease's sake.
		l.id = id
	}
	l.renewOutcome = [2]renewOutcome{renewOutcomeOf(in, false), renewOutcomeOf(in, true)}
	l.lastDirty, l.version = in.LastDirtyTimestamp, in.CopyVersion()
	r.noteDrainLocked(l, in)
}

// RootDigest is the sum of every instance's digest: equal on two nodes
// that hold the same registry.
func (r *Registry) RootDigest() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.dig.root
}

// AppDigests returns every app's digest (the sum of its instances'
// digests) into dst, cleared first (nil: a new map).
func (r *Registry) AppDigests(dst map[string]uint64) map[string]uint64 {
	if dst == nil {
		dst = map[string]uint64{}
	}
	clear(dst)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for app, d := range r.dig.apps {
		dst[app] = d
	}
	return dst
}

// DigestEntry is what anti-entropy compares of one instance of an app, or
// of one tombstone (a cancel).
type DigestEntry struct {
	ID string
	// Version is the instance's write version, or the cancel's.
	Version uint64
	// Digest is InstanceDigest of the stored instance; 0 for a tombstone.
	Digest uint64
	// Live is true when the lease has not expired on this node.
	Live bool
	// Tombstone marks a cancel.
	Tombstone bool
	// TTL is how long a tombstone is kept still. A node that takes the
	// tombstone from a peer keeps it that long, not a fresh lifetime:
	// otherwise nodes that prune at different moments would hand it back
	// and forth for good.
	TTL time.Duration
}

// AppEntries lists app's instances and tombstones (upper-cased name),
// appended to buf, in no particular order.
func (r *Registry) AppEntries(app string, buf []DigestEntry) []DigestEntry {
	return r.appEntries(app, nil, buf)
}

// appEntries lists app's entries, only those whose bucket among len(in)
// is set in in when in is not nil.
func (r *Registry) appEntries(app string, in []bool, buf []DigestEntry) []DigestEntry {
	now := r.now()
	app = upperASCII(app)
	keep := func(id string) bool { return in == nil || in[BucketOf(id, len(in))] }
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, l := range r.apps[app].all() {
		if keep(l.id) {
			buf = append(buf, DigestEntry{ID: l.id, Version: l.inst.WriteVersion, Digest: l.digest, Live: !l.expired(now, 0)})
		}
	}
	for id, t := range r.tombs.byApp[app] {
		if keep(id) {
			buf = appendTombstone(buf, id, t, now)
		}
	}
	return buf
}

// appendTombstone lists a kept tombstone; one held past its lifetime
// (SetTombstoneHold) goes with the least lifetime, so the peer takes the
// cancel and keeps the tombstone only as long as its own hold says.
func appendTombstone(buf []DigestEntry, id string, t tombstone, now time.Time) []DigestEntry {
	return append(buf, DigestEntry{ID: id, Version: t.version, Tombstone: true, TTL: max(t.expires.Sub(now), time.Millisecond)})
}

// VersionedCopy is a stored instance as anti-entropy hands it to a peer:
// the instance (with its WriteVersion) and its lease's last renewal.
type VersionedCopy struct {
	Instance    *Instance
	LastRenewal time.Time
	// Live is true when the lease has not expired on this node.
	Live bool
}

// Copy returns the stored copy of app/id.
func (r *Registry) Copy(app, id string) (VersionedCopy, bool) {
	now := r.now()
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	l := r.lookupLocked(app, id)
	if l == nil {
		return VersionedCopy{}, false
	}
	return VersionedCopy{Instance: l.inst, LastRenewal: time.Unix(0, l.lastRenewal.Load()), Live: !l.expired(now, 0)}, true
}

// Tombstone returns the write version of app/id's cancel while its
// tombstone is kept.
func (r *Registry) Tombstone(app, id string) (uint64, bool) {
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tombs.byApp[app][id]
	return t.version, ok
}

// Inside a large app anti-entropy narrows once more, to buckets: an
// instance id's bucket among n is its FNV-1a hash mod n, and a bucket's
// digest is the sum of its instances' digests, like an app's. They are
// computed on demand (one pass over the app under the read lock, cheaper
// than listing its entries) and only for apps that differ and are large,
// so the write path keeps no per-bucket sums.

// BucketOf is the bucket of instance id among n (n > 0).
func BucketOf(id string, n int) int {
	d := digester(fnvOffset)
	for i := 0; i < len(id); i++ {
		d = (d ^ digester(id[i])) * fnvPrime
	}
	return int(uint64(d) % uint64(n))
}

// AppBuckets returns app's bucket digests among n buckets (upper-cased
// name) in dst, resized to n and cleared first.
func (r *Registry) AppBuckets(app string, n int, dst []uint64) []uint64 {
	dst = slices.Grow(dst[:0], n)[:n]
	clear(dst)
	app = upperASCII(app)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, l := range r.apps[app].all() {
		dst[BucketOf(l.id, n)] += l.digest
	}
	return dst
}

// AppBucketEntries is AppEntries restricted to the instances and
// tombstones whose bucket among len(in) buckets is set in in.
func (r *Registry) AppBucketEntries(app string, in []bool, buf []DigestEntry) []DigestEntry {
	if len(in) == 0 {
		return buf
	}
	return r.appEntries(app, in, buf)
}

// AppSizes returns into dst (cleared first; nil: a new map) the instance
// count of every app holding more than min instances.
func (r *Registry) AppSizes(min int, dst map[string]int) map[string]int {
	if dst == nil {
		dst = map[string]int{}
	}
	clear(dst)
	r.mu.RLock()
	defer r.mu.RUnlock()
	for app, a := range r.apps {
		if len(a.leases) > min {
			dst[app] = len(a.leases)
		}
	}
	return dst
}

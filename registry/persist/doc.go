// Package persist keeps a node's registry on disk (muster.data-dir), so
// that a cluster whose every node restarted does not come back empty.
//
// # The file
//
// One file, <data-dir>/registry.snapshot, text header then Eureka JSON:
//
//	MUSTER-REGISTRY-SNAPSHOT 1
//	cluster: <muster.cluster-name>
//	node: <node name>
//	written: <RFC 3339 time>
//	instances: <n>
//
//	{"applications":{…}}            (registry/wire, every instance)
//	versions
//	["APP","instance-id",<write version>]   (one line per versioned instance)
//	tombstones
//	["APP","instance-id",<cancel's version>,<ms left>]   (one per live tombstone)
//	crc32c: <8 hex digits> bytes: <length of everything above>
//
// The versions section keeps what Eureka's JSON has no field for: each
// instance's write version (registry.Instance.WriteVersion), so after a
// full restart the winner rule between nodes still knows which copy is
// newer. A file without it (written before versions existed) loads with
// version 0, which any versioned copy from a peer beats.
//
// The tombstones section keeps the cancels the registry still remembers
// (registry.Registry.LiveTombstones): key, the cancel's write version and
// how long the tombstone was to be kept still when the file was written.
// Without it, a node restarted from its snapshot forgot its cancels, and
// a peer restarted from an older snapshot that still held a cancelled
// instance brought it back (by syncUp or anti-entropy) for one lease,
// which can be a day. A file without the section (written before it
// existed) loads with no tombstones; a line in it that is not a
// well-formed row refuses the whole file, like any other damage. Builds
// that predate the section read its rows as malformed versions and refuse
// the file: a downgrade starts as without a snapshot, it never misreads
// one.
//
// The trailer's CRC-32C (Castagnoli) covers every byte before it, header
// included, so a flipped bit, a cut-off write or an edited cluster name is
// caught. The cluster line names the cluster that wrote it: a node refuses
// a snapshot of another cluster (a volume mounted into the wrong
// deployment), since serving someone else's instances is worse than
// serving none.
//
// # Writing
//
// Write encodes a registry Snapshot (immutable, taken outside every
// registry lock) streamed through a buffered writer into a temporary file
// in the same directory, fsyncs it, renames it over the old snapshot and
// fsyncs the directory. A crash at any point leaves either the old
// snapshot or the new one, never a mix; a left-over temporary file is
// ignored (and removed by the next write). The cost is one pass over the
// registry per write, off the request path, and the node writes only when
// the registry's version moved since the last write.
//
// # Reading
//
// Read parses and verifies the whole file — magic, version, length,
// checksum, cluster, then every instance — before it returns anything, so
// a bad file is refused as a whole with an error naming the file and the
// reason, and never half-applied; SetAside moves it out of the way for
// the operator, beside those refused before (named by time, the newest
// RefusedKept kept). Restore applies what Read returned
// through the registry's syncUp path (BeginSync, registers from
// OriginSync, EndSync): every lease counts as renewed at that moment, so a
// vanished instance is evicted one lease later, not at once.
// RestoreTombstones then applies the file's tombstones (ReadFile returns
// them) as versioned cancels from OriginSync, each for its remaining
// lifetime less the time since the file was written, on the caller's
// clock. After the instances, so a cancel removes a restored copy it is
// newer than; and cmd/muster applies them also when syncUp copied the
// registry from a peer, whose copy may come from an older snapshot.
package persist

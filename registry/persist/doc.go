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
//	crc32c: <8 hex digits> bytes: <length of everything above>
//
// The versions section keeps what Eureka's JSON has no field for: each
// instance's write version (registry.Instance.WriteVersion), so after a
// full restart the winner rule between nodes still knows which copy is
// newer. A file without it (written before versions existed) loads with
// version 0, which any versioned copy from a peer beats.
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
// the operator. Restore applies what Read returned
// through the registry's syncUp path (BeginSync, registers from
// OriginSync, EndSync): every lease counts as renewed at that moment, so a
// vanished instance is evicted one lease later, not at once.
package persist

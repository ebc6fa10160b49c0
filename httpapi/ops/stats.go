package ops

import "github.com/muster-registry/muster/replication"

// AntiEntropyStats is what /metrics reads from anti-entropy.
type AntiEntropyStats interface {
	Stats() []replication.AntiEntropyStats
	Totals() replication.Repairs
}

// ReplicationStats is what /metrics reads from the replicator.
type ReplicationStats interface {
	Peers() []replication.PeerStats
	Totals() replication.Counters
}

// Package replication sends every local registry change to every peer, in
// batches over Eureka's wire (POST /peerreplication/batch), so a Muster node
// can replicate with other Muster nodes and with Java Eureka servers.
//
// Each peer has one sender: a goroutine that owns a bounded queue (batcher)
// and has at most one batch in flight. There is no batching delay: a batch
// leaves as soon as the previous one for that peer is answered, so when the
// peer is idle a change reaches it in one round trip, and under load the
// batches fill up by themselves (ARCHITECTURE.md decision 6; Eureka waits
// 500 ms, EUREKA.md bug 19).
//
// The lifecycle of a change:
//
//  1. The registry applies a write (registry.Op) and appends it to its
//     change stream under its lock; a client's heartbeat instead marks its
//     lease in the renewal feed. Neither calls into replication.
//  2. The replicator's feed goroutine, woken by the registry without
//     blocking, reads the stream from its cursor to the head, outside
//     every registry lock; it first takes the renewals, at most every
//     500 ms unless about MaxMusterBatchSize of them wait
//     (registry.Registry.RenewalsBacklogged): so a heartbeat may lag a
//     change by that much, at a moderate rate they leave in few, full
//     batches (each wakes an otherwise idle peer once), and a flood is
//     taken a batch at a time, which no peer's inbox or queue overflows
//     with. A change that did not come
//     from a client (a peer's write, a syncUp copy, an eviction) stops
//     here: it is never forwarded. The rest become Tasks (action, instance
//     key, the immutable instance, creation time), changes first, then one
//     heartbeat per renewed lease, and the round is handed to every peer's
//     inbox at once, without blocking, with one wake-up: so a take of
//     renewals leaves in one batch per peer. A full inbox drops the task
//     for that peer (Drops.InboxFull). If the feed fell so far behind that
//     the stream overwrote what it had not read, every sender catches up
//     with a heartbeat for every live instance (Counters.Resyncs), as a new
//     sender does (below).
//  3. The peer's goroutine moves the round into its batcher. A pending task
//     for the same instance and action is replaced, and the new one goes to
//     the back, so register/cancel/register keeps its order (Counters.Replaced).
//     When MaxQueueSize tasks are pending, the oldest heartbeat is dropped,
//     or the oldest task if no heartbeat is pending (Drops.Overflow).
//  4. When no batch is in flight and no backoff is running, the sender takes
//     up to MaxBatchSize (250; MaxMusterBatchSize, 2000, to a Muster peer)
//     tasks from the front, dropping those that
//     have expired (register and heartbeat after the instance's renewal
//     interval, 30 s by default; cancel and status after TaskMaxAge, 30 s;
//     Drops.Expired) and stopping before the batch would exceed
//     MaxBatchBytes (¾ of the receivers' muster.max-batch-body-bytes; a
//     task larger on its own is dropped, Drops.TooLarge, and logged at
//     error level with its key), records the age of the oldest one as the
//     replication lag, and sends the batch through the Transport in its own
//     goroutine.
//  5. While the batch is in flight, new tasks queue up (and dedupe); they
//     make the next batch.
//  6. The answer decides what happens to the batch: 2xx, it is done
//     (go to 7); 503, the peer is congested: the batch goes back to the
//     front of the queue and the sender waits backoff(1 s, failures, 30 s);
//     a network error or timeout, the same with backoff(100 ms, failures,
//     5 s), so a restarted peer hears from us within seconds
//     (Counters.Retries); 413, the peer's limit is lower than ours:
//     the batch goes back and the byte budget for that peer halves; any
//     other status, the batch is dropped (Drops.Permanent; anti-entropy
//     repairs what it carried) and logged at
//     error level. Re-queued tasks that have meanwhile been
//     superseded by a newer task, or have expired, are left out.
//  7. Each item of a 2xx answer is checked, in order: a heartbeat's 404 means
//     the peer lost the instance, so a Register of the local copy
//     (Config.Store) is queued, unless it is gone here too; a heartbeat's
//     409 brings the peer's newer instance, which is applied from
//     OriginPeer and only over an older copy (so it does not come back
//     through step 1); a cancel's 404 is fine; a 4xx the peer would give
//     again (400, 403, 413: one of its limits) drops the item for good
//     (Drops.Refused), logged at error level with its key under its own
//     rate limit, so transient failures cannot hide it; other failures are
//     counted (Counters.ItemFailures) and logged. An answer with a different
//     number
//     of items than the batch is logged and its items are ignored, as
//     Eureka does.
//  8. The sender goes back to step 4.
//
// With a peer secret, HTTPTransport and the syncUp fetch sign every request
// through a RequestSigner (signing.go); the receiving node's httpapi checks
// the signature before Receiver sees the batch.
//
// SetPeers adds and removes senders as membership changes; a peer that
// stays keeps its queue. A sender added while running starts with a
// catch-up: a heartbeat for every live instance, so a peer that appeared
// after some changes were handed out hears of them through the 404/409
// dialogue (Counters.CatchUps).
//
// Batches to Muster peers (Peer.Muster: memberlist members) carry each
// change's write version (registry.Instance.WriteVersion; a cancel's is its
// tombstone's, with the cancelled instance's lease in leaseDurationInSecs,
// so a peer that never had the instance keeps the tombstone as long as
// this node does), and status changes carry the whole instance, so the
// receiver stores exactly the copy that version names, under the
// registry's winner rule (the higher version wins). A heartbeat's version
// replaces lastDirtyTimestamp in the 404/409 dialogue. Static peers may be
// Java Eureka servers, whose Jackson mapping of ReplicationInstance may
// refuse unknown properties: they get Eureka's plain items until they
// answer an anti-entropy round (Replicator.MarkMuster).
//
// # Anti-entropy
//
// Replication can lose a change for good (an expired task, a batch
// answered 500, a peer declared dead). AntiEntropy repairs that: every
// Interval (muster.anti-entropy-interval-ms, 10 s, ±20 % jitter; 0 turns
// it off), and at once with a peer that joins or comes back
// (PeersChanged), each node runs a pull round with each peer:
//
//  1. POST peerreplication/digest {root}: the peer answers its root digest,
//     and its app digests only if the roots differ. In sync, that is all:
//     a few dozen bytes each way.
//  2. For the apps whose digests differ: the same request naming them; the
//     peer answers each app's entries (id, digest, version, lease live,
//     and its tombstones). An app larger than BucketThreshold on either
//     side (the peer reports the sizes of its large apps with the app
//     digests) is first split into buckets of instance ids
//     (registry.BucketOf, about 2√n buckets): the peer answers the
//     buckets' digests, and only the differing buckets' entries are asked
//     for. A peer that answers no bucket digests gets the app compared
//     whole.
//  3. POST peerreplication/copies: the copies this node lacks (only if
//     live at the peer and no newer tombstone is kept here: an instance
//     expired everywhere is not resurrected) or holds older versions of.
//  4. Each copy is applied from registry.OriginAntiEntropy under the
//     winner rule (so a write that lands meanwhile is not undone), and a
//     peer's newer tombstone cancels the instance here.
//
// Nothing is removed for being absent at the peer: an instance renewing
// through another node stays, and the peer adopts it on its own round.
// Rounds are never forwarded (their origin is not a client). Stats and
// Totals report, per peer, whether the last round found nothing different
// (InSync; a failed round clears it: unknown is not in sync), its State in
// one word, when the last good round ran, the instances that differed, the
// rounds by outcome, the last error and when, and the repairs by kind
// (missing, stale, cancelled). Failures are warned about once per run and
// then at most once a minute per peer. A peer that answers 404 (a Java Eureka
// server) is left to Eureka's own repair and asked again 30 rounds later.
// The endpoints are signed and bounded like batches (wire.MaxDigestApps apps,
// wire.MaxBuckets buckets, wire.MaxCopyKeys keys per request; bodies under
// muster.max-body-bytes).
//
// syncUp (Syncer) fetches a peer's registry through the same Transport,
// takes the copies' write versions from the peer's anti-entropy entries
// (where the digests match) and applies it from OriginSync between
// Store.BeginSync and EndSync; the
// registry keeps cancels and status writes replicated meanwhile. The
// Receiver applies inbound batches as operations from OriginPeer through
// a one-method Applier. Peers and Totals report queue depths, lag and
// counters for /admin/status and metrics. The Transport interface is the seam
// for the HTTP transport and its JSON batch types; package replicationtest
// has an in-memory one for tests.
package replication

// Package cluster is Muster's membership: it runs hashicorp/memberlist
// (SWIM gossip) for this node and keeps a snapshot of who is in the cluster.
// It owns the memberlist lifecycle (New, Start, Shutdown), the memberlist
// delegates, the node metadata and the Members snapshot. It imports no
// other Muster package; cmd/muster turns Members into replication peers.
//
// # Metadata
//
// Each node gossips, as memberlist node metadata, its zone and its
// advertised Eureka base URL as compact JSON:
//
//	{"zone":"us-east-1a","url":"http://10.0.0.5:8761/eureka/"}
//
// It must fit memberlist.MetaMaxSize (512 bytes); Validate says so if it
// does not. A peer whose metadata does not parse is still listed, with an
// empty zone and URL, and a warning is logged once for it. Self is
// recognised by node name, never by host name or address.
//
// # Members and changes
//
// Members returns a copy, sorted by name, of every node this node knows:
// itself (Self), alive and suspect peers, and dead or left peers until
// memberlist reaps them (Memberlist.GossipToTheDeadTime) or they rejoin.
//
// memberlist v0.7.0 reports no node's state to its delegates (Node.State
// always reads "alive", hashicorp/memberlist#293), so the states are
// rebuilt from what memberlist does report:
//   - alive: NotifyJoin, NotifyUpdate, or a completed probe of a suspect;
//   - left: NotifyLeave for a node whose last metadata carried
//     "leaving":true, which Shutdown advertises just before memberlist's
//     leave broadcast (neither is waited for once no other member is
//     alive: nobody is left to tell);
//   - dead: NotifyLeave without that intent (a crash or a partition);
//   - suspect: memberlist's own failed probe of the node on this node (its
//     "Suspect <name> has failed" line), until an ack, NotifyLeave, or the
//     longest suspicion memberlist allows has passed (suspect.go).
//
// Changes signals that the snapshot changed. The channel has room for one
// value and sends never block, so notifications coalesce: a reader wakes
// up, calls Members and acts on the whole current list.
//
// # Delegates never block
//
// memberlist calls its delegates from its gossip and probe goroutines, often
// with its node lock held. delegate (NodeMeta) returns a precomputed slice.
// eventDelegate (join, leave, update) and pingDelegate copy what they need,
// update the snapshot under the Cluster's mutex, release it, then notify
// with a non-blocking send and log. A loop started by Start applies the
// time-based changes every ReconcileInterval (1 s): forgetting reaped
// members and ending stale suspicions.
//
// # Joining and logging
//
// Start binds and returns; when Join is set, a background loop retries the
// seeds (1 s, doubling, at most every 15 s) until one answers, so nodes can
// start in any order. Once joined, the loop keeps watching: every
// RejoinInterval (10 s), if fewer peers are alive than there are seeds or
// some member is dead, it joins the seeds and the dead members again, so a
// partition that outlasted memberlist's memory of dead nodes still heals.
// Failed attempts are logged at Warn (identical repeats
// at most once a minute), success at Info. memberlist's own log lines go
// through the zerolog Logger at their level, with source=memberlist; errors
// that mean the nodes use different secret keys say so ("is
// cluster.secret-key the same on every node?").
//
// # Encryption and key rotation
//
// SecretKey encrypts and authenticates every gossip message (memberlist's
// AES-GCM). SecretKeys go into memberlist's keyring besides it: messages
// are sent with SecretKey and accepted under any key of the ring, so a
// key is rotated by restarting nodes one at a time through three keyrings
// — {old; new accepted}, {new; old accepted}, {new} — with every pair of
// nodes sharing a key at every moment.
package cluster

// Package node is one Muster node: its assembly from the settings it is
// handed (package settings loads them) and its start and stop order.
//
// New builds what every part shares from settings.Settings: the registry
// and its data-dir snapshot (coldstart.go), TLS and keystores (tls.go),
// users and peer signatures (security.go), replication's sender, receiver
// and anti-entropy, the remote regions. It opens nothing and starts no
// goroutine. Start binds the API port (the node's URL follows from it),
// builds the parts in one ordered list (newParts: TLS reload, regions,
// replication, cluster, peers, snapshots, registry, anti-entropy, health
// checks, xDS, DNS, HTTP, start-up, dashboard history,
// self-registration) and starts them in order; the ones marked atOpen
// start when startUp has synced and opened for traffic (Opened). Every
// part has one contract (part.go): Name, Start, Stop. Shutdown turns
// readiness off and stops the parts in reverse, so the self-registration
// is cancelled first, the listeners stop (in-flight requests finish), the
// snapshot is written, replication drains to the peers and the node
// leaves the cluster last; a Start that fails stops what it had started
// the same way.
//
// cmd/muster's serve is settings.Load, New, Start and Shutdown on a signal; the
// benchmark starts the same node in a child process of its own
// (tools/bench, `bench node`), so that what it measures is what users run.
package node

// Package node is one Muster node: its assembly from the settings it is
// handed (package settings loads them) and its start and stop order.
//
// New assembles a node from settings.Settings: the registry and its data-dir
// snapshot (coldstart.go), TLS and keystores (tls.go), users and peer
// signatures (security.go), replication, syncUp and anti-entropy, the
// memberlist cluster, the HTTP server, the DNS interface (dns.go) and the
// node's own registration (selfregister.go). New opens nothing and starts
// no goroutine; Start listens, runs syncUp and opens for traffic in the
// background (Opened); Shutdown turns readiness off, cancels the
// self-registration, stops the listeners (in-flight requests finish),
// writes the snapshot, drains replication to the peers and leaves the
// cluster.
//
// cmd/muster's serve is settings.Load, New, Start and Shutdown on a signal; the
// benchmark starts the same node in a child process of its own
// (tools/bench, `bench node`), so that what it measures is what users run.
package node

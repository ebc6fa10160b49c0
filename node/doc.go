// Package node is one Muster node: its settings and its assembly.
//
// Settings are every key Muster reads (settings.go), under the names of a
// Spring Cloud Eureka server's application.yml, loaded by Load from the
// file's documents and profiles (through internal/springconf), the
// environment and the command line, in that order. A key that sets a
// package's knob sets that package's Config, which starts as its
// DefaultConfig, and a package's Validate error is reported under the key
// that set the field. Spring keys Muster accepts without using are one
// table (springkeys.go), each with the warning that says what Muster does
// instead.
//
// New assembles a node from Settings: the registry and its data-dir
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
// cmd/muster's serve is Load, New, Start and Shutdown on a signal; the
// benchmark starts the same node in a child process of its own
// (tools/bench, `bench node`), so that what it measures is what users run.
package node

// Package healthcheck probes registered instances from the server: an HTTP
// GET of an instance's healthCheckUrl, or a TCP connect to its address, and
// marks an instance that keeps failing with the registry's server-owned
// status (registry.HealthMark), which every node then serves as DOWN.
//
// It owns three decisions:
//
//  1. What is probed (Config.Apps, the instance's metadata
//     "muster.health-check": http, tcp or off; a persistent instance,
//     registry.IsPersistent, is probed unless it says off).
//  2. Who probes it (owner.go): with a gossip cluster, exactly one live
//     member per app, chosen by rendezvous hashing of the app name over
//     the member names, so each node probes about 1/N of the apps and a
//     member that leaves hands its apps to the others at their next round;
//     without one (static peers only, or a single node), each node probes
//     the instances whose clients register and renew through it
//     (registry.ClientLive).
//  3. When a verdict changes (verdict.go): FailuresBeforeDown failed rounds
//     in a row mark an instance, SuccessesBeforeUp passed ones lift the
//     mark; and the guard: when more than MaxDownPercent of an app's probed
//     instances fail in one round, no instance of that app is marked, since
//     the probe path is then more likely broken than the app.
//
// Where it connects is decided in target.go, and the threat model is
// written there and in docs/health-checks.md: only the instance's own
// registered ipAddr is dialled (the URL's host must be that ipAddr or the
// instance's hostName), never loopback, link-local, unspecified, multicast
// or the node's own addresses unless Config.AllowedCIDRs lists them, never
// the node's own listeners, with no credentials, no client certificate, no
// proxy and no redirects, and never more than MaxConcurrent at once.
//
// New starts nothing; Run owns the only timer (a jittered interval), and
// tests call Round with the registry's injected clock.
package healthcheck

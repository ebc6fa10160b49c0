// Package ops owns the operator endpoints: GET /admin/status (Admin, and
// the AdminStatus document with its parts, PeerInfo and Security), /readyz
// and /livez, /metrics (Metrics: the registry's, replication's and
// anti-entropy's collectors and the request latency histogram, plus the
// HTTP layer's own collectors it is given), Spring Boot's actuator
// (actuator.go) and /lastn (lastn.go).
//
// The document types are what `muster status`, `muster members` and the
// chaos runner read, so they import this package and not the whole HTTP
// layer. ops reads the registry through narrow interfaces of its own
// (AdminRegistry, MetricsRegistry, ActuatorRegistry) and knows nothing of
// the Eureka API; httpapi mounts its routes with the server's middleware.
package ops

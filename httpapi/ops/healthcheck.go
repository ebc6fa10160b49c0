package ops

import "github.com/muster-registry/muster/report"

// The health checks' report: package report's types, which package
// healthcheck fills (see docs/health-checks.md).
type (
	HealthChecks     = report.HealthChecks
	HealthCheckRound = report.HealthCheckRound
	MarkedInstance   = report.MarkedInstance
	ProbeState       = report.ProbeState
)

// HealthCheckSource is what /admin/status and the console read of the
// node's health checks. Its methods are safe for concurrent use and do not
// block on probes.
type HealthCheckSource interface {
	// Report is the whole state, for /admin/status.
	Report() *HealthChecks
	// Probe is one instance's probe state on this node; false when this
	// node does not probe it.
	Probe(app, id string) (ProbeState, bool)
	// GuardedApps are the apps the guard holds back now.
	GuardedApps() []string
	// ProbedBy names the node that probes the instance.
	ProbedBy(app, id string) string
}

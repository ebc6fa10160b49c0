package ops

import "time"

// HealthChecks is the health-check part of AdminStatus (the node fills it
// from package healthcheck; see docs/health-checks.md).
type HealthChecks struct {
	Enabled bool `json:"enabled"`
	// Ownership says who probes what in this cluster.
	Ownership          string `json:"ownership"`
	IntervalMillis     int64  `json:"intervalMillis"`
	TimeoutMillis      int64  `json:"timeoutMillis"`
	FailuresBeforeDown int    `json:"failuresBeforeDown"`
	SuccessesBeforeUp  int    `json:"successesBeforeUp"`
	MaxDownPercent     int    `json:"maxDownPercent"`
	// LastRound is this node's last round; nil before the first.
	LastRound *HealthCheckRound `json:"lastRound,omitempty"`
	// GuardedApps are the apps whose marks the guard holds back on this
	// node now.
	GuardedApps []string `json:"guardedApps"`
	// Marked lists the instances marked DOWN by health checks (any node's
	// marks, as replicated here), with the reason and who probes them now.
	Marked []MarkedInstance `json:"marked"`
	// Probes lists the instances this node probes that are not plainly
	// passing: failing, down, recovering or refused (not probed: their
	// address or URL breaks the rules).
	Probes          []ProbeState `json:"probes"`
	ProbesTruncated bool         `json:"probesTruncated,omitempty"`
}

// HealthCheckRound is what one round of this node did.
type HealthCheckRound struct {
	At         time.Time `json:"at"`
	TookMillis int64     `json:"tookMillis"`
	Owned      int       `json:"owned"`
	Probed     int       `json:"probed"`
	Failed     int       `json:"failed"`
	Refused    int       `json:"refused"`
	Marked     int       `json:"marked"`
	Lifted     int       `json:"lifted"`
}

// MarkedInstance is one instance marked by health checks.
type MarkedInstance struct {
	App    string    `json:"app"`
	ID     string    `json:"id"`
	Status string    `json:"status"` // the status served (DOWN, or the override that wins)
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	// MarkedBy is the node that marked it; ProbedBy the one that probes
	// it now, as this node sees the members ("" without a cluster when
	// its client does not talk to this node).
	MarkedBy string `json:"markedBy"`
	ProbedBy string `json:"probedBy"`
}

// ProbeState is one instance as the node that probes it sees it.
type ProbeState struct {
	App        string     `json:"app"`
	ID         string     `json:"id"`
	Mode       string     `json:"mode"`
	Target     string     `json:"target,omitempty"`
	State      string     `json:"state"` // up, failing, down, recovering, refused
	LastResult string     `json:"lastResult"`
	LastProbe  *time.Time `json:"lastProbe,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Failures   int        `json:"failures"`
	Successes  int        `json:"successes"`
}

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

// Package report holds the plain types in which a node's parts report
// themselves for GET /admin/status and the console: the health checks
// (package healthcheck), the xDS clients (xds) and the remote regions
// (regions). Each part fills its own through a Report method; httpapi/ops
// re-exports the types as parts of its AdminStatus document, so the JSON
// is defined once, here.
//
// It imports nothing of the project: the parts need no HTTP package to
// report, and ops (which the CLI and the chaos runner read) links no part.
package report

import "time"

// HealthChecks is the health checks' report, the healthChecks part of
// /admin/status (see docs/health-checks.md).
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

// RemoteRegion is one remote region as this node holds it, an entry of
// remoteRegions in /admin/status.
type RemoteRegion struct {
	Name string `json:"name"`
	// URLs are the region's servers, passwords redacted.
	URLs []string `json:"urls"`
	// HasData: the region's instances are served (false before the
	// first fetch and after a drop for max staleness).
	HasData   bool   `json:"hasData"`
	Apps      int    `json:"apps"`
	Instances int    `json:"instances"`
	Hashcode  string `json:"appsHashcode"`
	// LastFetch is the last successful fetch (RFC 3339; "" never) and
	// AgeSeconds the time since.
	LastFetch  string  `json:"lastFetch,omitempty"`
	AgeSeconds float64 `json:"ageSeconds"`
	// Failures counts the consecutive failed fetches; LastError is the
	// last one's reason (URLs redacted).
	Failures   int    `json:"consecutiveFailures"`
	LastError  string `json:"lastError,omitempty"`
	Mismatches uint64 `json:"hashcodeMismatches"`
}

// XDSWeight is an instance's endpoint weight as the node's xDS server
// serves it now (package xds fills it; the console shows it).
type XDSWeight struct {
	Weight uint32 // the load_balancing_weight sent
	Full   uint32 // the weight once warm (metadata.weight, ×100 while warm-up is on)
	// Percent is the share of Full reached: below 100 while the instance
	// warms up (muster.traffic.warmup-seconds), until WarmUntil.
	Percent   int
	WarmUntil time.Time
}

// XDSClient is one xDS stream open on the node (muster.xds.enabled), as
// the dashboard shows it.
type XDSClient struct {
	Node        string    `json:"node"`    // the node id the client sent
	Cluster     string    `json:"cluster"` // the node cluster the client sent
	Zone        string    `json:"zone"`    // the client's locality zone
	Addr        string    `json:"addr"`
	Since       time.Time `json:"since"`
	Incremental bool      `json:"incremental"` // delta xDS
	Types       []string  `json:"types"`       // cds, eds, lds, rds
	Version     string    `json:"version"`     // last version acknowledged
	NACKs       int       `json:"nacks"`
	LastNACK    string    `json:"lastNack,omitempty"`
}

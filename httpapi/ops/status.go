package ops

import (
	"time"

	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/report"
)

// AdminStatus is the body of GET /admin/status: what an operator or a test
// needs to know about one node at a glance.
type AdminStatus struct {
	Node             string              `json:"node"`
	Zone             string              `json:"zone"`
	URL              string              `json:"url,omitempty"`
	Version          string              `json:"version,omitempty"`
	OpenForTraffic   bool                `json:"openForTraffic"`
	UptimeSeconds    int64               `json:"uptimeSeconds"`
	SelfPreservation SelfPreservationDoc `json:"selfPreservation"`
	Registry         RegistryDoc         `json:"registry"`
	Peers            []PeerInfo          `json:"peers"`
	Security         Security            `json:"security"`
	// HealthChecks is omitted while muster.health-check.enabled is off.
	HealthChecks *HealthChecks `json:"healthChecks,omitempty"`
	// RemoteRegions are the remote regions this node fetches (omitted
	// without any).
	RemoteRegions []RemoteRegionInfo `json:"remoteRegions,omitempty"`
}

// RemoteRegionInfo is one remote region as this node holds it (package
// regions fills it).
type RemoteRegionInfo = report.RemoteRegion

// SelfPreservationDoc is the self-preservation part of AdminStatus.
type SelfPreservationDoc struct {
	Enabled                bool    `json:"enabled"`
	Active                 bool    `json:"active"`
	WarmingUp              bool    `json:"warmingUp"`
	LeaseExpirationEnabled bool    `json:"leaseExpirationEnabled"`
	ExpectedRenewsPerMin   float64 `json:"expectedRenewsPerMin"`
	RenewsThreshold        int64   `json:"renewsThreshold"`
	RenewsLastMin          int64   `json:"renewsLastMin"`
	ArrivingRenewsPerMin   float64 `json:"arrivingRenewsPerMin"`
	UnprovenRenewsPerMin   float64 `json:"unprovenRenewsPerMin"`
}

// RegistryDoc is the registry part of AdminStatus.
type RegistryDoc struct {
	Apps         int    `json:"apps"`
	Instances    int    `json:"instances"`
	Version      uint64 `json:"version"`
	AppsHashcode string `json:"appsHashcode"`
	// Digest is anti-entropy's root digest (16 hex digits): two nodes
	// with the same one hold the same instances, every client-visible
	// field and write version alike. Omitted without anti-entropy.
	Digest        string `json:"digest,omitempty"`
	Registrations uint64 `json:"registrations"`
	Renewals      uint64 `json:"renewals"`
	Cancels       uint64 `json:"cancels"`
	Evictions     uint64 `json:"evictions"`
	// PersistentInstances are those whose lease never expires (metadata
	// muster.lease: persistent), included in Instances.
	PersistentInstances int `json:"persistentInstances"`
}

// XDSClient is one xDS stream open on the node (package xds fills it).
type XDSClient = report.XDSClient

// XDSWeight is an instance's endpoint weight as the node's xDS serves it.
type XDSWeight = report.XDSWeight

// PeerInfo is one peer as the dashboard and /admin/status show it.
type PeerInfo struct {
	Name            string `json:"name"`
	Zone            string `json:"zone"`
	URL             string `json:"url"`
	State           string `json:"state"` // memberlist's words: alive, suspect, dead, left; "static" for configured URLs
	QueueDepth      int    `json:"queueDepth"`
	LastBatchMillis int64  `json:"lastBatchMillis"`
	LastError       string `json:"lastError,omitempty"`
	// Anti-entropy with this peer. AntiEntropy is its state in one word:
	// AntiEntropyOff, or replication's AEPending, AEInSync, AEDivergent,
	// AEFailing (the last round failed: unknown, so not in sync) or
	// AEUnsupported (a Java Eureka server). InSync is true only in
	// AEInSync, and omitted when anti-entropy does not apply (off,
	// unsupported). LastAntiEntropy is when the last round that ran
	// through ended (omitted if none has yet); AntiEntropyError and
	// AntiEntropyErrorAt the last failed round's error and time, kept after
	// later good rounds. Repairs counts what this node took from the peer
	// since start (adopted, replaced or cancelled instances).
	AntiEntropy        string     `json:"antiEntropy,omitempty"`
	InSync             *bool      `json:"inSync,omitempty"`
	LastAntiEntropy    *time.Time `json:"lastAntiEntropy,omitempty"`
	AntiEntropyError   string     `json:"antiEntropyError,omitempty"`
	AntiEntropyErrorAt *time.Time `json:"antiEntropyErrorAt,omitempty"`
	Repairs            uint64     `json:"repairs"`
}

// AntiEntropyOff is PeerInfo.AntiEntropy on a node whose anti-entropy is
// turned off (muster.anti-entropy-interval-ms 0).
const AntiEntropyOff = "off"

// SyncLabel is the anti-entropy verdict as the console and the CLI show
// it, and whether it is good, bad or neither ("ok", "bad", "").
func (p PeerInfo) SyncLabel() (text, class string) {
	switch p.AntiEntropy {
	case replication.AEInSync:
		return "in sync", "ok"
	case replication.AEDivergent:
		return "not in sync", "bad"
	case replication.AEFailing:
		return "not in sync (round failed)", "bad"
	case replication.AEPending:
		return "pending", ""
	case replication.AEUnsupported:
		return "n/a (Eureka peer)", ""
	case AntiEntropyOff:
		return "n/a (anti-entropy off)", ""
	}
	// A node from before the state was reported.
	switch {
	case p.InSync == nil:
		return "n/a", ""
	case *p.InSync:
		return "in sync", "ok"
	}
	return "not in sync", "bad"
}

// Security is how the node is protected, as /admin/status and the
// dashboard report it.
type Security struct {
	Auth            bool   `json:"auth"`            // clients need HTTP Basic credentials
	TLS             bool   `json:"tls"`             // the API is served over HTTPS
	ClientAuth      string `json:"clientAuth"`      // TLS client certificates: none, want or need
	PeerAuth        bool   `json:"peerAuth"`        // peers sign their requests (cluster.peer-secret)
	GossipEncrypted bool   `json:"gossipEncrypted"` // memberlist traffic is encrypted (cluster.secret-key)
}

// Open tells whether anyone who reaches the port may change the registry:
// no credentials are asked for, and no client certificate either
// (server.ssl.client-auth need admits only holders of the CA's
// certificates).
func (s Security) Open() bool { return !s.Auth && !(s.TLS && s.ClientAuth == "need") }

// NodeInfo describes a node for the dashboard and /admin/status.
type NodeInfo struct {
	Name        string // node name (memberlist identity)
	Zone        string
	URL         string // advertised Eureka base URL
	Environment string // eureka.environment, a dashboard label
	Datacenter  string // eureka.datacenter, a dashboard label
	Version     string // Muster's version
}

package ops

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
)

// AdminRegistry is what /admin/status reads of the registry.
type AdminRegistry interface {
	SelfPreservationState() registry.SelfPreservation
	Snapshot() *registry.Snapshot
	Stats() registry.Stats
}

// AdminConfig is what the admin endpoints report on.
type AdminConfig struct {
	Registry AdminRegistry
	Node     NodeInfo
	Security Security
	// Peers lists the replication peers; nil means none.
	Peers func() []PeerInfo
	// Ready and ReadsAllowed are /readyz's two conditions; nil means
	// always.
	Ready, ReadsAllowed func() bool
	// Digests gives anti-entropy's root digest; nil: no anti-entropy.
	Digests interface{ RootDigest() uint64 }
	// HealthChecks reports the health checks; nil: off.
	HealthChecks func() *HealthChecks
	// Now is the clock of the uptime; nil means time.Now.
	Now func() time.Time
	// RemoteRegions lists the remote regions; nil means none.
	RemoteRegions func() []RemoteRegionInfo
}

// Admin serves /admin/status, /readyz and /livez.
type Admin struct {
	cfg     AdminConfig
	reg     AdminRegistry
	now     func() time.Time
	started time.Time
}

// NewAdmin builds the admin endpoints over cfg.Registry, which must be set.
func NewAdmin(cfg AdminConfig) *Admin {
	s := &Admin{cfg: cfg, reg: cfg.Registry, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	always := func() bool { return true }
	if s.cfg.Ready == nil {
		s.cfg.Ready = always
	}
	if s.cfg.ReadsAllowed == nil {
		s.cfg.ReadsAllowed = s.cfg.Ready
	}
	if s.cfg.Peers == nil {
		s.cfg.Peers = func() []PeerInfo { return nil }
	}
	s.started = s.now()
	return s
}

// Status is the body of /admin/status now.
func (s *Admin) Status() AdminStatus {
	sp := s.reg.SelfPreservationState()
	snap := s.reg.Snapshot()
	st := s.reg.Stats()
	peers := s.cfg.Peers()
	if peers == nil {
		peers = []PeerInfo{}
	}
	doc := AdminStatus{
		Node:           s.cfg.Node.Name,
		Zone:           s.cfg.Node.Zone,
		URL:            s.cfg.Node.URL,
		Version:        s.cfg.Node.Version,
		OpenForTraffic: s.cfg.Ready(),
		UptimeSeconds:  int64(s.now().Sub(s.started) / time.Second),
		SelfPreservation: SelfPreservationDoc{
			Enabled:                sp.Enabled,
			Active:                 sp.Active,
			WarmingUp:              sp.WarmingUp,
			LeaseExpirationEnabled: sp.LeaseExpirationEnabled,
			ExpectedRenewsPerMin:   sp.ExpectedRenewsPerMin,
			RenewsThreshold:        sp.RenewsThreshold,
			RenewsLastMin:          sp.RenewsLastMin,
			ArrivingRenewsPerMin:   sp.ArrivingRenewsPerMin,
			UnprovenRenewsPerMin:   sp.UnprovenRenewsPerMin,
		},
		Registry: RegistryDoc{
			Apps:          len(snap.Apps),
			Instances:     snap.Instances,
			Version:       snap.Version,
			AppsHashcode:  snap.Hashcode,
			Registrations: st.Registrations,
			Renewals:      st.Renewals,
			Cancels:       st.Cancels,
			Evictions:     st.Evictions,

			PersistentInstances: st.Persistent,
		},
		Peers:    peers,
		Security: s.cfg.Security,
	}
	if s.cfg.HealthChecks != nil {
		doc.HealthChecks = s.cfg.HealthChecks()
	}
	if s.cfg.RemoteRegions != nil {
		doc.RemoteRegions = s.cfg.RemoteRegions()
	}
	if s.cfg.Digests != nil {
		doc.Registry.Digest = fmt.Sprintf("%016x", s.cfg.Digests.RootDigest())
	}
	return doc
}

// ServeStatus answers GET /admin/status.
func (s *Admin) ServeStatus(c echo.Context) error {
	return c.JSONPretty(http.StatusOK, s.Status(), "  ")
}

// Readyz answers 200 once the node has opened for traffic and answers
// registry reads, so a load balancer sends nothing to a node that is still
// syncing or that could not reach the peers it knows.
func (s *Admin) Readyz(c echo.Context) error {
	switch {
	case !s.cfg.Ready():
		return c.String(http.StatusServiceUnavailable, "not ready: syncing the registry from peers\n")
	case !s.cfg.ReadsAllowed():
		return c.String(http.StatusServiceUnavailable, "not ready: opened without the registry (no peer had it, or none could be reached); refusing registry reads for a while\n")
	}
	return c.String(http.StatusOK, "ok\n")
}

// Livez answers 200 while the process serves.
func (s *Admin) Livez(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }

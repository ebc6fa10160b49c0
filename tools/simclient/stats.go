package simclient

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Stats is a snapshot of a fleet's counters (totals since New) and gauges.
// The JSON names are what tools/clients prints and serves on /stats.
type Stats struct {
	// Instances is the configured fleet size; Registered how many of them
	// are registered now (registered and not cancelled).
	Instances  int `json:"instances"`
	Registered int `json:"registered"`

	// Registrations and RegistrationFailures count register requests
	// answered 2xx (Eureka answers 204) and those that were not (no server
	// answered, or not with 2xx). Re-registrations after a 404 are counted
	// here too.
	Registrations        uint64 `json:"registrations"`
	RegistrationFailures uint64 `json:"registrationFailures"`
	// RegistrationRate is the initial registration phase's pace, in
	// successful registrations per second (0 until it is done).
	RegistrationRate float64 `json:"registrationRate"`

	// RenewalsOK counts heartbeats answered 200. RenewalsFailed counts
	// heartbeats that no server answered acceptably (after the retry on
	// the next server). ReRegistrations counts heartbeats answered 404,
	// each followed by a register (Eureka's "re-register" path).
	RenewalsOK      uint64 `json:"renewalsOk"`
	RenewalsFailed  uint64 `json:"renewalsFailed"`
	ReRegistrations uint64 `json:"reRegistrations"`

	// Failovers counts moves to the next server after a failed request;
	// ZoneReturns counts moves back to the first server, ZoneRetryInterval
	// after a failover.
	Failovers   uint64 `json:"failovers"`
	ZoneReturns uint64 `json:"zoneReturns"`

	// FullFetches and DeltaFetches count successful fetches of each kind;
	// ReconcileFetches counts the full fetches made because the view's
	// hashcode differed from the delta's apps__hashcode after applying it
	// (they are in FullFetches too). FetchFailures counts fetch rounds
	// that got no usable registry.
	FullFetches      uint64 `json:"fullFetches"`
	DeltaFetches     uint64 `json:"deltaFetches"`
	ReconcileFetches uint64 `json:"reconcileFetches"`
	FetchFailures    uint64 `json:"fetchFailures"`
	// EmptyRegistrySeen counts full fetches that returned no instance at
	// all after the fleet had seen a non-empty registry: a server that
	// lost its registry, or answered before it synced. It should stay 0.
	EmptyRegistrySeen uint64 `json:"emptyRegistrySeen"`
	// LastViewInstances is the number of instances in the fleet's view
	// after its last successful fetch; ViewHashcode is that view's apps
	// hashcode.
	LastViewInstances int    `json:"lastViewInstances"`
	ViewHashcode      string `json:"viewHashcode"`

	// Cancels counts cancels answered 200 on shutdown; CancelFailures the
	// others (no answer, 404, timeout).
	Cancels        uint64 `json:"cancels"`
	CancelFailures uint64 `json:"cancelFailures"`

	// CurrentServer is the server requests go to now, zone=url.
	CurrentServer string `json:"currentServer"`
}

// String is the one-line progress report of tools/clients.
func (s Stats) String() string {
	return fmt.Sprintf("registered %d/%d (failed %d), renewals ok %d failed %d, re-registrations %d, failovers %d, "+
		"fetches full %d delta %d reconcile %d failed %d, view %d, empty-registry %d, server %s",
		s.Registered, s.Instances, s.RegistrationFailures, s.RenewalsOK, s.RenewalsFailed, s.ReRegistrations, s.Failovers,
		s.FullFetches, s.DeltaFetches, s.ReconcileFetches, s.FetchFailures, s.LastViewInstances, s.EmptyRegistrySeen, s.CurrentServer)
}

// counters are the fleet's live figures; Stats copies them, and takes
// failovers, zone returns and fetch counts from the client package.
type counters struct {
	registrations, registrationFailures         atomic.Uint64
	renewalsOK, renewalsFailed, reRegistrations atomic.Uint64
	fetchFailures, emptyRegistrySeen            atomic.Uint64
	cancels, cancelFailures                     atomic.Uint64
	registered, lastViewInstances               atomic.Int64
	registrationRate                            atomic.Uint64 // math.Float64bits
	viewHashcode                                atomic.Pointer[string]
}

// Stats returns a snapshot of the fleet's figures. Safe for concurrent use.
func (f *Fleet) Stats() Stats {
	c := &f.stats
	api := f.api.Stats()
	srv := f.api.CurrentServer()
	s := Stats{
		Instances:            len(f.insts),
		Registered:           int(c.registered.Load()),
		Registrations:        c.registrations.Load(),
		RegistrationFailures: c.registrationFailures.Load(),
		RegistrationRate:     math.Float64frombits(c.registrationRate.Load()),
		RenewalsOK:           c.renewalsOK.Load(),
		RenewalsFailed:       c.renewalsFailed.Load(),
		ReRegistrations:      c.reRegistrations.Load(),
		Failovers:            api.Failovers,
		ZoneReturns:          api.ZoneReturns,
		FullFetches:          api.FullFetches,
		DeltaFetches:         api.DeltaFetches,
		ReconcileFetches:     api.ReconcileFetches,
		FetchFailures:        c.fetchFailures.Load(),
		EmptyRegistrySeen:    c.emptyRegistrySeen.Load(),
		LastViewInstances:    int(c.lastViewInstances.Load()),
		Cancels:              c.cancels.Load(),
		CancelFailures:       c.cancelFailures.Load(),
		CurrentServer:        srv.Zone + "=" + srv.URL,
	}
	if h := c.viewHashcode.Load(); h != nil {
		s.ViewHashcode = *h
	}
	return s
}

package registry

import "time"

// The start-up state (ARCHITECTURE.md decision 8): a node copies the
// registry from a peer (syncUp), then opens for traffic. A node that knew
// peers but reached none opens with what it has and refuses registry reads
// for a while (Eureka's wait-time-in-ms-when-sync-empty), so clients ask a
// peer that knows. Both run on the registry's clock, so tests move them.

// Opened reports whether OpenForTraffic has been called: syncUp is over.
func (r *Registry) Opened() bool { return r.opened.Load() }

// RefuseReadsFor makes ReadsAllowed false for d from now (by the
// registry's clock). Call it before OpenForTraffic when syncUp reached no
// peer.
func (r *Registry) RefuseReadsFor(d time.Duration) time.Time {
	until := r.now().Add(d)
	r.readsRefusedUntil.Store(until.UnixNano())
	return until
}

// ReadsAllowed reports whether registry reads (full, delta, app, VIP) may
// be answered: the node has opened and no refusal is running.
func (r *Registry) ReadsAllowed() bool {
	return r.opened.Load() && r.now().UnixNano() >= r.readsRefusedUntil.Load()
}

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

// RefuseReadsUntilRenewed makes ReadsAllowed false from now until every
// live client has had time to renew once, plus margin: the longest of
// ExpectedRenewalInterval and the renewal intervals instances declare
// (leaseInfo.renewalIntervalInSecs, at most MaxRenewalIntervalSecs), the
// cluster's own nodes (Config.ClusterNode) left out. An
// instance that registers while the refusal runs declaring a longer
// interval extends it, since clients like it may not have renewed yet,
// but never beyond limit from now: one client declaring an hour does not
// hold every read for an hour. Once reads are open, nothing closes them
// again. It returns the deadline known now. Call it, like RefuseReadsFor,
// before OpenForTraffic.
func (r *Registry) RefuseReadsUntilRenewed(margin, limit time.Duration) time.Time {
	now := r.now()
	interval := max(r.cfg.ExpectedRenewalInterval, time.Duration(r.longestDeclared.Load()))
	r.untilRenewedMargin.Store(int64(margin))
	r.untilRenewedLimit.Store(int64(limit))
	r.untilRenewedFrom.Store(now.UnixNano())
	until := now.Add(min(interval+margin, limit))
	r.readsRefusedUntil.Store(until.UnixNano())
	return until
}

// ReadsRefusedUntil is when the current refusal of reads ends (by the
// registry's clock); the zero time when none was set.
func (r *Registry) ReadsRefusedUntil() time.Time {
	if ns := r.readsRefusedUntil.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// LongestRenewalInterval is the longest renewal interval a client
// instance has declared to this registry (registered here or replicated)
// since it started, the cluster's own nodes (Config.ClusterNode) left
// out; 0 when none has.
func (r *Registry) LongestRenewalInterval() time.Duration {
	return time.Duration(r.longestDeclared.Load())
}

// noteRenewalInterval records the interval in declares and, while a
// RefuseReadsUntilRenewed refusal runs, extends it to cover that
// interval. The cluster's own nodes (Config.ClusterNode) are not clients
// the refusal waits for: their intervals are not noted.
func (r *Registry) noteRenewalInterval(in *Instance, now time.Time) {
	if in.RenewalIntervalSecs <= 0 || (r.cfg.ClusterNode != nil && r.cfg.ClusterNode(in)) {
		return
	}
	d := int64(time.Duration(in.RenewalIntervalSecs) * time.Second)
	for {
		cur := r.longestDeclared.Load()
		if d <= cur || r.longestDeclared.CompareAndSwap(cur, d) {
			break
		}
	}
	from := r.untilRenewedFrom.Load()
	if from == 0 {
		return
	}
	want := from + min(d+r.untilRenewedMargin.Load(), r.untilRenewedLimit.Load())
	for {
		until := r.readsRefusedUntil.Load()
		if now.UnixNano() >= until || want <= until {
			return // open already, or long enough
		}
		if r.readsRefusedUntil.CompareAndSwap(until, want) {
			return
		}
	}
}

// ReadsAllowed reports whether registry reads (full, delta, app, VIP) may
// be answered: the node has opened and no refusal is running.
func (r *Registry) ReadsAllowed() bool {
	return r.opened.Load() && r.now().UnixNano() >= r.readsRefusedUntil.Load()
}

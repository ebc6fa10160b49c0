package healthcheck

import (
	"sort"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/report"
)

// maxReported bounds the instances a report lists, probed and marked
// alike.
const maxReported = 500

func (st *state) report(key registry.InstanceKey) report.ProbeState {
	r := report.ProbeState{App: key.App, ID: key.ID, Mode: st.target.mode.String(), LastResult: st.lastResult,
		LastProbe: utcOrNil(st.lastAt), Since: utcOrNil(st.since), Failures: st.failures, Successes: st.successes}
	if st.target.refused == "" {
		r.Target = st.target.addr.String()
	}
	switch {
	case st.target.refused != "":
		r.State = "refused"
	case st.down && st.successes > 0:
		r.State = "recovering"
	case st.down:
		r.State = "down"
	case st.failures > 0:
		r.State = "failing"
	default:
		r.State = "up"
	}
	return r
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// Report is the checker's state for /admin/status and the console: its
// settings, the last round, the instances this node probes that are not
// plainly passing (failing, marked or not probed; at most 500, by app and
// id) and the instances marked DOWN by any node's health checks, as the
// registry holds them (at most 500).
func (c *Checker) Report() *report.HealthChecks {
	c.mu.Lock()
	last := c.last
	r := &report.HealthChecks{
		Enabled: c.cfg.Enabled, IntervalMillis: c.cfg.Interval.Milliseconds(), TimeoutMillis: c.cfg.Timeout.Milliseconds(),
		FailuresBeforeDown: c.cfg.FailuresBeforeDown, SuccessesBeforeUp: c.cfg.SuccessesBeforeUp,
		MaxDownPercent: c.cfg.MaxDownPercent, GuardedApps: append([]string{}, last.Guarded...),
		Marked: []report.MarkedInstance{}, Probes: []report.ProbeState{},
	}
	if c.opt.Members == nil {
		r.Ownership = "no gossip cluster: this node probes the instances whose clients register and renew through it"
	} else {
		r.Ownership = "rendezvous hash over the live cluster members: each instance is probed by one member"
	}
	for key, st := range c.states {
		ps := st.report(key)
		if ps.State == "up" {
			continue
		}
		if len(r.Probes) == maxReported {
			r.ProbesTruncated = true
			break
		}
		r.Probes = append(r.Probes, ps)
	}
	c.mu.Unlock()
	sort.Slice(r.Probes, func(i, j int) bool {
		a, b := r.Probes[i], r.Probes[j]
		return a.App < b.App || a.App == b.App && a.ID < b.ID
	})
	if !last.At.IsZero() {
		r.LastRound = &report.HealthCheckRound{At: last.At.UTC(), TookMillis: last.Took.Milliseconds(), Owned: last.Owned,
			Probed: last.Probed, Failed: last.Failed, Refused: last.Refused, Marked: last.Marked, Lifted: last.Lifted}
	}
	for _, app := range c.opt.Registry.Snapshot().Apps {
		for _, iv := range app.Instances {
			m := iv.Health
			if m == nil {
				continue
			}
			r.Marked = append(r.Marked, report.MarkedInstance{App: app.Name, ID: iv.ID(), Status: string(iv.Status),
				Reason: m.Reason, Since: time.UnixMilli(m.Since).UTC(), MarkedBy: m.By,
				ProbedBy: c.OwnerOf(registry.InstanceKey{App: app.Name, ID: iv.ID()})})
			if len(r.Marked) >= maxReported {
				return r
			}
		}
	}
	return r
}

// Probe returns this node's state of one instance, false when it does not
// probe it.
func (c *Checker) Probe(app, id string) (report.ProbeState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := registry.InstanceKey{App: app, ID: id}
	st := c.states[key]
	if st == nil {
		return report.ProbeState{}, false
	}
	return st.report(key), true
}

// ProbedBy names the node that probes the instance (OwnerOf).
func (c *Checker) ProbedBy(app, id string) string {
	return c.OwnerOf(registry.InstanceKey{App: app, ID: id})
}

// GuardedApps are the apps whose marks the guard held back in the last
// round, sorted.
func (c *Checker) GuardedApps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.last.Guarded...)
}

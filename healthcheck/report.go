package healthcheck

import (
	"sort"
	"time"

	"github.com/muster-registry/muster/registry"
)

// maxReported bounds the instances a Report lists.
const maxReported = 500

// Report is the checker's state for /admin/status and the console.
type Report struct {
	Node string
	// Ownership says who probes what: "rendezvous hash over N live
	// members" or, without a cluster, "instances whose clients talk to
	// this node".
	Ownership          string
	Interval, Timeout  time.Duration
	FailuresBeforeDown int
	SuccessesBeforeUp  int
	MaxDownPercent     int
	Last               RoundResult
	// Instances are those this node probes that are not plainly passing:
	// failing, marked or not probed (at most 500, by app and id).
	Instances []InstanceReport
	Truncated bool
}

// InstanceReport is one probed instance as this node sees it.
type InstanceReport struct {
	App, ID    string
	Mode       string
	Target     string // the dialled address, "" when refused
	State      string // "up", "failing", "down", "recovering" or "refused"
	LastResult string
	LastProbe  time.Time
	Since      time.Time
	Failures   int
	Successes  int
}

func (st *state) report(key registry.InstanceKey) InstanceReport {
	r := InstanceReport{App: key.App, ID: key.ID, Mode: st.target.mode.String(), LastResult: st.lastResult,
		LastProbe: st.lastAt, Since: st.since, Failures: st.failures, Successes: st.successes}
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

// Report returns the checker's state.
func (c *Checker) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Node: c.opt.Self, Interval: c.cfg.Interval, Timeout: c.cfg.Timeout,
		FailuresBeforeDown: c.cfg.FailuresBeforeDown, SuccessesBeforeUp: c.cfg.SuccessesBeforeUp,
		MaxDownPercent: c.cfg.MaxDownPercent, Last: c.last}
	r.Last.Verdicts = nil
	if c.opt.Members == nil {
		r.Ownership = "no gossip cluster: this node probes the instances whose clients register and renew through it"
	} else {
		r.Ownership = "rendezvous hash over the live cluster members: each instance is probed by one member"
	}
	for key, st := range c.states {
		ir := st.report(key)
		if ir.State == "up" {
			continue
		}
		if len(r.Instances) == maxReported {
			r.Truncated = true
			break
		}
		r.Instances = append(r.Instances, ir)
	}
	sort.Slice(r.Instances, func(i, j int) bool {
		a, b := r.Instances[i], r.Instances[j]
		return a.App < b.App || a.App == b.App && a.ID < b.ID
	})
	return r
}

// Probe returns this node's state of one instance, false when it does not
// probe it.
func (c *Checker) Probe(key registry.InstanceKey) (InstanceReport, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.states[key]
	if st == nil {
		return InstanceReport{}, false
	}
	return st.report(key), true
}

// GuardedApps are the apps whose marks the guard held back in the last
// round, sorted.
func (c *Checker) GuardedApps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.last.Guarded...)
}

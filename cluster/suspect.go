package cluster

import (
	"math"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Suspicion.
//
// memberlist v0.7.0 tells no delegate when a node becomes suspect or clears
// suspicion, and no exported method reveals a node's state: Node.State
// always reads StateAlive (hashicorp/memberlist#266, #293). So Muster
// rebuilds "suspect" from this node's own failure detector:
//
//   - memberlist logs "Suspect <name> has failed, no acks received" when its
//     probe of <name> fails, right before it marks <name> suspect;
//     memberlistWriter hands that line to suspect.
//   - A direct ack from <name> (pingDelegate) means it answers again, so it
//     is alive; memberlist clears its suspicion as soon as <name> refutes.
//   - memberlist ends a suspicion within its maximum suspicion timeout:
//     dead (NotifyLeave) or refuted. reconcileLocked therefore lists a node
//     still suspect after maxSuspicion as alive again.
//
// A crashed peer is probed by every node within one probe round (members ×
// ProbeInterval), well inside the suspicion timeout, so every node shows it
// suspect before dead. A peer only other nodes could not reach shows as
// alive here, which is this node's view.

const (
	suspectLogPrefix = "Suspect "
	suspectLogSuffix = " has failed, no acks received"
)

// suspectedNode extracts the node name from memberlist's "Suspect <name>
// has failed, no acks received" (memberlist: state.go probeNode), given
// without level and "memberlist: " prefixes.
func suspectedNode(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, suspectLogPrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suspectLogSuffix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}

// maxSuspicion bounds how long memberlist keeps a node suspect in a cluster
// of n nodes: SuspicionMaxTimeoutMult × SuspicionMult × max(1, log10(n)) ×
// ProbeInterval (memberlist: suspicion.go, util.go suspicionTimeout), plus
// one ProbeInterval for the refutation to arrive.
func maxSuspicion(mlc *memberlist.Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	base := time.Duration(float64(mlc.SuspicionMult) * scale * float64(mlc.ProbeInterval))
	return time.Duration(max(1, mlc.SuspicionMaxTimeoutMult))*base + mlc.ProbeInterval
}

// suspect lists an alive peer as suspect, as memberlist just did.
func (c *Cluster) suspect(name string, now time.Time) {
	c.mu.Lock()
	e, ok := c.members[name]
	if c.closed || !ok || e.State != StateAlive || e.Self {
		c.mu.Unlock()
		return
	}
	prev := e.Member
	e.State = StateSuspect
	e.suspectUntil = now.Add(maxSuspicion(c.cfg.Memberlist, len(c.members)))
	c.members[name] = e
	c.mu.Unlock()

	c.notify()
	c.logTransition(change{prev: prev, had: true, cur: e.Member})
}

// unsuspect lists a suspect peer as alive again.
func (c *Cluster) unsuspect(name string) {
	c.mu.Lock()
	e, ok := c.members[name]
	if c.closed || !ok || e.State != StateSuspect {
		c.mu.Unlock()
		return
	}
	prev := e.Member
	e.State = StateAlive
	e.suspectUntil = time.Time{}
	c.members[name] = e
	c.mu.Unlock()

	c.notify()
	c.logTransition(change{prev: prev, had: true, cur: e.Member})
}

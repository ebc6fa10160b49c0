package node

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
)

// newHealthChecker builds the node's health checker when
// muster.health-check.enabled (nil otherwise). Who probes what: with
// cluster.enabled, the live memberlist members share the apps by
// rendezvous hash; without gossip (static peers, or one node), each node
// probes the instances whose clients talk to it.
func (n *Node) newHealthChecker() (*healthcheck.Checker, error) {
	cfg := n.settings.HealthCheck
	if !cfg.Enabled {
		return nil, nil
	}
	cfg.Logger = n.log
	opt := healthcheck.Options{
		Registry: n.reg,
		Self:     n.name,
		Metrics:  n.metrics,
		OwnAddrs: n.ownAddrs,
		OwnPorts: n.ownPorts,
	}
	if n.settings.ClusterEnabled {
		opt.Members = n.liveMemberNames
	}
	return healthcheck.New(cfg, opt)
}

// runHealthChecks runs the checker's rounds; the node starts it once it
// has opened for traffic (before, the registry is still being copied from
// peers).
func (n *Node) runHealthChecks(ctx context.Context) {
	n.log.Info().Dur("interval", n.settings.HealthCheck.Interval).Msg("health checks on")
	n.health.Run(ctx)
}

// liveMemberNames are the members that are not dead or gone.
func (n *Node) liveMemberNames() []string {
	if n.cluster == nil {
		return nil
	}
	var out []string
	for _, m := range n.cluster.Members() {
		if m.State == cluster.StateDead || m.State == cluster.StateLeft {
			continue
		}
		out = append(out, m.Name)
	}
	return out
}

// ownAddrs are the host's addresses and the one the node advertises.
func (n *Node) ownAddrs() []netip.Addr {
	out := healthcheck.InterfaceAddrs()
	if a, err := netip.ParseAddr(n.ip); err == nil {
		out = append(out, a)
	}
	return out
}

// ownPorts are the ports the node listens on: API, management, DNS,
// gossip.
func (n *Node) ownPorts() []uint16 {
	var out []uint16
	add := func(addr string) {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if v, err := strconv.Atoi(p); err == nil && v > 0 && v < 65536 {
				out = append(out, uint16(v))
			}
		}
	}
	add(net.JoinHostPort("", strconv.Itoa(n.port)))
	if n.mgmtListener != nil {
		add(n.mgmtListener.Addr().String())
	}
	if n.dnsAddr != nil {
		add(n.dnsAddr.String())
	}
	add(n.GossipAddr())
	return out
}

// healthSource is the checker as /admin/status and the console read it.
type healthSource struct {
	n *Node
	c *healthcheck.Checker
}

var _ ops.HealthCheckSource = healthSource{}

func (h healthSource) Report() *ops.HealthChecks {
	r := h.c.Report()
	doc := &ops.HealthChecks{
		Enabled: true, Ownership: r.Ownership,
		IntervalMillis: r.Interval.Milliseconds(), TimeoutMillis: r.Timeout.Milliseconds(),
		FailuresBeforeDown: r.FailuresBeforeDown, SuccessesBeforeUp: r.SuccessesBeforeUp, MaxDownPercent: r.MaxDownPercent,
		GuardedApps: append([]string{}, r.Last.Guarded...), Marked: []ops.MarkedInstance{}, Probes: []ops.ProbeState{},
		ProbesTruncated: r.Truncated,
	}
	if !r.Last.At.IsZero() {
		doc.LastRound = &ops.HealthCheckRound{At: r.Last.At.UTC(), TookMillis: r.Last.Took.Milliseconds(), Owned: r.Last.Owned,
			Probed: r.Last.Probed, Failed: r.Last.Failed, Refused: r.Last.Refused, Marked: r.Last.Marked, Lifted: r.Last.Lifted}
	}
	for _, ir := range r.Instances {
		doc.Probes = append(doc.Probes, probeState(ir))
	}
	for _, app := range h.n.reg.Snapshot().Apps {
		for _, iv := range app.Instances {
			m := iv.Health
			if m == nil {
				continue
			}
			doc.Marked = append(doc.Marked, ops.MarkedInstance{App: app.Name, ID: iv.ID(), Status: string(iv.Status),
				Reason: m.Reason, Since: time.UnixMilli(m.Since).UTC(), MarkedBy: m.By,
				ProbedBy: h.c.OwnerOf(registry.InstanceKey{App: app.Name, ID: iv.ID()})})
			if len(doc.Marked) >= 500 {
				return doc
			}
		}
	}
	return doc
}

func (h healthSource) Probe(app, id string) (ops.ProbeState, bool) {
	ir, ok := h.c.Probe(registry.InstanceKey{App: app, ID: id})
	if !ok {
		return ops.ProbeState{}, false
	}
	return probeState(ir), true
}

func (h healthSource) GuardedApps() []string { return h.c.GuardedApps() }

func (h healthSource) ProbedBy(app, id string) string {
	return h.c.OwnerOf(registry.InstanceKey{App: app, ID: id})
}

func probeState(ir healthcheck.InstanceReport) ops.ProbeState {
	ps := ops.ProbeState{App: ir.App, ID: ir.ID, Mode: ir.Mode, Target: ir.Target, State: ir.State,
		LastResult: ir.LastResult, Failures: ir.Failures, Successes: ir.Successes}
	if !ir.LastProbe.IsZero() {
		t := ir.LastProbe.UTC()
		ps.LastProbe = &t
	}
	if !ir.Since.IsZero() {
		t := ir.Since.UTC()
		ps.Since = &t
	}
	return ps
}

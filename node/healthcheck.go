package node

import (
	"context"
	"net"
	"net/netip"
	"strconv"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/healthcheck"
)

// newHealthChecker builds the node's health checker. With
// muster.health-check.enabled off (the default) it probes only persistent
// instances, whose probes are their only liveness, and its rounds cost
// nothing while there are none. Who probes what: with
// cluster.enabled, the live memberlist members share the apps by
// rendezvous hash; without gossip (static peers, or one node), each node
// probes the instances whose clients talk to it.
func (n *Node) newHealthChecker() (*healthcheck.Checker, error) {
	cfg := n.settings.HealthCheck
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
	if n.settings.HealthCheck.Enabled {
		n.log.Info().Dur("interval", n.settings.HealthCheck.Interval).Msg("health checks on")
	} else {
		n.log.Info().Dur("interval", n.settings.HealthCheck.Interval).Msg("health checks on for persistent instances only (muster.health-check.enabled is off)")
	}
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

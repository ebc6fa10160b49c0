package node

import (
	"context"
	"net"
	"net/url"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/dns"
)

// newDNS builds the node's DNS interface when muster.dns.enabled (nil
// otherwise); started, it binds its port and serves.
func (n *Node) newDNS() (part, error) {
	cfg := n.dnsConfig()
	if !cfg.Enabled {
		return nil, nil
	}
	srv, err := dns.New(cfg, dns.Options{Registry: n.reg, Nodes: n.dnsNodes, Metrics: n.metrics, RemoteApp: n.remoteApp,
		OnAnswer: n.noteResolver})
	if err != nil {
		return nil, err
	}
	return &funcs{name: "dns",
		start: func(context.Context) error {
			if err := srv.Start(); err != nil {
				return err
			}
			n.dnsAddr = srv.Addr()
			n.log.Info().Str("addr", srv.Addr().String()).Str("domain", cfg.Domain).Msg("serving DNS")
			return nil
		},
		stop: func(context.Context) error {
			_ = srv.Shutdown()
			return nil
		}}, nil
}

// dnsConfig is muster.dns.* as the node serves it.
func (n *Node) dnsConfig() dns.Config {
	cfg := n.settings.DNS
	if sec := n.security.report(n.settings); len(cfg.AllowedCIDRs) == 0 && (sec.Auth || sec.ClientAuth == "need") {
		// DNS carries no credentials: once the API asks for them, only
		// loopback may read the registry over DNS unless told otherwise.
		cfg.AllowedCIDRs = dns.LoopbackOnly
	}
	return cfg
}

// dnsListen is the address the DNS interface serves (UDP and TCP on one
// port), or "" when muster.dns.enabled is off.
func (n *Node) dnsListen() string {
	if n.dnsAddr == nil {
		return ""
	}
	return n.dnsAddr.String()
}

// dnsNodes are the live nodes as DNS names them: cluster members that are
// not dead or gone, or this node alone without a cluster.
func (n *Node) dnsNodes() []dns.Node {
	if n.cluster == nil {
		return []dns.Node{dnsNode(n.name, n.url, n.ip, n.settings.Cluster.Zone)}
	}
	var out []dns.Node
	for _, m := range n.cluster.Members() {
		if m.State == cluster.StateDead || m.State == cluster.StateLeft {
			continue
		}
		out = append(out, dnsNode(m.Name, m.EurekaURL, m.Addr, m.Zone))
	}
	return out
}

func dnsNode(name, eurekaURL, fallbackIP, zone string) dns.Node {
	nd := dns.Node{Name: name, IP: fallbackIP, Zone: zone}
	if u, err := url.Parse(eurekaURL); err == nil && u.Hostname() != "" {
		nd.Host = u.Hostname()
		if net.ParseIP(nd.Host) != nil {
			nd.IP = nd.Host
		}
	}
	return nd
}

package node

import (
	"context"
	"crypto/tls"

	"github.com/muster-registry/muster/xds"
)

// newXDS builds the node's xDS server (n.xds) when muster.xds.enabled (nil
// otherwise); started, it binds its port. It serves nothing until the
// node opened for traffic and allows reads (Opened, readsAllowed), with
// the API port's TLS (the same reloading material) and users.
func (n *Node) newXDS() (part, error) {
	cfg := n.settings.XDS
	if !cfg.Enabled {
		return nil, nil
	}
	var tcfg *tls.Config
	if n.tls != nil {
		tcfg = n.tls.ServerConfig()
	}
	srv, err := xds.New(cfg, xds.Options{Registry: n.reg, Opened: n.opened, Ready: n.readsAllowed,
		Users: n.security.users, TLS: tcfg, Metrics: n.metrics, Logger: n.log, OnAck: n.noteXDSAck})
	if err != nil {
		return nil, err
	}
	n.xds = srv
	return &funcs{name: "xds",
		start: func(context.Context) error {
			if err := srv.Start(); err != nil {
				return err
			}
			n.log.Info().Str("addr", srv.Addr().String()).Bool("tls", tcfg != nil).Msg("serving xDS")
			return nil
		},
		stop: func(context.Context) error {
			srv.Shutdown()
			return nil
		}}, nil
}

// xdsListen is the address the xDS server serves, or "" when
// muster.xds.enabled is off.
func (n *Node) xdsListen() string {
	if n.xds == nil || n.xds.Addr() == nil {
		return ""
	}
	return n.xds.Addr().String()
}

// xdsClientList lists the xDS streams open on this node (nil when off).
func (n *Node) xdsClientList() []xds.Client {
	if n.xds == nil {
		return nil
	}
	return n.xds.Clients()
}

package node

import (
	"fmt"
	"net"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
)

// nodeSecurity is what the node's edges use to tell callers apart.
type nodeSecurity struct {
	users    *auth.Authenticator // nil: no client authentication
	signer   *auth.PeerSigner    // nil: no peer secret
	verifier *auth.PeerVerifier
}

func newNodeSecurity(s *settings.Settings) (*nodeSecurity, error) {
	sec := &nodeSecurity{}
	users, err := s.Users()
	if err != nil {
		return nil, err
	}
	if len(users) > 0 {
		if sec.users, err = auth.NewAuthenticator(users...); err != nil {
			return nil, err
		}
	}
	if s.PeerSecret != "" {
		name := s.ClusterNodeName
		if name == "" {
			name, _ = advertisedHost(s)
		}
		if sec.signer, err = auth.NewPeerSigner(s.PeerSecret, name, nil); err != nil {
			return nil, fmt.Errorf("setting cluster.peer-secret: %w", err)
		}
		if sec.verifier, err = auth.NewPeerVerifier(s.PeerSecret, s.PeerMaxClockSkew, 0); err != nil {
			return nil, fmt.Errorf("setting cluster.peer-secret: %w", err)
		}
	}
	return sec, nil
}

// sign is the request signer for replication, nil without a peer secret.
func (sec *nodeSecurity) sign() replication.RequestSigner {
	if sec.signer == nil {
		return nil
	}
	return sec.signer.Sign
}

// report is the security object of /admin/status.
func (sec *nodeSecurity) report(s *settings.Settings) httpapi.Security {
	clientAuth := "none"
	if s.TLSOn() {
		clientAuth = s.SSLClientAuth.String()
	}
	return httpapi.Security{
		Auth:            sec.users != nil,
		TLS:             s.TLSOn(),
		ClientAuth:      clientAuth,
		PeerAuth:        sec.verifier != nil,
		GossipEncrypted: s.ClusterEnabled && s.ClusterSecretKey != "",
	}
}

// warnIfOpen logs one warning at start-up when the node can be changed by
// anyone on the network: the HTTP API listens beyond loopback with no
// authentication, or memberlist gossips beyond loopback with no key (any
// host that reaches the gossip port can join and is then trusted as a
// replication peer). gossiping says memberlist runs (it may be off though
// cluster.enabled is: a host with no private address and nothing asking).
func warnIfOpen(log zerolog.Logger, s *settings.Settings, gossiping bool, httpAddr net.Addr, sec httpapi.Security) {
	var open []string
	if sec.Open() && !isLoopbackAddr(httpAddr.String()) {
		open = append(open, fmt.Sprintf("the HTTP API listens on %s with no authentication: anyone who reaches it can register, cancel or take instances out of service (set spring.security.user.name and spring.security.user.password)", httpAddr))
	}
	if gossiping && s.ClusterSecretKey == "" && !isLoopbackAddr(net.JoinHostPort(s.Cluster.BindAddr, "0")) {
		open = append(open, fmt.Sprintf("the cluster gossips on %s with no key: any host that reaches the gossip port can join and receive every change (set cluster.secret-key)", s.Cluster.BindAddr))
	}
	if len(open) == 0 {
		return
	}
	log.Warn().Strs("open", open).Msg("this registry is open to anyone who can reach it; see docs/security.md")
}

// isLoopbackAddr tells whether host:port binds loopback only. An empty or
// unspecified host (every interface) is not loopback.
func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

package node

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/replication"
)

// userSettings is one muster.auth.users.<name> entry as configured.
type userSettings struct {
	Password string
	Role     string
	Apps     []string
	hasApps  bool
}

// applyAuthUser reads muster.auth.users.<name>.<field>. Values are never
// repeated in errors: one of them is a password.
func (s *Settings) applyAuthUser(suffix, raw string) error {
	name, field, ok := cutLast(suffix, '.')
	if !ok || name == "" {
		return fmt.Errorf("unknown setting %q: want %s<name>.password, .role or .apps", authUsersPrefix+suffix, authUsersPrefix)
	}
	u := s.AuthUsers[name]
	if u == nil {
		u = &userSettings{}
		s.AuthUsers[name] = u
	}
	switch CanonicalKey(field) {
	case "password":
		u.Password = raw
	case "role":
		u.Role = strings.TrimSpace(raw)
	case "apps":
		u.Apps, u.hasApps = splitList(raw), true
	default:
		return fmt.Errorf("unknown setting %q: want %s%s.password, .role or .apps", authUsersPrefix+suffix, authUsersPrefix, name)
	}
	return nil
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// authOn tells whether any user is configured: then every route but the
// probes needs credentials.
func (s *Settings) authOn() bool {
	return s.SpringUserName != "" || s.SpringUserPassword != "" || len(s.AuthUsers) > 0
}

// validateSecurity checks the security keys; every error names the key.
func (s *Settings) validateSecurity() error {
	if _, err := s.users(); err != nil {
		return err
	}
	if s.PeerSecret != "" && len(s.PeerSecret) < auth.MinPeerSecretLen {
		return fmt.Errorf("setting cluster.peer-secret: must be at least %d characters (e.g. openssl rand -base64 32)", auth.MinPeerSecretLen)
	}
	if s.authOn() && s.ClusterEnabled && s.PeerSecret == "" {
		return fmt.Errorf("setting cluster.peer-secret is required when authentication is on (spring.security.user.* or muster.auth.users.*) " +
			"and cluster.enabled is true: without it any host that reaches the port could replicate into this node. " +
			"Set the same random secret (16+ characters, e.g. openssl rand -base64 32) on every node, or cluster.enabled=false")
	}
	return nil
}

// users builds the configured users: the spring.security.user as admin and
// every muster.auth.users entry.
func (s *Settings) users() ([]*auth.User, error) {
	var out []*auth.User
	switch {
	case s.SpringUserName != "" && s.SpringUserPassword != "":
		u, err := auth.NewUser(s.SpringUserName, s.SpringUserPassword, auth.RoleAdmin, nil)
		if err != nil {
			return nil, fmt.Errorf("setting spring.security.user.password: %w", err)
		}
		out = append(out, u)
	case s.SpringUserName != "":
		return nil, fmt.Errorf("setting spring.security.user.password is empty: set it with spring.security.user.name, or neither")
	case s.SpringUserPassword != "":
		return nil, fmt.Errorf("setting spring.security.user.name is empty: set it with spring.security.user.password, or neither")
	}
	names := make([]string, 0, len(s.AuthUsers))
	for name := range s.AuthUsers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		us := s.AuthUsers[name]
		key := authUsersPrefix + name
		if name == s.SpringUserName {
			return nil, fmt.Errorf("setting %s: %s is already spring.security.user.name", key, name)
		}
		if us.Password == "" {
			return nil, fmt.Errorf("setting %s.password is missing or empty", key)
		}
		if us.Role == "" {
			return nil, fmt.Errorf("setting %s.role is missing: want read, write or admin", key)
		}
		role, err := auth.ParseRole(us.Role)
		if err != nil {
			return nil, fmt.Errorf("setting %s.role = %q: want read, write or admin", key, us.Role)
		}
		if us.hasApps && role != auth.RoleWrite {
			return nil, fmt.Errorf("setting %s.apps: an apps list only limits a write user, and %s is %s", key, name, role)
		}
		u, err := auth.NewUser(name, us.Password, role, us.Apps)
		if err != nil {
			return nil, fmt.Errorf("setting %s.password: %w", key, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// nodeSecurity is what the node's edges use to tell callers apart.
type nodeSecurity struct {
	users    *auth.Authenticator // nil: no client authentication
	signer   *auth.PeerSigner    // nil: no peer secret
	verifier *auth.PeerVerifier
}

func newNodeSecurity(s *Settings) (*nodeSecurity, error) {
	sec := &nodeSecurity{}
	users, err := s.users()
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
func (sec *nodeSecurity) report(s *Settings) httpapi.Security {
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
func warnIfOpen(log zerolog.Logger, s *Settings, gossiping bool, httpAddr net.Addr, sec httpapi.Security) {
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

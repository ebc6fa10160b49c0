package settings

import (
	"fmt"
	"sort"
	"strings"

	"github.com/muster-registry/muster/auth"
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

// AuthOn tells whether any user is configured: then every route but the
// probes needs credentials.
func (s *Settings) AuthOn() bool {
	return s.SpringUserName != "" || s.SpringUserPassword != "" || len(s.AuthUsers) > 0
}

// validateSecurity checks the security keys; every error names the key.
func (s *Settings) validateSecurity() error {
	if _, err := s.Users(); err != nil {
		return err
	}
	if s.PeerSecret != "" && len(s.PeerSecret) < auth.MinPeerSecretLen {
		return fmt.Errorf("setting cluster.peer-secret: must be at least %d characters (e.g. openssl rand -base64 32)", auth.MinPeerSecretLen)
	}
	if s.AuthOn() && s.ClusterEnabled && s.PeerSecret == "" {
		return fmt.Errorf("setting cluster.peer-secret is required when authentication is on (spring.security.user.* or muster.auth.users.*) " +
			"and cluster.enabled is true: without it any host that reaches the port could replicate into this node. " +
			"Set the same random secret (16+ characters, e.g. openssl rand -base64 32) on every node, or cluster.enabled=false")
	}
	return nil
}

// Users builds the configured users: the spring.security.user as admin and
// every muster.auth.users entry.
func (s *Settings) Users() ([]*auth.User, error) {
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

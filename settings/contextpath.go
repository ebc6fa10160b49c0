package settings

import "strings"

// A Spring server's context path (server.servlet.context-path, Boot 1.x
// server.context-path) moves everything it serves under the path; its
// clients' service URLs say http://host:port/<path>/eureka/. Muster does
// the same (httpapi.Config.ContextPath), keeps /readyz and /livez at the
// root too for the platform's probes, and puts the path into every URL the
// node gives out: its Eureka URL (gossiped to peers, matched against
// static peers) and its self-registration's home, status and health URLs.

// contextPathKey reads a context path as Spring Boot cleans it: a trailing
// / is dropped, so / is the root. httpapi's Validate refuses the rest.
func contextPathKey(key, help string) setting {
	return bind(key, help, func(s *Settings) *string { return &s.HTTP.ContextPath },
		func(raw string) (string, error) { return strings.TrimRight(raw, "/"), nil },
		func(v string) string { return v })
}

// ContextPath is the path the node serves under ("" for the root).
func (s *Settings) ContextPath() string { return s.HTTP.ContextPath }

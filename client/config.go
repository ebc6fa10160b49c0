package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/redact"
)

// DefaultZone is the zone of a server or client that names none (Eureka's
// "defaultZone").
const DefaultZone = "default"

// Server is one Eureka server: its zone and its base URL, e.g.
// http://node-a:8761/eureka/ (a trailing "/" is added when missing).
// Request paths such as "apps/ORDERS" are appended to the URL. A URL with
// user information, http://user:pass@node-a:8761/eureka/, makes every
// request to that server carry HTTP basic auth with those credentials; they
// never appear in errors or logs.
type Server struct {
	Zone, URL string
}

// String is "zone=url", the password in the URL, if any, redacted.
func (s Server) String() string { return s.Zone + "=" + s.Redacted() }

// Redacted is the URL with its password, if any, replaced by "xxxxx": the
// form for logs, errors and reports.
func (s Server) Redacted() string { return redact.URL(s.URL) }

// Validate reports whether the URL can be used: http or https, with a
// host.
func (s Server) Validate() error {
	_, err := parseServer(s)
	return err
}

// ParseServers reads a comma-separated server list, each entry "zone=url"
// or a bare url (zone DefaultZone), as tools/clients --servers and
// eureka.client.service-url.<zone> give them:
//
//	a=http://node-a:8761/eureka/,b=http://node-b:8761/eureka/
//
// Blanks around entries, zones and URLs are ignored, an '=' after the
// first '/' belongs to the URL, and a URL gets a trailing "/" if it lacks
// one. An empty zone or a URL that Validate refuses is an error.
func ParseServers(list string) ([]Server, error) {
	var out []Server
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		srv := Server{Zone: DefaultZone, URL: item}
		if zone, rest, ok := strings.Cut(item, "="); ok && !strings.Contains(zone, "/") {
			srv = Server{Zone: strings.TrimSpace(zone), URL: strings.TrimSpace(rest)}
			if srv.Zone == "" {
				return nil, fmt.Errorf("client: server %q: empty zone", redact.URL(item))
			}
		}
		if !strings.HasSuffix(srv.URL, "/") {
			srv.URL += "/"
		}
		if err := srv.Validate(); err != nil {
			return nil, err
		}
		out = append(out, srv)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("client: no servers in %q", redact.URL(list))
	}
	return out, nil
}

// Config describes a client. Start from DefaultConfig.
type Config struct {
	// Servers are the Eureka (or Muster) servers, tried in zone order:
	// those of Zone first, in the given order, then the others, in the
	// given order. A request that fails with a network error or a status
	// that says the server cannot serve it (5xx, 403 on a read) moves the
	// client to the next server, and the client stays on a server that
	// works. At least one.
	Servers []Server
	// Zone is the client's own zone; it orders Servers. Default
	// DefaultZone.
	Zone string

	// RequestTimeout bounds one HTTP request, reading the reply included;
	// a held watch request gets the watch wait on top. The Java client's
	// read timeout is 8 s. Default 10 s.
	RequestTimeout time.Duration
	// ZoneRetryInterval is how long after a failover the client moves back
	// to its first server (the first of its own zone), so that clients
	// return to their zone's node once it is back; if it is still down, the
	// next request fails over again. The Java client gets this by
	// reconnecting its session every 20 min
	// (SessionedEurekaHttpClient.java). 0 disables it. Default 5 min.
	ZoneRetryInterval time.Duration

	// WatchWait is how long a watch asks a server that supports blocking
	// fetches to hold a request when nothing changed (the wait query
	// parameter; the server clamps it to its own maximum). Longer means
	// fewer requests while idle; a change is delivered at once either way.
	// Default 30 s.
	WatchWait time.Duration
	// PollInterval is how often a watch polls a server that does not
	// support blocking fetches (a plain Eureka server), and so how stale
	// its view can be there. Eureka's
	// eureka.client.registry-fetch-interval-seconds is 30 s. Default 30 s.
	PollInterval time.Duration
	// RetryBackoff is the first pause after a request that no server
	// answered, doubling on each further failure up to MaxRetryBackoff.
	// It applies to heartbeats (which otherwise wait a renewal interval),
	// the first registration and watches. Default 1 s.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps RetryBackoff's doubling. Default 30 s.
	MaxRetryBackoff time.Duration

	// HTTPClient sends every request. nil means a client with keep-alive
	// and a 5 s connect timeout. Either way each request is bounded by
	// RequestTimeout through its context. A given client should not follow
	// redirects (Eureka's replies never redirect).
	HTTPClient *http.Client
	// Logger receives failovers, re-registrations and failed heartbeats
	// (Info and Warn); per-request details go to Debug. The zero value logs
	// nothing.
	Logger zerolog.Logger
	// Clock drives heartbeats, polling, backoff and the zone return, and
	// stamps lastDirtyTimestamp. nil means the real clock; tests pass a
	// manual one so that no test waits on a real timer.
	Clock Clock
}

// DefaultConfig returns a client of a local server with Eureka's timings.
func DefaultConfig() Config {
	return Config{
		Servers:           []Server{{Zone: DefaultZone, URL: "http://127.0.0.1:8761/eureka/"}},
		Zone:              DefaultZone,
		RequestTimeout:    10 * time.Second, // a full fetch of a large registry takes a while
		ZoneRetryInterval: 5 * time.Minute,  // Java: 20 min; shorter returns sooner to the own zone
		WatchWait:         30 * time.Second, // one held request per watch per 30 s when idle
		PollInterval:      30 * time.Second, // Eureka's registry fetch interval
		RetryBackoff:      time.Second,
		MaxRetryBackoff:   30 * time.Second,
	}
}

// Validate reports the first setting that cannot work, with its value.
func (c Config) Validate() error {
	if len(c.Servers) == 0 {
		return errors.New("client: Servers must list at least one server")
	}
	for _, s := range c.Servers {
		if _, err := parseServer(s); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RequestTimeout", c.RequestTimeout}, {"WatchWait", c.WatchWait}, {"PollInterval", c.PollInterval},
		{"RetryBackoff", c.RetryBackoff}, {"MaxRetryBackoff", c.MaxRetryBackoff},
	} {
		if d.v <= 0 {
			return fmt.Errorf("client: %s must be positive, got %s", d.name, d.v)
		}
	}
	if c.ZoneRetryInterval < 0 {
		return fmt.Errorf("client: ZoneRetryInterval must not be negative, got %s", c.ZoneRetryInterval)
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		return fmt.Errorf("client: MaxRetryBackoff (%s) must not be below RetryBackoff (%s)", c.MaxRetryBackoff, c.RetryBackoff)
	}
	return nil
}

// server is a Server ready for requests: the base URL without credentials,
// which go into a basic auth header instead.
type server struct {
	zone     string
	base     string // ends in "/", no user information
	user     string
	password string
	auth     bool
}

func parseServer(s Server) (server, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		// url's error quotes the URL, credentials included: leave it out.
		return server{}, fmt.Errorf("client: server URL %s does not parse", redact.URL(s.URL))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return server{}, fmt.Errorf("client: server URL %s: want http(s)://[user:password@]host[:port]/path/", redact.URL(s.URL))
	}
	srv := server{zone: s.Zone}
	if srv.zone == "" {
		srv.zone = DefaultZone
	}
	if u.User != nil {
		srv.user = u.User.Username()
		srv.password, _ = u.User.Password()
		srv.auth = true
		u.User = nil
	}
	u.RawQuery, u.Fragment = "", ""
	srv.base = u.String()
	if !strings.HasSuffix(srv.base, "/") {
		srv.base += "/"
	}
	return srv, nil
}

package simclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/client"
)

// DefaultZone is the zone of a server given without one, and of a fleet
// that names none (Eureka's "defaultZone").
const DefaultZone = client.DefaultZone

// Server is one Eureka server a fleet talks to: its zone and its base URL
// (ending in "/", e.g. http://node-a:8761/eureka/), to which request paths
// such as "apps/ORDERS" are appended. Credentials in the URL
// (https://user:pass@node-a:8761/eureka/) are sent as HTTP Basic, as
// Spring's client does; Redacted is the form for logs, errors and /stats.
type Server = client.Server

// Config describes a fleet. Start from DefaultConfig.
type Config struct {
	// Servers are the Eureka servers, tried in zone order: those of Zone
	// first, in the given order, then the others, in the given order (see
	// doc.go, "Failover"). At least one.
	Servers []Server
	// Zone is the fleet's own zone: it orders Servers and is written into
	// every instance's metadata as "zone" (what Spring Cloud's client
	// uses for zone affinity). Default "default".
	Zone string

	// Instances is the number of simulated instances; 0 makes a fleet that
	// only fetches (an observer). Default 100.
	Instances int
	// Apps is the number of applications the instances are spread over,
	// round-robin: instance i belongs to APP-<i mod Apps>. At least 1 and
	// at most Instances (when Instances > 0). Default 10.
	Apps int
	// IDPrefix starts every instance id and host name,
	// <prefix>-<app>-<n> (e.g. grp1-app-03-7), so several fleets can
	// share a cluster; lower-case letters, digits and '-'. Default "sim".
	IDPrefix string

	// RenewalInterval is how often each instance renews its lease (and
	// leaseInfo.renewalIntervalInSecs, rounded to whole seconds, at least
	// 1). The instances' phases are spread evenly over it. Eureka's
	// eureka.instance.lease-renewal-interval-in-seconds, default 30 s.
	RenewalInterval time.Duration
	// LeaseDuration is leaseInfo.durationInSecs (whole seconds, at least
	// 1): how long the server keeps an instance that stopped renewing.
	// eureka.instance.lease-expiration-duration-in-seconds, default 90 s.
	LeaseDuration time.Duration
	// FetchInterval is how often the fleet fetches the registry (delta,
	// full when needed). eureka.client.registry-fetch-interval-seconds,
	// default 30 s.
	FetchInterval time.Duration
	// FetchDisabled turns fetching off (eureka.client.fetch-registry=false):
	// the fleet only registers, renews and cancels. Default false.
	FetchDisabled bool

	// RequestTimeout bounds one HTTP request, reading the reply included;
	// a full fetch of a large registry needs more than a heartbeat. The
	// Java client's read timeout is 8 s. Default 5 s.
	RequestTimeout time.Duration
	// ConnectTimeout bounds connecting to a server (only for the client
	// New builds; an injected HTTPClient keeps its own). The Java client's
	// default is 5 s; 2 s makes failover from a dead node quicker.
	// Default 2 s.
	ConnectTimeout time.Duration
	// ZoneRetryInterval is how long after a failover the fleet moves back
	// to its first server (the first of its own zone), so that a zone's
	// clients return to their own node once it is back
	// (client.Config.ZoneRetryInterval). The Java client gets the same
	// effect by dropping its session every
	// eureka.client.transport.sessioned-client-reconnect-interval-seconds
	// (20 min, randomised; SessionedEurekaHttpClient.java); a short value
	// suits chaos runs. If the first server is still down the next request
	// fails over again (one more failover counted). 0 disables it.
	// Default 60 s.
	ZoneRetryInterval time.Duration
	// CancelTimeout bounds cancelling every instance when Run's context
	// ends. Keep it below the container's stop grace period (Docker's
	// default is 10 s), or the process is killed mid-way. Default 8 s.
	CancelTimeout time.Duration
	// Workers is how many requests the fleet has in flight at most: the
	// size of the pool that registers, renews and cancels. 10 000
	// instances at 30 s are 333 renewals/s, a few ms each; more workers
	// only help while a server is slow to answer. Default 64.
	Workers int

	// Logger receives state transitions (registration phase done, server
	// changes, empty registry seen); per-request failures go to Debug. The
	// zero value logs nothing.
	Logger zerolog.Logger
	// Now is the clock for wire timestamps (lastDirtyTimestamp,
	// lastUpdatedTimestamp) and for the return to the own zone after
	// ZoneRetryInterval. nil means time.Now. Scheduling uses real timers
	// regardless.
	Now func() time.Time
	// TLS configures https servers for the client New builds (the CA to
	// verify them against, a client certificate); nil means Go's defaults.
	TLS *tls.Config
	// HTTPClient sends every request. nil means a client New builds: keep-
	// alive, ConnectTimeout, Workers idle connections per server. Either
	// way each request is bounded by RequestTimeout through its context.
	HTTPClient *http.Client
}

// DefaultConfig returns a fleet of 100 instances over 10 apps talking to a
// local node, with the Java client's intervals.
func DefaultConfig() Config {
	return Config{
		Servers:           []Server{{Zone: DefaultZone, URL: "http://127.0.0.1:8761/eureka/"}},
		Zone:              DefaultZone,
		Instances:         100,              // 10 per app
		Apps:              10,               // APP-00 … APP-09
		IDPrefix:          "sim",            // sim-app-00-0 …
		RenewalInterval:   30 * time.Second, // Eureka's heartbeat
		LeaseDuration:     90 * time.Second, // Eureka's lease
		FetchInterval:     30 * time.Second, // Eureka's registry fetch
		RequestTimeout:    5 * time.Second,  // per request, reply read included
		ConnectTimeout:    2 * time.Second,  // fail over from a dead node quickly
		ZoneRetryInterval: 60 * time.Second, // back to the own zone's node
		CancelTimeout:     8 * time.Second,  // below Docker's 10 s stop grace period
		Workers:           64,               // requests in flight at most
	}
}

// Validate reports the first bad setting, with its value.
func (c Config) Validate() error {
	switch {
	case len(c.Servers) == 0:
		return errors.New("simclient: no servers")
	case c.Instances < 0:
		return fmt.Errorf("simclient: Instances (%d) must not be negative", c.Instances)
	case c.Instances > 0 && (c.Apps < 1 || c.Apps > c.Instances):
		return fmt.Errorf("simclient: Apps (%d) must be between 1 and Instances (%d)", c.Apps, c.Instances)
	case c.RenewalInterval <= 0:
		return fmt.Errorf("simclient: RenewalInterval (%s) must be positive", c.RenewalInterval)
	case c.LeaseDuration <= 0:
		return fmt.Errorf("simclient: LeaseDuration (%s) must be positive", c.LeaseDuration)
	case !c.FetchDisabled && c.FetchInterval <= 0:
		return fmt.Errorf("simclient: FetchInterval (%s) must be positive", c.FetchInterval)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("simclient: RequestTimeout (%s) must be positive", c.RequestTimeout)
	case c.HTTPClient == nil && c.ConnectTimeout <= 0:
		return fmt.Errorf("simclient: ConnectTimeout (%s) must be positive", c.ConnectTimeout)
	case c.ZoneRetryInterval < 0:
		return fmt.Errorf("simclient: ZoneRetryInterval (%s) must not be negative", c.ZoneRetryInterval)
	case c.CancelTimeout <= 0:
		return fmt.Errorf("simclient: CancelTimeout (%s) must be positive", c.CancelTimeout)
	case c.Workers < 1:
		return fmt.Errorf("simclient: Workers (%d) must be at least 1", c.Workers)
	}
	if !validPrefix(c.IDPrefix) {
		return fmt.Errorf("simclient: IDPrefix %q must be lower-case letters, digits and '-'", c.IDPrefix)
	}
	for _, s := range c.Servers {
		if err := checkServerURL(s); err != nil {
			return err
		}
	}
	return nil
}

func validPrefix(p string) bool {
	if p == "" {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ParseServers reads a comma-separated server list, each entry zone=url or
// a bare url (zone "default"), as the --servers flag takes it
// (client.ParseServers).
func ParseServers(list string) ([]Server, error) { return client.ParseServers(list) }

func checkServerURL(s Server) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if u, _ := url.Parse(s.URL); !strings.HasSuffix(u.Path, "/") {
		return fmt.Errorf("simclient: server URL %q must end in \"/\"", s.Redacted())
	}
	return nil
}

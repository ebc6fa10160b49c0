package client

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/clock"
	"github.com/muster-registry/muster/registry/wire"
)

// ErrClosed is returned by a Client's methods after Close.
var ErrClosed = errors.New("client: closed")

// Client talks to a cluster of Eureka or Muster servers: it registers
// instances and keeps them alive (Register), fetches the registry (Fetch)
// and watches applications (Watch), failing over between servers. One
// Client serves a whole process; it is safe for concurrent use.
type Client struct {
	cfg     Config
	http    *http.Client
	ownHTTP bool
	servers *serverSet
	clock   Clock
	log     zerolog.Logger
	stats   counters

	// regMu guards regs and closed.
	regMu  sync.Mutex
	regs   map[*Registration]struct{}
	closed bool

	// fetchMu serialises Fetch and guards view.
	fetchMu sync.Mutex
	view    *wire.Copy[Instance]
}

// New checks cfg and builds a client. It sends nothing and starts no
// goroutine: Register and Watch do.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Zone == "" {
		cfg.Zone = DefaultZone
	}
	list := make([]server, len(cfg.Servers))
	for i, s := range cfg.Servers {
		list[i], _ = parseServer(s) // Validate parsed them already
	}
	c := &Client{
		cfg:     cfg,
		http:    cfg.HTTPClient,
		servers: &serverSet{list: orderServers(list, cfg.Zone), zoneRetry: cfg.ZoneRetryInterval},
		clock:   cfg.Clock,
		log:     cfg.Logger.With().Str("component", "client").Logger(),
		regs:    map[*Registration]struct{}{},
		view:    newView(),
	}
	if c.http == nil {
		c.http, c.ownHTTP = newHTTPClient(), true
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	return c, nil
}

// Close cancels every registration that is still open (see
// Registration.Close) and releases idle connections. Watches end with
// their contexts, not here. Close returns the cancellations' errors, and
// makes later calls of Register and Watch fail with ErrClosed.
func (c *Client) Close() error {
	c.regMu.Lock()
	c.closed = true
	regs := make([]*Registration, 0, len(c.regs))
	for r := range c.regs {
		regs = append(regs, r)
	}
	c.regMu.Unlock()
	var errs []error
	for _, r := range regs {
		errs = append(errs, r.Close())
	}
	if c.ownHTTP {
		c.http.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// Stats are the client's counters since New.
type Stats struct {
	Registrations     uint64 // accepted registrations, re-registrations included
	ReRegistrations   uint64 // registrations after a heartbeat was answered 404
	Heartbeats        uint64 // accepted heartbeats
	HeartbeatFailures uint64 // heartbeats no server answered
	Cancels           uint64 // accepted cancels
	Failovers         uint64 // moves to the next server after a failure
	ZoneReturns       uint64 // moves back to the first server after ZoneRetryInterval
	FullFetches       uint64 // full registry fetches
	DeltaFetches      uint64 // delta fetches applied
	ReconcileFetches  uint64 // full fetches because a delta's hashcode did not match
	WatchHeld         uint64 // watch requests that asked the server to hold them (index and wait)
	WatchPolls        uint64 // watch requests without (plain polls)
}

type counters struct {
	registrations, reRegistrations, heartbeats, heartbeatFailures, cancels atomic.Uint64
	failovers, zoneReturns                                                 atomic.Uint64
	fullFetches, deltaFetches, reconcileFetches                            atomic.Uint64
	watchHeld, watchPolls                                                  atomic.Uint64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Registrations: s.registrations.Load(), ReRegistrations: s.reRegistrations.Load(),
		Heartbeats: s.heartbeats.Load(), HeartbeatFailures: s.heartbeatFailures.Load(), Cancels: s.cancels.Load(),
		Failovers: s.failovers.Load(), ZoneReturns: s.zoneReturns.Load(),
		FullFetches: s.fullFetches.Load(), DeltaFetches: s.deltaFetches.Load(), ReconcileFetches: s.reconcileFetches.Load(),
		WatchHeld: s.watchHeld.Load(), WatchPolls: s.watchPolls.Load(),
	}
}

// CurrentServer returns the server requests go to now: its zone and its
// base URL, without credentials.
func (c *Client) CurrentServer() Server {
	s := c.servers.list[c.servers.cur.Load()]
	return Server{Zone: s.zone, URL: s.base}
}

func (c *Client) isClosed() bool {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return c.closed
}

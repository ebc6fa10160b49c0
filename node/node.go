package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/settings"
	"github.com/muster-registry/muster/tlsconfig"
	"github.com/muster-registry/muster/xds"
)

// Version is set at build time with
// -ldflags "-X github.com/muster-registry/muster/node.Version=…".
var Version = "dev"

// Options are knobs that tests and the benchmark turn and users do not.
type Options struct {
	// Memberlist replaces the memberlist base config (tests use
	// memberlist.DefaultLocalConfig for fast failure detection).
	Memberlist *memberlist.Config
	// TLSReload is how often the TLS files are looked at (0: 10 s).
	TLSReload time.Duration
	// Now is the registry's clock (nil: time.Now); tests move the
	// start-up refusals with a registrytest.Clock.
	Now func() time.Time
	// InterfaceAddrs lists the host's addresses for gossip's advertise
	// address (nil: net.InterfaceAddrs); tests give a host without a
	// private IPv4 address.
	InterfaceAddrs func() ([]net.Addr, error)
	// RegionsClock is the remote regions' fetchers' clock (nil: real
	// time); tests move it to make fetches due.
	RegionsClock regions.Clock
}

// Node is one running Muster node: registry, HTTP API, membership and
// replication. Tests start several in one process.
type Node struct {
	settings *settings.Settings
	opts     Options
	log      zerolog.Logger

	reg       *registry.Registry
	api       *httpapi.Server
	metrics   *prometheus.Registry
	rep       *replication.Replicator
	ae        *replication.AntiEntropy
	transport replication.Transport
	// regNow is the registry's clock (nil: time.Now), for the drain's
	// receipts; drain is the drain with a receipt (drain.go).
	regNow   func() time.Time
	drain    *drain.Drainer
	receiver *replication.Receiver
	syncer   *replication.Syncer
	cluster  *cluster.Cluster // nil when cluster.enabled is false
	tls      *tlsconfig.Store // nil when TLS is off
	security *nodeSecurity
	regions  *regions.Set // nil without remote regions

	listener   net.Listener
	httpServer *http.Server
	// The actuator's own listener (management.server.port); nil when it
	// shares the API's port.
	mgmtListener net.Listener
	mgmtServer   *http.Server
	name         string
	url          string // advertised Eureka base URL, e.g. http://10.0.0.5:8761/eureka/
	host, ip     string
	port         int

	stopping   atomic.Bool // set first thing in Shutdown: /readyz goes 503
	opened     chan struct{}
	syncMu     sync.Mutex             // guards syncResult and syncTook (a background syncUp writes them late)
	syncResult replication.SyncResult // SyncUp
	syncTook   time.Duration          // how long syncUp ran (SyncUp)
	synced     chan struct{}          // closed when syncUp is over, in the background too
	startState string                 // how the node opened (coldstart.go)

	snapMetrics *snapshotMetrics
	snapWriter  snapshotWriter

	// parts are what the node runs, in start order (newParts, part.go).
	parts  parts
	runCtx context.Context    // the parts' context: the node's background work
	cancel context.CancelFunc // ends runCtx, last thing in Shutdown
	served net.Listener       // listener as served: limited, TLS outermost

	dnsAddr net.Addr             // the DNS interface's UDP (and TCP) address; nil when off
	xds     *xds.Server          // xds.go; nil when muster.xds.enabled is off
	health  *healthcheck.Checker // healthcheck.go; nil when muster.health-check.enabled is off
}

// New builds a node from settings. It opens nothing and starts no
// goroutines; Start does.
func New(s *settings.Settings, logger zerolog.Logger, opts ...Options) (*Node, error) {
	n := &Node{settings: s, log: logger, opened: make(chan struct{}), synced: make(chan struct{})}
	if s.DataDir != "" {
		if err := persist.CheckDir(s.DataDir); err != nil {
			return nil, fmt.Errorf("setting muster.data-dir: %w", err)
		}
	}
	if len(opts) > 0 {
		n.opts = opts[0]
	}
	rcfg := s.Registry
	rcfg.Logger = logger
	rcfg.ClusterNode = clusterNodeOf(s)
	if n.opts.Now != nil {
		rcfg.Now = n.opts.Now
	} else if off := s.ClockOffset; off != 0 {
		rcfg.Now = func() time.Time { return time.Now().Add(off) }
		logger.Warn().Dur("offset", off).Msg("muster.testing.clock-offset-ms: the registry's, replication's and anti-entropy's clock is moved off the machine's (chaos tests only)")
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		return nil, err
	}
	n.reg, n.regNow = reg, rcfg.Now
	if n.security, err = newNodeSecurity(s); err != nil {
		return nil, err
	}

	if n.tls, err = s.LoadTLS(logger, n.opts.TLSReload); err != nil {
		return nil, err
	}
	tcfg := s.Transport
	tcfg.Signer = n.security.sign()
	if n.tls != nil {
		tcfg.DialTLS = n.tls.DialTLSContext(replication.PeerDialer(tcfg.ConnectTimeout))
	}
	transport, err := replication.NewHTTPTransport(tcfg)
	if err != nil {
		return nil, err
	}
	repCfg := s.Replication
	repCfg.Logger = logger
	repCfg.Transport = transport
	repCfg.Store = reg
	if s.ClockOffset != 0 {
		// A node whose clock is off is off everywhere: replication times
		// the registry's events with the same clock.
		repCfg.Now = rcfg.Now
	}
	// The replicator subscribes to the registry's change stream here, before
	// any request can arrive, so that no write escapes replication.
	if n.rep, err = replication.New(repCfg); err != nil {
		return nil, err
	}
	if n.receiver, err = replication.NewReceiver(reg, logger); err != nil {
		return nil, err
	}
	n.transport = repCfg.Transport
	acfg := s.AntiEntropy
	acfg.Store, acfg.Transport, acfg.Peers = reg, transport, n.rep.PeerList
	acfg.Logger, acfg.OnMuster = logger, n.rep.MarkMuster
	if s.ClockOffset != 0 {
		acfg.Now = rcfg.Now
	}
	if n.ae, err = replication.NewAntiEntropy(acfg); err != nil {
		return nil, err
	}
	if acfg.Interval > 0 {
		// A cancel's tombstone stays until every peer has been in sync
		// since (or muster.tombstone-max-age-ms): a peer cut off for
		// longer than a lease cannot bring the instance back.
		reg.SetTombstoneHold(n.ae.TombstoneHold)
	}
	// A Muster peer this node cannot reach (its batches or anti-entropy
	// rounds failing) may be hearing renewals this node does not: a ring
	// or one-way partition. Evictions wait (muster.eviction-hold-max-ms).
	reg.SetEvictionHold(n.unreachablePeer)

	n.metrics = prometheus.NewRegistry()
	n.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if n.regions, err = n.newRegions(); err != nil {
		return nil, err
	}
	n.snapMetrics = newSnapshotMetrics(n.metrics)
	return n, nil
}

// Start binds the API port (the node's name and URL follow from it),
// builds the parts (newParts) and starts them in order; syncUp and the
// opening for traffic follow in the background (see Opened), and start
// the parts that wait for it. It returns once the node serves HTTP. A
// start that fails stops, in reverse, what it had started.
func (n *Node) Start(ctx context.Context) (err error) {
	if err := n.listen(); err != nil {
		return err
	}
	if n.parts.list, err = n.newParts(); err != nil {
		n.closeListeners()
		return err
	}
	n.runCtx, n.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.parts.close()
			_ = n.stop(ctx)
		}
	}()
	return n.parts.start(n.runCtx, atStart, nil)
}

// listen binds the API port and names the node after it: its advertised
// URL and, unless cluster.node-name says otherwise, its name.
func (n *Node) listen() error {
	s := n.settings
	addr := net.JoinHostPort(s.ServerAddress, strconv.Itoa(s.ServerPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (server.port): %w", addr, err)
	}
	n.listener = ln
	n.port = ln.Addr().(*net.TCPAddr).Port
	n.host, n.ip = advertisedHost(s)
	urlHost := n.host
	if s.InstancePreferIP {
		urlHost = n.ip
	}
	n.url = s.Scheme() + "://" + net.JoinHostPort(urlHost, strconv.Itoa(n.port)) + s.ContextPath() + "/eureka/"
	n.name = s.ClusterNodeName
	if n.name == "" {
		n.name = n.host
		if s.ServerPort != settings.DefaultServerPort {
			// Two nodes on one host must not share a name.
			n.name += "-" + strconv.Itoa(n.port)
		}
	}
	return nil
}

// newParts builds every part the node runs, in start order; Shutdown stops
// them in reverse (part.go). The order is the shutdown's, read upwards:
// the self-registration's cancel goes out first; then no request is taken
// (HTTP, DNS, xDS) and the background work ends; the registry as the last
// requests left it goes to disk; the peers get what is queued for them,
// then see this node leave the cluster; replication stops. Nothing here
// starts anything; only the management port is bound.
func (n *Node) newParts() ([]entry, error) {
	s := n.settings
	var err error
	if n.health, err = n.newHealthChecker(); err != nil {
		return nil, err
	}
	xdsPart, err := n.newXDS()
	if err != nil {
		return nil, err
	}
	if err = n.newAPI(); err != nil {
		return nil, err
	}
	if s.ClusterEnabled && n.gossipWanted() {
		if n.cluster, err = n.newCluster(); err != nil {
			return nil, err
		}
	}
	// The syncer needs the node's own URL, to tell static peers from self.
	scfg := s.Sync
	scfg.Store, scfg.Transport, scfg.Candidates = n.reg, n.transport, n.currentPeers
	scfg.PeersExpected = n.peersExpected()
	scfg.Logger = n.log
	if n.syncer, err = replication.NewSyncer(scfg); err != nil {
		return nil, err
	}
	dnsPart, err := n.newDNS()
	if err != nil {
		return nil, err
	}
	var list []entry
	add := func(on bool, at step, p part) {
		if on {
			list = append(list, entry{p, at})
		}
	}
	add(n.tls != nil, atStart, &task{name: "tls", run: func(ctx context.Context) { n.tls.Run(ctx) }})
	add(n.regions != nil, atStart, &task{name: "regions", run: func(ctx context.Context) { n.regions.Run(ctx) }})
	add(true, atStart, &task{name: "replication", run: n.runReplication, before: n.stopReplication})
	add(n.cluster != nil, atStart, &funcs{name: "cluster", start: n.cluster.Start, stop: n.leaveCluster})
	add(true, atStart, &task{name: "peers", run: n.watchPeers, before: n.drainReplication})
	add(s.DataDir != "", atOpen, &task{name: "snapshots", run: n.snapshotLoop, after: func() { n.writeSnapshot("shutdown") }})
	add(true, atOpen, &task{name: "registry", run: n.reg.Run}) // eviction, the threshold, the delta
	add(true, atOpen, &task{name: "anti-entropy", run: n.runAntiEntropy})
	add(n.health != nil, atOpen, &task{name: "health checks", run: n.runHealthChecks})
	add(xdsPart != nil, atStart, xdsPart)
	add(dnsPart != nil, atStart, dnsPart)
	add(true, atStart, n.httpPart())
	add(true, atStart, &task{name: "start-up", run: n.startUp})
	add(true, atOpen, &task{name: "dashboard history", run: n.api.Run})
	add(s.RegisterWithEureka, atOpen, &task{name: "self-registration", run: n.runSelfRegistration})
	return list, nil
}

// newAPI builds the HTTP server and binds the actuator's own port if it
// has one.
func (n *Node) newAPI() error {
	s := n.settings
	hcfg := s.HTTP
	if n.health != nil {
		hcfg.HealthChecks = n.health
	}
	hcfg.Registry = n.reg
	hcfg.Logger = n.log
	hcfg.Metrics = n.metrics
	hcfg.Gatherer = n.metrics
	hcfg.Node.Name, hcfg.Node.URL, hcfg.Node.Version = n.name, n.url, Version
	hcfg.Ready = n.Ready
	hcfg.ReadsAllowed = n.readsAllowed
	hcfg.Peers = n.peerInfos
	if n.xds != nil {
		hcfg.XDSClients = n.xds.Report
	}
	hcfg.Batch = n.receiver.Handle
	hcfg.Digests = n.reg
	hcfg.Drain = n.drainer()
	if n.regions != nil {
		hcfg.Regions, hcfg.RemoteRegionInfo = n.regions, n.regions.Report
	}
	hcfg.DeltaRetention = s.Registry.DeltaRetention
	hcfg.Replication = n.rep
	hcfg.AntiEntropy = n.ae
	hcfg.Auth, hcfg.PeerVerifier, hcfg.Security = n.security.users, n.security.verifier, n.security.report(s)
	if hcfg.Actuator.Port == n.port {
		hcfg.Actuator.Port = 0 // Spring's: the server's own port is no separate port
	}
	api, err := httpapi.New(hcfg)
	if err != nil {
		return err
	}
	if err := n.listenManagement(api, hcfg.Actuator.Port); err != nil {
		return err
	}
	n.api = api
	n.httpServer = api.HTTPServer()
	n.httpServer.ErrorLog = httpErrorLog(n.log)
	n.served = api.LimitListener(n.listener)
	if n.tls != nil {
		// Outermost, so that net/http sees *tls.Conn: it then bounds the
		// handshake by ReadHeaderTimeout, sets Request.TLS, and answers a
		// plain HTTP request with 400.
		n.served = tls.NewListener(n.served, n.tls.ServerConfig())
	}
	return nil
}

// httpPart serves the API (and the actuator's own port): started, it
// serves; stopped, in-flight requests finish and new ones are refused.
func (n *Node) httpPart() part {
	var wg sync.WaitGroup
	lastN := &task{name: "lastn", run: n.api.LastN().Run}
	serve := func(srv *http.Server, ln net.Listener, what string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error().Err(err).Msg(what + " stopped")
			}
		}()
	}
	return &funcs{name: "http",
		start: func(ctx context.Context) error {
			serve(n.httpServer, n.served, "http server")
			if n.mgmtServer != nil {
				serve(n.mgmtServer, n.mgmtListener, "management server")
			}
			_ = lastN.Start(ctx)
			s := n.settings
			n.log.Info().Str("addr", n.served.Addr().String()).Str("url", n.url).Str("node", n.name).Str("zone", s.Cluster.Zone).
				Str("version", Version).Msg("serving the Eureka API")
			warnIfOpen(n.log, s, n.cluster != nil, n.served.Addr(), n.security.report(s))
			return nil
		},
		stop: func(ctx context.Context) error {
			var errs []error
			if err := n.httpServer.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			}
			if n.mgmtServer != nil {
				if err := n.mgmtServer.Shutdown(ctx); err != nil {
					errs = append(errs, fmt.Errorf("management http shutdown: %w", err))
				}
			}
			_ = lastN.Stop(ctx)
			wg.Wait()
			return errors.Join(errs...)
		}}
}

// runReplication sends the registry's changes to the peers until
// stopReplication.
func (n *Node) runReplication(ctx context.Context) {
	if err := n.rep.Run(ctx); err != nil {
		n.log.Error().Err(err).Msg("replication stopped")
	}
}

func (n *Node) stopReplication(context.Context) error {
	n.rep.Shutdown()
	return nil
}

// leaveCluster leaves the memberlist cluster, within ctx's deadline and
// 3 s at most.
func (n *Node) leaveCluster(ctx context.Context) error {
	timeout := 3 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	return n.cluster.Shutdown(timeout)
}

// runAntiEntropy starts with a round with every peer at once: what changed
// while this node was syncing (or down) is reconciled now, not an
// interval later.
func (n *Node) runAntiEntropy(ctx context.Context) {
	n.ae.PeersChanged()
	n.ae.Run(ctx)
}

// listenManagement opens management.server.port when the actuator has a
// port of its own (TLS as the API's).
func (n *Node) listenManagement(api *httpapi.Server, port int) error {
	h := api.ManagementHandler()
	if h == nil {
		return nil
	}
	addr := net.JoinHostPort(n.settings.ServerAddress, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (management.server.port): %w", addr, err)
	}
	if n.tls != nil {
		ln = tls.NewListener(ln, n.tls.ServerConfig())
	}
	n.mgmtListener = ln
	n.mgmtServer = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: httpErrorLog(n.log)}
	return nil
}

// closeListeners closes the listeners when start-up fails before they
// are served (a served one is closed already; closing it again does
// nothing).
func (n *Node) closeListeners() {
	if n.listener != nil {
		n.listener.Close()
	}
	if n.mgmtListener != nil {
		n.mgmtListener.Close()
	}
}

func (n *Node) newCluster() (*cluster.Cluster, error) {
	s := n.settings
	cfg := s.Cluster
	cfg.NodeName = n.name
	cfg.EurekaURL = n.url
	cfg.Logger = n.log
	if n.opts.Memberlist != nil {
		cfg.Memberlist = n.opts.Memberlist
	}
	cfg.SecretKey, cfg.SecretKeys = s.SecretKeys()
	cfg.InterfaceAddrs = n.opts.InterfaceAddrs
	return cluster.New(cfg)
}

// gossipWanted decides whether gossip runs on a host where memberlist
// finds no private IPv4 address to advertise: when something asks for it
// (cluster.join, or cluster.enabled written), the cluster advertises
// another address (cluster.ChooseAdvertise); when nothing does (a Spring
// server's file, which knows no gossip), gossip stays off, with one
// warning, and the node starts as Spring's would.
func (n *Node) gossipWanted() bool {
	s := n.settings
	if s.Explicit("cluster.enabled") || len(s.Cluster.Join) > 0 {
		return true
	}
	list := n.opts.InterfaceAddrs
	if list == nil {
		list = net.InterfaceAddrs
	}
	addrs, err := list()
	if err != nil {
		return true // the cluster says what it cannot do
	}
	ch := cluster.ChooseAdvertise(s.Cluster.BindAddr, s.Cluster.AdvertiseAddr, addrs)
	if !ch.Needed {
		return true
	}
	n.log.Warn().Str("component", "cluster").Str("best_addr", ch.Addr).Str("kind", ch.Kind.String()).
		Msg("gossip is off: this host has no private IPv4 address to advertise and nothing asks for gossip (no cluster.join, cluster.enabled not set); static peers of eureka.client.service-url.* still replicate. Set cluster.advertise-addr or cluster.join to turn it on")
	return false
}

// startUp is syncUp then openForTraffic (ARCHITECTURE.md decision 8).
// A node that refuses no read whatever syncUp finds (Settings.SyncInBackground)
// opens after syncUp's first round, and the other rounds run meanwhile.
func (n *Node) startUp(ctx context.Context) {
	t0 := time.Now()
	background := n.settings.SyncInBackground()
	var res replication.SyncResult
	if background {
		res = n.syncer.RunFirst(ctx)
	} else {
		res = n.syncer.Run(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	background = background && n.syncer.More(res)
	if !background {
		n.setSyncResult(res, time.Since(t0))
		close(n.synced)
	}
	restored, snapshotRefused := false, false
	switch {
	case n.settings.DataDir == "":
		n.snapMetrics.Load.WithLabelValues("disabled").Set(1)
	case res.Source != "":
		n.snapMetrics.Load.WithLabelValues("not_needed").Set(1)
		n.restoreSnapshotTombstones()
	default:
		restored, snapshotRefused = n.restoreSnapshot()
	}
	wait, state := startRefusal(n.settings, res, n.peersExpected(), restored, snapshotRefused)
	if background {
		wait, state = 0, startSyncBackground
		n.log.Info().Int("sync_retries", n.settings.Sync.Attempts).
			Msg("no peer answered syncUp's first round and eureka.server.wait-time-in-ms-when-sync-empty is 0: serving at once; syncUp goes on in the background and copies the registry once a peer answers")
	}
	n.startState = state
	n.snapMetrics.startState.WithLabelValues(state).Set(1)
	if wait > 0 {
		var until time.Time
		if followsClients(n.settings, state) {
			until = n.reg.RefuseReadsUntilRenewed(settings.ColdStartMargin, n.settings.ColdStartLimit())
		} else {
			until = n.reg.RefuseReadsFor(wait)
		}
		switch state {
		case startCold:
			n.log.Warn().Time("until", until).Dur("wait", wait).Bool("peers_seen", res.PeersKnown).Bool("snapshot_refused", snapshotRefused).
				Msg("cold start: no peer has the registry and there is no usable snapshot; registry reads answer 403 and /readyz 503 until then (later if clients declaring a longer renewal interval register meanwhile), while live clients register again")
		case startNoPeer:
			n.log.Warn().Time("until", until).Dur("wait", wait).
				Msg("no peer could be reached: registry reads answer 403 and /readyz 503 for one client renewal interval (as a cold start), while live clients register here; then the node serves what it holds and replicates to the peers as they come")
		default:
			n.log.Warn().Time("until", until).
				Msg("syncUp found nothing and eureka.instance.registry.default-open-for-traffic-count is 0: registry reads answer 403 until then (eureka.server.wait-time-in-ms-when-sync-empty), as Eureka does")
		}
	}
	// The opening and the parts that wait for it, unless the node is
	// being shut down (Shutdown closes the list first).
	err := n.parts.start(n.runCtx, atOpen, func() {
		n.reg.OpenForTraffic()
		close(n.opened)
	})
	if err != nil {
		n.log.Error().Err(err).Msg("start after opening for traffic")
	}
	select {
	case <-n.opened:
	default:
		return // shut down before it opened
	}
	if background {
		rest := n.syncer.RunRest(ctx)
		if ctx.Err() != nil {
			return
		}
		rest.PeersKnown = rest.PeersKnown || res.PeersKnown
		rest.Reached = rest.Reached || res.Reached
		n.setSyncResult(rest, time.Since(t0))
		close(n.synced)
	}
}

func (n *Node) setSyncResult(res replication.SyncResult, took time.Duration) {
	n.syncMu.Lock()
	n.syncResult, n.syncTook = res, took
	n.syncMu.Unlock()
}

// peersExpected says the node is configured to have peers: cluster.join
// seeds or static service URLs.
func (n *Node) peersExpected() bool {
	return len(n.settings.Cluster.Join) > 0 || len(n.staticPeers()) > 0
}

// Opened is closed once the node has synced and opened for traffic.
func (n *Node) Opened() <-chan struct{} { return n.opened }

// Ready is /readyz: open for traffic (the registry's start-up state) and
// not shutting down.
func (n *Node) Ready() bool { return !n.stopping.Load() && n.reg.Opened() }

// readsAllowed gates registry reads: open, no refusal after a failed
// syncUp running (by the registry's clock), not shutting down.
func (n *Node) readsAllowed() bool { return !n.stopping.Load() && n.reg.ReadsAllowed() }

// runSelfRegistration registers the node in its own registry and renews
// until ctx ends; then its cancel goes out like any client's.
func (n *Node) runSelfRegistration(ctx context.Context) {
	now := time.Now
	if n.opts.Now != nil {
		now = n.opts.Now // the registry's clock: its lastDirtyTimestamp is checked against it
	}
	sr := &selfRegistration{
		reg:      n.reg,
		instance: selfInstance(n.settings, n.host, n.ip, n.port, now()),
		interval: time.Duration(n.settings.InstanceRenewalInterval) * time.Second,
		log:      n.log.With().Str("component", "self-registration").Logger(),
	}
	sr.run(ctx)
}

// watchPeers keeps the replication peers in line with the membership.
func (n *Node) watchPeers(ctx context.Context) {
	var changes <-chan struct{}
	if n.cluster != nil {
		changes = n.cluster.Changes()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	n.rep.SetPeers(n.currentPeers())
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-tick.C:
		}
		n.rep.SetPeers(n.currentPeers())
		n.ae.PeersChanged() // a peer that joined or came back gets a round at once
	}
}

// currentPeers is every other member that is not gone and advertises a
// Eureka URL, plus the static peers, minus self.
func (n *Node) currentPeers() []replication.Peer {
	var peers []replication.Peer
	seen := map[string]bool{}
	if n.cluster != nil {
		for _, m := range n.cluster.Members() {
			if m.Self || m.EurekaURL == "" || m.State == cluster.StateDead || m.State == cluster.StateLeft {
				continue
			}
			peers = append(peers, replication.Peer{Name: m.Name, URL: m.EurekaURL, Zone: m.Zone, Muster: true})
			seen[normalizeURL(m.EurekaURL)] = true
		}
	}
	for _, p := range n.staticPeers() {
		if !seen[normalizeURL(p.URL)] {
			peers = append(peers, p)
		}
	}
	return peers
}

// staticPeers are the eureka.client.service-url.* URLs that are not this
// node.
func (n *Node) staticPeers() []replication.Peer {
	var peers []replication.Peer
	for zone, urls := range n.settings.ServiceURLs {
		for _, u := range urls {
			if n.isSelfURL(u) {
				continue
			}
			// The URL may carry a Java peer's credentials; the name (logs,
			// metrics, status pages) must not.
			peers = append(peers, replication.Peer{Name: redact.URL(u), URL: u, Zone: zone})
		}
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
	return peers
}

// isSelfURL tells whether a configured peer URL points at this node: same
// advertised URL, or this node's port on one of its own names or
// addresses (Eureka compares host names only and so drops a second node on
// the same host, bug 17).
func (n *Node) isSelfURL(raw string) bool {
	if normalizeURL(raw) == normalizeURL(n.url) {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Port() != strconv.Itoa(n.port) {
		return false
	}
	switch host := u.Hostname(); {
	case host == n.host || host == n.ip || host == "localhost":
		return true
	default:
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
}

func normalizeURL(raw string) string {
	return strings.TrimRight(strings.ToLower(raw), "/")
}

// peerInfos lists the peers for the dashboard and /admin/status: members
// in memberlist's words, static peers as "static", with replication
// figures.
func (n *Node) peerInfos() []httpapi.PeerInfo {
	stats := map[string]replication.PeerStats{}
	for _, ps := range n.rep.Peers() {
		stats[ps.Name] = ps
	}
	ae := map[string]replication.AntiEntropyStats{}
	for _, as := range n.ae.Stats() {
		ae[as.Peer] = as
	}
	var out []httpapi.PeerInfo
	add := func(name, zone, url, state string) {
		pi := httpapi.PeerInfo{Name: name, Zone: zone, URL: url, State: state}
		if ps, ok := stats[name]; ok {
			pi.QueueDepth, pi.LastBatchMillis, pi.LastError = ps.QueueDepth, ps.LastBatchMillis, ps.LastError
		}
		n.antiEntropyInfo(&pi, ae[name])
		out = append(out, pi)
	}
	seen := map[string]bool{}
	if n.cluster != nil {
		for _, m := range n.cluster.Members() {
			if m.Self {
				continue
			}
			add(m.Name, m.Zone, m.EurekaURL, string(m.State))
			seen[normalizeURL(m.EurekaURL)] = true
		}
	}
	for _, p := range n.staticPeers() {
		if !seen[normalizeURL(p.URL)] {
			add(p.Name, p.Zone, redact.URL(p.URL), "static")
		}
	}
	return out
}

// antiEntropyInfo fills in anti-entropy's view of a peer; as is zero for a
// peer without a round yet.
func (n *Node) antiEntropyInfo(pi *httpapi.PeerInfo, as replication.AntiEntropyStats) {
	if n.settings.AntiEntropy.Interval <= 0 {
		pi.AntiEntropy = httpapi.AntiEntropyOff
		return
	}
	pi.AntiEntropy, pi.Repairs = as.State(), as.Repairs.Total()
	if !as.Unsupported {
		in := as.InSync
		pi.InSync = &in
	}
	pi.LastAntiEntropy = utcOrNil(as.Last)
	if as.LastError != "" {
		pi.AntiEntropyError, pi.AntiEntropyErrorAt = as.LastError, utcOrNil(as.LastErrorAt)
	}
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// URL is the node's advertised Eureka base URL.
func (n *Node) URL() string { return n.url }

// Addr is the address the HTTP server listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// GossipAddr is the host:port other nodes join this one by; "" when
// clustering is off.
func (n *Node) GossipAddr() string {
	if n.cluster == nil {
		return ""
	}
	for _, m := range n.cluster.Members() {
		if m.Self {
			return net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))
		}
	}
	return ""
}

// Registry is the node's registry, for a caller in the same process that
// reads it (the benchmark's control endpoints, tests).
func (n *Node) Registry() *registry.Registry { return n.reg }

// Peers are the peers the node replicates to now, with their queues.
func (n *Node) Peers() []replication.PeerStats { return n.rep.Peers() }

// SyncUp is how long syncUp ran at start-up and what it copied: final
// once Synced is closed, before Opened is unless syncUp went on in the
// background (start state sync_background).
func (n *Node) SyncUp() (took time.Duration, res replication.SyncResult) {
	n.syncMu.Lock()
	defer n.syncMu.Unlock()
	return n.syncTook, n.syncResult
}

// syncUpDone is closed once syncUp is over (it may outlast Opened: a node
// with eureka.server.wait-time-in-ms-when-sync-empty 0 opens at once).
func (n *Node) syncUpDone() <-chan struct{} { return n.synced }

// Shutdown stops the node gracefully: readiness goes, then the parts stop
// in the reverse of their start order (newParts): the self-registration
// is cancelled and that cancel replicated, in-flight requests finish,
// background work stops, the snapshot is written, replication drains and
// the node leaves the cluster.
func (n *Node) Shutdown(ctx context.Context) error {
	if !n.parts.close() {
		return nil
	}
	n.stopping.Store(true)
	err := n.stop(ctx)
	n.log.Info().Msg("stopped")
	return err
}

// stop stops the parts that started, in reverse, and what New built.
func (n *Node) stop(ctx context.Context) error {
	err := n.parts.stop(ctx)
	n.closeListeners()
	if n.cancel != nil {
		n.cancel()
	}
	n.rep.Shutdown() // New subscribed it to the registry's changes
	return err
}

// drainReplication waits, up to limit, until the replicator has read the
// registry's change stream to its head and every peer has been sent what
// is queued for it, so changes made just before a shutdown (like the
// self-registration's cancel) are not lost. It gives up quietly.
func (n *Node) drainReplication(ctx context.Context) error {
	const limit = 2 * time.Second
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending := int(n.rep.Backlog())
		for _, p := range n.rep.Peers() {
			pending += p.QueueDepth + p.InFlight
		}
		if pending == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// advertisedHost picks the host name and IP address the node tells others.
func advertisedHost(s *settings.Settings) (host, ip string) {
	host = s.InstanceHostname
	if host == "" {
		host, _ = os.Hostname()
	}
	if host == "" {
		host = "localhost"
	}
	ip = s.InstanceIPAddress
	if ip == "" {
		ip = s.Cluster.AdvertiseAddr
	}
	if ip == "" {
		ip = firstIPv4()
	}
	return host, ip
}

// firstIPv4 returns the first non-loopback IPv4 address, or 127.0.0.1.
func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

func itoa(i int) string { return strconv.Itoa(i) }

// unreachablePeer names a Muster peer this node cannot reach now — its
// last replication batch or anti-entropy round failed — or "" when every
// one answers. A peer known not to be a Muster node (a Java Eureka server:
// anti-entropy unsupported) is not counted: its clients' renewals reach
// this node through its own replication, or not at all.
func (n *Node) unreachablePeer() string {
	java := map[string]bool{}
	for _, as := range n.ae.Stats() {
		switch {
		case as.Unsupported:
			java[as.Peer] = true
		case as.Failing:
			return as.Peer
		}
	}
	for _, ps := range n.rep.Peers() {
		if ps.Failures > 0 && !java[ps.Name] {
			return ps.Name
		}
	}
	return ""
}

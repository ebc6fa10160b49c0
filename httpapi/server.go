package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/httpapi/console"
	"github.com/muster-registry/muster/httpapi/edge"
	"github.com/muster-registry/muster/httpapi/eureka"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
)

// BatchHandler is eureka.BatchHandler.
type BatchHandler = eureka.BatchHandler

// Registry is what the whole HTTP layer needs of the registry: the Eureka
// API's (eureka.Registry), which the console and ops interfaces are parts
// of. *registry.Registry implements it.
type Registry interface {
	eureka.Registry
	console.Registry
	ops.AdminRegistry
	ops.MetricsRegistry
	LimitRejections() map[registry.Limit]uint64
	Drain(app, id string) (registry.DrainMark, *registry.Instance, bool)
	Drained() []registry.DrainedInstance
}

var _ Registry = (*registry.Registry)(nil)

// Config wires the HTTP API to the rest of the node.
type Config struct {
	Registry Registry
	Node     NodeInfo
	Logger   zerolog.Logger
	// Metrics is where the API registers its Prometheus collectors; nil
	// makes a private registry. /metrics serves Gatherer.
	Metrics  prometheus.Registerer
	Gatherer prometheus.Gatherer

	// Ready reports whether the node has opened for traffic (syncUp done);
	// /readyz answers 503 until then. nil means always ready.
	Ready func() bool
	// ReadsAllowed reports whether registry reads (GET apps, delta, app,
	// VIPs) may be answered; while false they get 403 so clients fail over
	// to a peer that knows. nil means Ready.
	ReadsAllowed func() bool
	// Peers lists the replication peers. nil means none.
	Peers func() []PeerInfo
	// XDSClients lists the xDS streams open on the node, for the
	// dashboard; nil when the node serves no xDS.
	XDSClients func() []XDSClient
	// HealthChecks reports the server-side health checks for
	// /admin/status and the console; nil while they are off.
	HealthChecks ops.HealthCheckSource
	// Batch handles POST /peerreplication/batch. nil answers 501.
	Batch BatchHandler
	// Digests serves anti-entropy to peers (POST /peerreplication/digest
	// and /peerreplication/copies, signed like batches): the registry.
	// nil answers 404, as a Java Eureka server does.
	Digests replication.DigestSource
	// Regions are the node's remote regions, served with regions= and in
	// transparent fallback (nil: none); DeltaRetention is how far back a
	// merged delta takes their changes (the registry's delta retention).
	Regions        eureka.RemoteRegions
	DeltaRetention time.Duration
	// RemoteRegionInfo describes the remote regions for /admin/status and
	// the dashboard; nil means none.
	RemoteRegionInfo func() []ops.RemoteRegionInfo
	// Replication reports the replication figures for /metrics. nil means
	// no replication.
	Replication ReplicationStats
	// AntiEntropy reports the anti-entropy figures for /metrics. nil means
	// none.
	AntiEntropy AntiEntropyStats

	// DisableDelta makes GET /apps/delta answer 403, so clients always do
	// full fetches. eureka.server.disable-delta, default false.
	DisableDelta bool
	// MaxBodyBytes limits request bodies of client requests (413 beyond).
	// muster.max-body-bytes, default 1 MiB.
	MaxBodyBytes int64
	// MaxBatchBodyBytes limits peer replication batches, which carry up to
	// 250 instances. muster.max-batch-body-bytes, default 16 MiB.
	MaxBatchBodyBytes int64
	// Now is the clock for the dashboard; nil means time.Now.
	Now func() time.Time

	// Connection limits (limits.go). BodyReadTimeout: a request body must
	// arrive whole this long after its headers (408 beyond);
	// muster.body-read-timeout-ms, default 30 s. WriteChunkTimeout: each
	// 128 KiB of a response must be taken by the reader within it;
	// muster.write-chunk-timeout-ms, default 30 s. MaxConnections: open
	// connections at most, further ones wait; muster.max-connections,
	// default 100,000. Zero turns a limit off.
	BodyReadTimeout   time.Duration
	WriteChunkTimeout time.Duration
	MaxConnections    int
	// Auth checks HTTP Basic credentials; nil leaves client routes open.
	Auth *auth.Authenticator
	// PeerVerifier checks peer signatures (cluster.peer-secret); nil means
	// none are required. See auth.go for who may do what.
	PeerVerifier *auth.PeerVerifier
	// Security is reported on /admin/status and the dashboard.
	Security Security
	// ConsoleActions says who may use the dashboard's actions when
	// authentication is off (muster.dashboard.actions-without-auth); ""
	// means loopback. With authentication on, admin users may.
	ConsoleActions console.ActionsPolicy
	// Watches (watch_fetch.go, watch_stream.go). WatchMaxWait caps the wait
	// of a blocking fetch (longer ones are clamped); muster.watch.max-wait-ms,
	// default 60 s. WatchMaxWatchers caps blocking fetches held and watch
	// streams open at once: beyond it a blocking fetch is answered at once,
	// as without wait, and a stream gets 503; muster.watch.max-watchers,
	// default 50,000; 0 means no limit. WatchTimer is the clock a held
	// request's wait runs on; nil means real timers.
	WatchMaxWait     time.Duration
	WatchMaxWatchers int
	WatchTimer       func(d time.Duration) (<-chan time.Time, func())
	// Actuator is Spring Boot's actuator (management.*), httpapi/ops.
	Actuator ops.ActuatorConfig

	// ConsoleDisabled leaves the dashboard out: its pages answer 404
	// (Spring's eureka.dashboard.enabled false).
	ConsoleDisabled bool
	// ConsolePath is one more path of the dashboard's overview, besides
	// /, /dashboard and /console (Spring's eureka.dashboard.path); its
	// links stay under /console.
	ConsolePath string
	// ContextPath moves every route under it, as a servlet container does
	// (Spring's server.servlet.context-path, Boot 1.x server.context-path):
	// /register/eureka/apps, /register/ (the dashboard), /register/actuator…
	// The platform probes /readyz and /livez answer at the root too, so a
	// probe written for the root keeps working. "" serves at the root. It
	// starts with / and has no trailing /.
	ContextPath string
	// Drain serves /admin/drain and notes the clients' reads (package
	// drain); nil: a drainer of this node alone, with the defaults.
	Drain *drain.Drainer
}

// DefaultConfig returns the defaults; Registry must still be set.
func DefaultConfig() Config {
	return Config{
		MaxBodyBytes:      1 << 20,
		MaxBatchBodyBytes: 16 << 20,
		BodyReadTimeout:   30 * time.Second,
		WriteChunkTimeout: 30 * time.Second,
		MaxConnections:    100_000,
		WatchMaxWait:      60 * time.Second,
		WatchMaxWatchers:  50_000,
		Node:              NodeInfo{Zone: "default", Environment: "test", Datacenter: "default"},
		Security:          Security{ClientAuth: "none"},
		ConsoleActions:    console.ActionsLoopback,
		Actuator:          ops.DefaultActuatorConfig(),
	}
}

// MaxLimitValue is the largest MaxConnections and WatchMaxWatchers.
const MaxLimitValue = 10_000_000

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field. The wiring (Registry) is New's to
// check.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("httpapi: "+field+" "+format, args...)
	}
	if c.MaxBodyBytes <= 0 {
		return bad("MaxBodyBytes", "must be positive, got %d", c.MaxBodyBytes)
	}
	if c.MaxBatchBodyBytes <= 0 {
		return bad("MaxBatchBodyBytes", "must be positive, got %d", c.MaxBatchBodyBytes)
	}
	if c.BodyReadTimeout < 0 {
		return bad("BodyReadTimeout", "must not be negative (0 turns it off), got %s", c.BodyReadTimeout)
	}
	if c.WriteChunkTimeout < 0 {
		return bad("WriteChunkTimeout", "must not be negative (0 turns it off), got %s", c.WriteChunkTimeout)
	}
	if c.MaxConnections < 0 || c.MaxConnections > MaxLimitValue {
		return bad("MaxConnections", "must be from 0 (no limit) to %d, got %d", MaxLimitValue, c.MaxConnections)
	}
	if c.WatchMaxWait <= 0 {
		return bad("WatchMaxWait", "must be positive, got %v", c.WatchMaxWait)
	}
	if c.WatchMaxWatchers < 0 || c.WatchMaxWatchers > MaxLimitValue {
		return bad("WatchMaxWatchers", "must be from 0 (no limit) to %d, got %d", MaxLimitValue, c.WatchMaxWatchers)
	}
	if err := c.Actuator.Validate(); err != nil {
		return bad("Actuator", "%v", err)
	}
	if p := c.ConsolePath; p != "" && (p[0] != '/' || strings.ContainsAny(p, ":*?#% ")) {
		return bad("ConsolePath", "must be a plain path starting with /, got %q", p)
	}
	for _, taken := range []string{"/eureka", "/v2", "/admin", "/actuator", "/metrics", "/readyz", "/livez", "/lastn", "/static"} {
		if p := strings.TrimRight(c.ConsolePath, "/"); p == taken || strings.HasPrefix(p, taken+"/") {
			return bad("ConsolePath", "%q is taken by the node's own routes (%s)", c.ConsolePath, taken)
		}
	}
	if p := c.ContextPath; p != "" && (p[0] != '/' || p[len(p)-1] == '/' || strings.ContainsAny(p, ":*?#% ;")) {
		return bad("ContextPath", "must be a plain path starting with / and not ending with /, got %q", p)
	}
	if !c.ConsoleActions.Valid() {
		return bad("ConsoleActions", "must be one of %v, got %q", console.ActionsPolicies, c.ConsoleActions)
	}
	return nil
}

// Server is the HTTP face of a node: Eureka's REST API under /eureka/ and
// /eureka/v2/, the peer batch endpoint, the dashboard, /admin/status,
// health and metrics.
type Server struct {
	cfg     Config
	reg     Registry
	log     zerolog.Logger
	echo    *echo.Echo
	api     *eureka.API
	metrics *ops.Metrics
	admin   *ops.Admin
	started time.Time
	now     func() time.Time

	limits *edge.Limits
	guard  *edge.Guard

	console *console.Console

	// httpapi/ops: the last-N recorder (the node runs it) and, with
	// Actuator.Port set, the management port's handler.
	lastN      *ops.LastNRecorder
	management *echo.Echo
}

// Run runs what the server's parts keep up while it serves (the console's
// chart samples) until ctx ends.
func (s *Server) Run(ctx context.Context) { s.console.Run(ctx) }

// New builds the server and its routes, and starts nothing: the watch
// hub's feed starts with the first watch (StopWatches ends it), the
// console's samples with Run. Serve HTTPServer() (or Handler()).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Registry == nil {
		return nil, errors.New("httpapi: Registry is required")
	}
	s := &Server{cfg: cfg, reg: cfg.Registry, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.started = s.now()
	s.log = cfg.Logger.With().Str("component", "httpapi").Logger()
	if s.cfg.Ready == nil {
		s.cfg.Ready = func() bool { return true }
	}
	if s.cfg.ReadsAllowed == nil {
		s.cfg.ReadsAllowed = s.cfg.Ready
	}
	if s.cfg.Peers == nil {
		s.cfg.Peers = func() []PeerInfo { return nil }
	}
	if cfg.Drain == nil {
		cfg.Drain = drain.New(drain.Config{Registry: cfg.Registry, Node: cfg.Node.Name, Now: s.now, Logger: cfg.Logger,
			Readers: drain.NewReaders(drain.DefaultMaxReaders, drain.DefaultReaderWindow)})
		s.cfg.Drain = cfg.Drain
	}
	s.api = eureka.New(eureka.Config{Drain: cfg.Drain, Registry: cfg.Registry, Node: cfg.Node, Logger: s.log,
		Ready: s.cfg.Ready, ReadsAllowed: s.cfg.ReadsAllowed, Peers: s.cfg.Peers, Batch: cfg.Batch, Digests: cfg.Digests,
		DisableDelta: cfg.DisableDelta, MaxBodyBytes: cfg.MaxBodyBytes, MaxBatchBodyBytes: cfg.MaxBatchBodyBytes,
		WatchMaxWait: cfg.WatchMaxWait, WatchMaxWatchers: cfg.WatchMaxWatchers, WatchTimer: cfg.WatchTimer, Now: s.now,
		Regions: cfg.Regions, DeltaRetention: cfg.DeltaRetention})
	s.guard = edge.NewGuard(edge.GuardConfig{Users: cfg.Auth, Peers: cfg.PeerVerifier,
		MaxPeerBody: cfg.MaxBatchBodyBytes, Now: s.now, Logger: s.log})
	s.limits = edge.NewLimits(edge.LimitsConfig{BodyReadTimeout: cfg.BodyReadTimeout,
		WriteChunkTimeout: cfg.WriteChunkTimeout, MaxConnections: cfg.MaxConnections})
	m, err := newMetrics(cfg, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	var digests interface{ RootDigest() uint64 }
	if cfg.Digests != nil {
		digests = cfg.Digests
	}
	s.admin = ops.NewAdmin(ops.AdminConfig{Registry: cfg.Registry, Node: cfg.Node, Security: cfg.Security,
		Peers: s.cfg.Peers, Ready: s.cfg.Ready, ReadsAllowed: s.cfg.ReadsAllowed, Digests: digests, Now: s.now,
		HealthChecks: healthReport(cfg.HealthChecks), RemoteRegions: cfg.RemoteRegionInfo})
	s.console = console.New(console.Config{Registry: cfg.Registry, Node: cfg.Node, Security: cfg.Security,
		Logger: cfg.Logger, Ready: s.cfg.Ready, Peers: s.cfg.Peers, XDSClients: cfg.XDSClients, AuthEnabled: s.guard.AuthEnabled(),
		Actions: cfg.ConsoleActions, LimitBody: edge.LimitBody, Now: s.now, BasePath: cfg.ContextPath, HealthChecks: cfg.HealthChecks,
		RemoteRegions: cfg.RemoteRegionInfo, Drains: consoleDrains{cfg.Drain}})

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	s.echo = e
	s.routes()
	return s, nil
}

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s }

// ServeHTTP lets the server be used as an http.Handler directly. A trailing
// slash is dropped first (httpkit.TrimSlash).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if pw := s.limits.Prepare(w, r); pw != nil {
		defer pw.Release()
		w = pw
	}
	httpkit.TrimSlash(r)
	if cp := s.cfg.ContextPath; cp != "" && !s.underContextPath(r, cp) {
		// Outside the context path nothing is served but the probes, as a
		// servlet container answers 404 outside its context.
		s.handleError(echo.ErrNotFound, s.echo.NewContext(r, w))
		return
	}
	s.echo.ServeHTTP(w, r)
}

// RootProbes answer at the root as well as under a context path: a
// platform's probe (Kubernetes, a load balancer) names them without it.
var RootProbes = []string{"/readyz", "/livez"}

// underContextPath cuts the context path off a request's path and tells
// whether the request is served: under the path, or one of RootProbes.
func (s *Server) underContextPath(r *http.Request, cp string) bool {
	p := r.URL.Path
	if p == cp || strings.HasPrefix(p, cp+"/") {
		r.URL.Path = p[len(cp):]
		if r.URL.Path == "" {
			r.URL.Path = "/"
		}
		if raw := r.URL.RawPath; raw != "" {
			if strings.HasPrefix(raw, cp) {
				r.URL.RawPath = raw[len(cp):]
			} else {
				r.URL.RawPath = "" // escaped inside the prefix: let net/url re-derive it
			}
		}
		return true
	}
	for _, probe := range RootProbes {
		if p == probe {
			return true
		}
	}
	return false
}

func (s *Server) routes() {
	// Middleware is attached per route, where echo applies it once, rather
	// than with Use, which echo v4 re-applies on every request.
	common := []echo.MiddlewareFunc{s.recoverPanics, s.observe, s.guard.Authenticate}
	route := func(add func(string, echo.HandlerFunc, ...echo.MiddlewareFunc) *echo.Route) func(string, echo.HandlerFunc, ...echo.MiddlewareFunc) {
		return func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc) {
			add(path, h, append(append([]echo.MiddlewareFunc{}, common...), extra...)...)
		}
	}
	e := s.echo
	get := route(e.GET)
	s.api.Routes(func(base string) (post, put, get, del eureka.Route) {
		g := e.Group(base)
		return route(g.POST), route(g.PUT), route(g.GET), route(g.DELETE)
	}, get)
	if !s.cfg.ConsoleDisabled {
		s.console.Routes(get, route(e.POST))
		if p := strings.TrimRight(s.cfg.ConsolePath, "/"); p != "" {
			// eureka.dashboard.path: the overview there too, with the
			// console's read access.
			s.guard.Mount(p, false)
			get(p, s.console.Overview)
		}
	}
	get("/admin/status", s.admin.ServeStatus)
	drains := ops.DrainEndpoints{Drainer: s.cfg.Drain}
	get("/admin/drain", drains.List)
	get("/admin/drain/:app/:id", drains.Receipt)
	route(e.POST)("/admin/drain/:app/:id", drains.Drain)
	route(e.DELETE)("/admin/drain/:app/:id", drains.Undrain)
	get("/readyz", s.admin.Readyz)
	get("/livez", s.admin.Livez)
	get("/metrics", s.serveMetrics)

	// httpapi/ops: Spring Boot's actuator, on this port or its own, and
	// /lastn. Access classes: auth.go's mounted.
	s.lastN = ops.NewLastNRecorder(s.reg, ops.LastNSize)
	get(ops.LastNPath, s.lastN.ServeLastN)
	act, err := ops.NewActuator(s.cfg.Actuator, ops.ActuatorSources{Ready: s.cfg.Ready, ReadsAllowed: s.cfg.ReadsAllowed,
		Registry: s.reg, Metrics: s.metrics.Handler(), Authorized: s.guard.MayRead, Version: s.cfg.Node.Version})
	if err != nil {
		panic(err) // Validate checked the config and New the sources
	}
	actGet := get
	if s.cfg.Actuator.Port != 0 {
		s.management = echo.New()
		s.management.HideBanner, s.management.HidePort, s.management.HTTPErrorHandler = true, true, s.handleError
		actGet = route(s.management.GET)
	}
	for _, r := range act.Routes() {
		s.guard.Mount(r.Path, r.Open)
		actGet(r.Path, r.Handler)
	}
}

// Drainer is the drain with a receipt the server serves (/admin/drain).
func (s *Server) Drainer() *drain.Drainer { return s.cfg.Drain }

// LastN is the /lastn recorder; the node runs it (Run(ctx)) for as long
// as it serves.
func (s *Server) LastN() *ops.LastNRecorder { return s.lastN }

// ManagementHandler serves the actuator on management.server.port
// (Actuator.Port), with the API's authentication; nil when the actuator
// shares the API's port.
func (s *Server) ManagementHandler() http.Handler {
	if s.management == nil {
		return nil
	}
	return s.management
}

// recoverPanics turns a panic in a handler into a 500 and a log line with
// the stack, so that nothing a client sends can take the node down.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error().Interface("panic", p).Str("method", c.Request().Method).
					Str("path", c.Request().URL.Path).Bytes("stack", debug.Stack()).Msg("handler panicked")
				err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
			}
		}()
		return next(c)
	}
}

// LimitListener returns ln accepting at most MaxConnections open
// connections at once; 0 means no limit.
func (s *Server) LimitListener(ln net.Listener) net.Listener { return s.limits.LimitListener(ln) }

// HTTPServer returns an http.Server for the API with the timeouts above.
// Its Shutdown first answers every held blocking fetch and ends every watch
// stream (StopWatches), which would otherwise keep it waiting.
func (s *Server) HTTPServer() *http.Server {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10, // a Eureka request line and headers are far smaller
	}
	// The connection rides in each request's context so that a large
	// response can follow what the reader acknowledged (progressWriter).
	srv.ConnContext = edge.ConnContext
	srv.RegisterOnShutdown(s.StopWatches)
	return srv
}

// StopWatches answers every held blocking fetch and ends every watch
// stream (HTTPServer's Shutdown runs it).
func (s *Server) StopWatches() { s.api.StopWatches() }

// healthReport is src's Report, nil without health checks.
func healthReport(src ops.HealthCheckSource) func() *ops.HealthChecks {
	if src == nil {
		return nil
	}
	return src.Report
}

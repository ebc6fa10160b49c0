package console

import (
	"context"
	"html/template"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
)

// Registry is what the console reads of the registry, and its one write
// path for the actions (the same Apply the Eureka API uses, so actions
// replicate). *registry.Registry implements it.
type Registry interface {
	Apply(registry.Op) (*registry.Instance, error)
	Instance(app, id string) (registry.InstanceView, bool)
	Snapshot() *registry.Snapshot
	SelfPreservationState() registry.SelfPreservation
	Version() uint64
	AppRenewals(dst map[string]uint64) map[string]uint64
	// IsClientLive: the instance's client talks to this node (the origin
	// column).
	IsClientLive(app, id string) bool
}

var _ Registry = (*registry.Registry)(nil)

// Config wires the console to the node. The HTTP server that mounts it
// (httpapi) fills it from its own.
type Config struct {
	Registry Registry
	Node     ops.NodeInfo
	Security ops.Security
	Logger   zerolog.Logger
	// Ready reports whether the node has opened for traffic; nil means
	// always.
	Ready func() bool
	// Peers lists the replication peers; nil means none.
	Peers func() []ops.PeerInfo
	// XDSClients lists the node's xDS streams; nil when it serves no xDS
	// (the section is left out).
	XDSClients func() []ops.XDSClient
	// RemoteRegions lists the remote regions; nil means none.
	RemoteRegions func() []ops.RemoteRegionInfo
	// AuthEnabled: the server checks credentials, so only admin users
	// (httpkit.UserOf) may act and Actions does not apply.
	AuthEnabled bool
	// Actions says who may act without authentication.
	Actions ActionsPolicy
	// LimitBody is the server's body-size middleware (its 413 and its
	// count of refusals); nil caps bodies here with the same 413.
	LimitBody func(limit int64) echo.MiddlewareFunc
	// Now is the clock of the pages and the chart's samples; nil means
	// time.Now.
	Now func() time.Time
	// BasePath is the server's context path (httpapi.Config.ContextPath):
	// the pages' links, assets and redirects start with it. "" is the root.
	BasePath string
	// HealthChecks shows the probe state in the instance tables and the
	// guard's banner; nil while health checks are off.
	HealthChecks ops.HealthCheckSource
	// Drains drains and undrains instances (the Drain and Undrain actions)
	// and reports a drained instance's receipt; nil: no drain actions.
	Drains Drains
}

// Drains is the drain with a receipt as the console uses it (package
// drain, through httpapi).
type Drains interface {
	Drain(ctx context.Context, app, id string) error
	Undrain(ctx context.Context, app, id string) error
	// Progress is a drained instance's receipt in words ("2 of 3 readers
	// confirmed; pending: …") and whether it is complete.
	Progress(ctx context.Context, app, id string) (text string, complete bool)
}

// Console serves the dashboard's pages, actions and assets. New starts
// nothing; Run takes the chart's samples for as long as its context lives.
type Console struct {
	cfg     Config
	reg     Registry
	log     zerolog.Logger
	now     func() time.Time
	started time.Time

	history    *spHistory
	consoleIdx consoleIndexCache
	csrf       csrfKeys
	// tmpl is the page template with its links under cfg.BasePath.
	tmpl *template.Template
}

// New builds a console over cfg.Registry, which must be set.
func New(cfg Config) *Console {
	s := &Console{cfg: cfg, reg: cfg.Registry, now: cfg.Now, history: newSPHistory()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Ready == nil {
		s.cfg.Ready = func() bool { return true }
	}
	if s.cfg.Peers == nil {
		s.cfg.Peers = func() []ops.PeerInfo { return nil }
	}
	if s.cfg.Actions == "" {
		s.cfg.Actions = ActionsLoopback
	}
	if s.cfg.LimitBody == nil {
		s.cfg.LimitBody = limitBody
	}
	s.started = s.now()
	s.log = cfg.Logger.With().Str("component", "console").Logger()
	// A clone per console, never the parsed original, which must stay
	// unexecuted to be cloned again (one process may run several nodes).
	base := cfg.BasePath
	s.tmpl = template.Must(consoleTemplate.Clone()).Funcs(template.FuncMap{"base": func() string { return base }})
	return s
}

// Routes mounts the pages with the server's route adders, which carry its
// middleware (authentication, metrics, panics).
func (s *Console) Routes(get, post func(string, echo.HandlerFunc, ...echo.MiddlewareFunc)) {
	for _, p := range Paths {
		get(p, s.consoleOverview)
	}
	get("/console/instances", s.consoleInstances)
	get("/console/apps/:app", s.consoleInstances)
	get("/console/api/summary", s.consoleSummary)
	get("/console/confirm", s.consoleConfirm)
	post("/console/actions", s.consoleAction, s.cfg.LimitBody(consoleMaxFormBytes))
	get("/static/*", s.static)
}

// Overview is the dashboard's overview page, for a server that mounts it
// at one more path (eureka.dashboard.path).
func (s *Console) Overview(c echo.Context) error { return s.consoleOverview(c) }

// Paths are where the overview answers: Spring's dashboard at /, and the
// names operators try.
var Paths = []string{"/", "/dashboard", "/console"}

// Run samples the self-preservation figures every 10 s for the chart
// until ctx ends. It is the console's only ticker; tests call Sample on a
// moved clock instead.
func (s *Console) Run(ctx context.Context) {
	s.Sample()
	t := time.NewTicker(historyInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sample()
		}
	}
}

// Sample takes one sample of the self-preservation figures and of the
// per-app renewal totals, at the console's clock.
func (s *Console) Sample() {
	s.history.sample(s.now(), s.reg.SelfPreservationState(), s.reg)
}

package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
)

// ActuatorShowDetails is management.endpoint.health.show-details: who sees
// the health components and their details.
type ActuatorShowDetails string

// The values Spring Boot accepts.
const (
	ActuatorShowNever          ActuatorShowDetails = "never"
	ActuatorShowAlways         ActuatorShowDetails = "always"
	ActuatorShowWhenAuthorized ActuatorShowDetails = "when-authorized"
)

// ActuatorShowDetailsValues lists every ActuatorShowDetails, for the
// configuration's enum key.
var ActuatorShowDetailsValues = []ActuatorShowDetails{ActuatorShowNever, ActuatorShowAlways, ActuatorShowWhenAuthorized}

// ActuatorConfig is the management.* settings.
type ActuatorConfig struct {
	// BasePath is where the endpoints live:
	// management.endpoints.web.base-path, default /actuator. "/" is
	// accepted only on a separate Port (the console owns / otherwise).
	BasePath string
	// Port is management.server.port: 0 (default) or the API's own port
	// serves the endpoints beside the API; any other port serves them
	// there only, on a second listener the node runs.
	Port int
	// ShowDetails is management.endpoint.health.show-details, default
	// never.
	ShowDetails ActuatorShowDetails
}

// DefaultActuatorConfig returns Spring Boot's defaults.
func DefaultActuatorConfig() ActuatorConfig {
	return ActuatorConfig{BasePath: "/actuator", ShowDetails: ActuatorShowNever}
}

// Validate reports the first setting that makes no sense.
func (c ActuatorConfig) Validate() error {
	p := c.BasePath
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("BasePath must start with /, got %q", p)
	case p == "/" && c.Port == 0:
		return fmt.Errorf(`BasePath "/" needs a separate Port (the console is served at /)`)
	case strings.ContainsAny(p, ":*?#% "):
		return fmt.Errorf("BasePath must be a plain path, got %q", p)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("Port must be from 0 (the API's port) to 65535, got %d", c.Port)
	}
	for _, v := range ActuatorShowDetailsValues {
		if c.ShowDetails == v {
			return nil
		}
	}
	return fmt.Errorf("ShowDetails must be one of %v, got %q", ActuatorShowDetailsValues, c.ShowDetails)
}

// ActuatorRegistry is what the health details read of the registry.
type ActuatorRegistry interface {
	Snapshot() *registry.Snapshot
}

// ActuatorSources is what the endpoints report on; the HTTP API fills it.
type ActuatorSources struct {
	// Ready and ReadsAllowed are /readyz's two conditions: the readiness
	// group is UP only when both hold.
	Ready, ReadsAllowed func() bool
	Registry            ActuatorRegistry
	// Metrics serves /metrics' text; /prometheus is the same handler.
	Metrics http.Handler
	// Authorized tells whether a request carries credentials good for the
	// read role (show-details when-authorized). nil: nobody is, as in
	// Spring Boot without security.
	Authorized func(*http.Request) bool
	// Version is Muster's version for /info.
	Version string
}

// Actuator serves Spring Boot's actuator endpoints.
type Actuator struct {
	cfg  ActuatorConfig
	src  ActuatorSources
	base string // BasePath without a trailing slash; "" for "/"
}

// NewActuator checks cfg and builds the endpoints.
func NewActuator(cfg ActuatorConfig, src ActuatorSources) (*Actuator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src.Ready == nil || src.ReadsAllowed == nil || src.Registry == nil || src.Metrics == nil {
		return nil, fmt.Errorf("ops: Ready, ReadsAllowed, Registry and Metrics are required")
	}
	return &Actuator{cfg: cfg, src: src, base: strings.TrimRight(cfg.BasePath, "/")}, nil
}

// ActuatorRoute is one GET route. Open routes (health, as the probes
// /livez and /readyz) need no credentials; the others the read role.
type ActuatorRoute struct {
	Path    string
	Open    bool
	Handler echo.HandlerFunc
}

// Routes lists the endpoints' echo routes under the base path.
func (a *Actuator) Routes() []ActuatorRoute {
	index := a.base
	if index == "" {
		index = "/"
	}
	return []ActuatorRoute{
		{Path: index, Handler: a.serveIndex},
		{Path: a.base + "/health", Open: true, Handler: a.serveHealth},
		{Path: a.base + "/health/*", Open: true, Handler: a.serveHealth},
		{Path: a.base + "/info", Handler: a.serveInfo},
		{Path: a.base + "/prometheus", Handler: a.servePrometheus},
	}
}

// Spring Boot's health statuses, and the HTTP code each answers with
// (management.endpoint.health.status.http-mapping's defaults).
const (
	actuatorUp           = "UP"
	actuatorDown         = "DOWN"
	actuatorOutOfService = "OUT_OF_SERVICE"
)

func actuatorHTTPStatus(status string) int {
	if status == actuatorDown || status == actuatorOutOfService {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// actuatorHealth is Spring Boot's health JSON: a component is a status with
// details or with components of its own; the root also lists the groups.
type actuatorHealth struct {
	Description string                     `json:"description,omitempty"`
	Status      string                     `json:"status"`
	Components  map[string]*actuatorHealth `json:"components,omitempty"`
	Details     map[string]any             `json:"details,omitempty"`
	Groups      []string                   `json:"groups,omitempty"`
}

// actuatorGroups maps Spring's probe groups to the component each shows.
var actuatorGroups = map[string]string{"liveness": "livenessState", "readiness": "readinessState"}

// health builds the whole tree. The registry component is Spring Cloud's
// client view ("discoveryComposite" → "eureka": the applications and
// their instance counts), taken from this node's own registry.
func (a *Actuator) health() *actuatorHealth {
	ready := actuatorUp
	if !a.src.Ready() || !a.src.ReadsAllowed() {
		ready = actuatorOutOfService
	}
	apps := map[string]any{}
	snap := a.src.Registry.Snapshot()
	for _, app := range snap.Apps {
		apps[app.Name] = len(app.Instances)
	}
	root := &actuatorHealth{
		Components: map[string]*actuatorHealth{
			"ping":           {Status: actuatorUp},
			"livenessState":  {Status: actuatorUp},
			"readinessState": {Status: ready},
			"discoveryComposite": {Status: actuatorUp, Components: map[string]*actuatorHealth{
				"eureka": {Description: "Muster registry of this node", Status: actuatorUp,
					Details: map[string]any{"applications": apps, "instances": snap.Instances}},
			}},
		},
		Groups: []string{"liveness", "readiness"},
	}
	root.Status = actuatorAggregate(root.Components)
	return root
}

// actuatorAggregate is Spring's SimpleStatusAggregator: the worst status
// in the order DOWN, OUT_OF_SERVICE, UP.
func actuatorAggregate(cs map[string]*actuatorHealth) string {
	worst := actuatorUp
	for _, c := range cs {
		switch {
		case c.Status == actuatorDown:
			return actuatorDown
		case c.Status == actuatorOutOfService:
			worst = actuatorOutOfService
		}
	}
	return worst
}

func (a *Actuator) showDetails(r *http.Request) bool {
	switch a.cfg.ShowDetails {
	case ActuatorShowAlways:
		return true
	case ActuatorShowWhenAuthorized:
		return a.src.Authorized != nil && a.src.Authorized(r)
	}
	return false
}

// serveHealth answers /health, a group (/health/liveness,
// /health/readiness) or, when details are shown, a component by its path
// (/health/discoveryComposite/eureka). Without details Spring shows the
// status alone, and component paths are 404.
func (a *Actuator) serveHealth(c echo.Context) error {
	root := a.health()
	details := a.showDetails(c.Request())
	path := strings.Trim(c.Param("*"), "/")
	var h *actuatorHealth
	switch comp, group := actuatorGroups[path]; {
	case path == "":
		h = root
		if !details {
			h = &actuatorHealth{Status: root.Status, Groups: root.Groups}
		}
	case group:
		h = &actuatorHealth{Status: root.Components[comp].Status}
		if details {
			h.Components = map[string]*actuatorHealth{comp: root.Components[comp]}
		}
	case details:
		h = root
		for _, seg := range strings.Split(path, "/") {
			if h = h.Components[seg]; h == nil {
				return echo.NewHTTPError(http.StatusNotFound, "no health component "+path)
			}
		}
	default:
		return echo.NewHTTPError(http.StatusNotFound, "no health group "+path+" (components are shown with management.endpoint.health.show-details)")
	}
	return a.writeJSON(c, actuatorHTTPStatus(h.Status), h)
}

// serveInfo answers Spring's info: the build (name, version) and, when
// the binary was built from a git checkout, the commit.
func (a *Actuator) serveInfo(c echo.Context) error {
	info := map[string]any{}
	version := a.src.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		commit := map[string]string{}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit["id"] = s.Value[:min(7, len(s.Value))]
			case "vcs.time":
				commit["time"] = s.Value
			}
		}
		if commit["id"] != "" {
			info["git"] = map[string]any{"commit": commit}
		}
	}
	if version != "" {
		info["build"] = map[string]string{"artifact": "muster", "name": "muster", "version": version}
	}
	return a.writeJSON(c, http.StatusOK, info)
}

func (a *Actuator) servePrometheus(c echo.Context) error {
	a.src.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

type actuatorLink struct {
	Href      string `json:"href"`
	Templated bool   `json:"templated"`
}

// serveIndex is the discovery page: _links to every endpoint, absolute as
// Spring writes them.
func (a *Actuator) serveIndex(c echo.Context) error {
	r := c.Request()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	root := scheme + "://" + r.Host + a.base
	links := map[string]actuatorLink{
		"self":        {Href: root},
		"health":      {Href: root + "/health"},
		"health-path": {Href: root + "/health/{*path}", Templated: true},
		"info":        {Href: root + "/info"},
		"prometheus":  {Href: root + "/prometheus"},
	}
	return a.writeJSON(c, http.StatusOK, map[string]any{"_links": links})
}

// Spring Boot's actuator media types. Asked for by name, a type is
// answered in it; otherwise (no Accept, */*) Spring answers v3.
const (
	ActuatorV3JSON = "application/vnd.spring-boot.actuator.v3+json"
	ActuatorV2JSON = "application/vnd.spring-boot.actuator.v2+json"
)

func actuatorContentType(accept string) string {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case ActuatorV3JSON:
			return ActuatorV3JSON
		case ActuatorV2JSON:
			return ActuatorV2JSON
		case "application/json":
			return "application/json"
		}
	}
	return ActuatorV3JSON
}

func (a *Actuator) writeJSON(c echo.Context, code int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(code, actuatorContentType(c.Request().Header.Get("Accept")), b)
}

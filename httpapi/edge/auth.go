package edge

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi/httpkit"

	"github.com/muster-registry/muster/replication"
)

// access is what a route needs.
type access int

const (
	accessOpen  access = iota // probes: /livez, /readyz
	accessRead                // GETs of the Eureka API, dashboard, /metrics
	accessWrite               // register, renew, cancel, status, metadata (per app)
	accessAdmin               // /admin/* and anything not listed
	accessPeer                // POST /peerreplication/batch
)

// accessFor classifies a request by method and echo route template. A
// route added later that is not listed here needs admin, so a new endpoint
// is never open by mistake.
func accessFor(method, route string) access {
	switch route {
	case "/livez", "/readyz":
		return accessOpen
	case "/", "/dashboard", "/static/*", "/metrics", "/eureka/watch",
		"/console", "/console/instances", "/console/apps/:app", "/console/api/summary", "/lastn":
		return accessRead
	case "/admin/drain/:app/:id":
		// A drain, its receipt and an undrain are the app's own writes: a
		// preStop hook drains with the app's write user, so no app pod
		// needs an admin password. The list of every drain stays admin.
		return accessWrite
	}
	for _, base := range []string{"/eureka/v2/", "/eureka/", "/v2/"} {
		if rest, ok := strings.CutPrefix(route, base); ok {
			switch {
			case rest == "peerreplication/batch", rest == "peerreplication/digest", rest == "peerreplication/copies",
				rest == "peerreplication/drain-readers":
				return accessPeer
			case method == http.MethodGet || method == http.MethodHead:
				return accessRead
			case strings.HasPrefix(rest, "apps/"):
				return accessWrite
			}
			return accessAdmin
		}
	}
	return accessAdmin
}

// Guard checks who calls: HTTP Basic users (spring.security.user,
// muster.auth.users) and signed peers (cluster.peer-secret). With neither
// configured the node is open, as Eureka is.
type Guard struct {
	users       *auth.Authenticator // nil: no client authentication
	peers       *auth.PeerVerifier  // nil: no peer secret
	maxPeerBody int64
	now         func() time.Time
	log         zerolog.Logger
	failures    *prometheus.CounterVec
	peerLogs    *sourceLimiter
	// mounted holds the classes of routes mounted at configured paths
	// (httpapi/ops: the actuator), which accessFor cannot list.
	mounted map[string]access
}

// GuardConfig is what the guard checks against.
type GuardConfig struct {
	// Users checks HTTP Basic credentials; nil leaves client routes open.
	Users *auth.Authenticator
	// Peers checks peer signatures (cluster.peer-secret); nil means none
	// are required.
	Peers *auth.PeerVerifier
	// MaxPeerBody is the largest signed body read to verify it (the batch
	// limit).
	MaxPeerBody int64
	Now         func() time.Time
	Logger      zerolog.Logger
}

// NewGuard returns the guard of cfg.
func NewGuard(cfg GuardConfig) *Guard {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	g := &Guard{
		users:       cfg.Users,
		peers:       cfg.Peers,
		maxPeerBody: cfg.MaxPeerBody,
		now:         now,
		log:         cfg.Logger,
		peerLogs:    newSourceLimiter(time.Minute, 1024),
		mounted:     map[string]access{},
	}
	g.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "muster_auth_failures_total",
		Help: "Requests refused by authentication (401) or authorisation (403), by reason.",
	}, []string{"reason"})
	var reasons []auth.Failure
	if g.users != nil {
		reasons = append(reasons, auth.FailureMissing, auth.FailureMalformed, auth.FailureUnknownUser, auth.FailureBadPassword, auth.FailureForbidden)
	}
	if g.peers != nil {
		reasons = append(reasons, auth.FailurePeerRequired, auth.FailurePeerMalformed, auth.FailurePeerBad, auth.FailurePeerStale, auth.FailurePeerReplayed)
	}
	for _, r := range reasons {
		g.failures.WithLabelValues(string(r))
	}
	return g
}

// AuthEnabled reports whether users are configured: then only admin users
// may use the console's actions.
func (g *Guard) AuthEnabled() bool { return g.users != nil }

// Failures is muster_auth_failures_total, for the server's metrics.
func (g *Guard) Failures() prometheus.Collector { return g.failures }

// Mount classes a route mounted at a configured path (the actuator's),
// which accessFor cannot list: open, or the read role.
func (g *Guard) Mount(path string, open bool) {
	if open {
		g.mounted[path] = accessOpen
	} else {
		g.mounted[path] = accessRead
	}
}

// Authenticate is the route middleware that enforces the guard. It runs
// before the handler reads anything, so a refused request changes nothing.
// It also decides whether the replication header counts: it is kept only
// on a request signed by a peer, or, without a peer secret, from an admin
// user or on an open node; otherwise it is dropped and the request is an
// ordinary client request (a write is then applied and replicated to every
// peer like any other).
func (g *Guard) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if g.users == nil && g.peers == nil {
			return next(c)
		}
		req := c.Request()
		need, ok := g.mounted[c.Path()]
		if !ok {
			need = accessFor(req.Method, c.Path())
		}
		if need == accessOpen {
			return next(c)
		}
		if g.peers != nil && auth.HasPeerSignature(req.Header) {
			if err := g.verifyPeer(c); err != nil {
				return err
			}
			if need != accessRead && need != accessPeer {
				return g.refuse(c, auth.FailureForbidden, http.StatusForbidden,
					"a peer signature is good for replication batches and registry reads only")
			}
			return next(c)
		}
		if need == accessPeer && g.peers != nil {
			g.logPeer(c, auth.FailurePeerRequired, "")
			return g.refuse(c, auth.FailurePeerRequired, http.StatusForbidden,
				"replication batches are accepted only with a valid peer signature (cluster.peer-secret); user credentials do not replace it")
		}
		var user *auth.User
		if g.users != nil {
			u, err := g.basic(c)
			if err != nil {
				return err
			}
			if err := g.authorize(c, u, need); err != nil {
				return err
			}
			user = u
			httpkit.SetUser(c, u)
		}
		if _, marked := req.Header[replication.HeaderReplication]; marked && (g.peers != nil || (user != nil && !user.IsAdmin())) {
			delete(req.Header, replication.HeaderReplication)
		}
		return next(c)
	}
}

// MayRead tells whether r carries credentials good for the read role,
// without answering: the actuator's show-details when-authorized.
func (g *Guard) MayRead(r *http.Request) bool {
	if g.users == nil {
		return false
	}
	name, password, ok := r.BasicAuth()
	if !ok {
		return false
	}
	u, f := g.users.Authenticate(name, password)
	return f == auth.FailureNone && u.MayRead()
}

// basic reads and checks HTTP Basic credentials.
func (g *Guard) basic(c echo.Context) (*auth.User, error) {
	req := c.Request()
	if len(req.Header["Authorization"]) == 0 {
		return nil, g.challenge(c, auth.FailureMissing, "authentication required: send HTTP Basic credentials (http://user:password@host:port/eureka/)")
	}
	name, password, ok := req.BasicAuth()
	if !ok {
		return nil, g.challenge(c, auth.FailureMalformed, "malformed Authorization header: want Basic base64(user:password)")
	}
	u, f := g.users.Authenticate(name, password)
	if f != auth.FailureNone {
		// One text for both, so the answer does not tell which users exist.
		return nil, g.challenge(c, f, "bad credentials")
	}
	return u, nil
}

// authorize checks a user's role against what the route needs.
func (g *Guard) authorize(c echo.Context, u *auth.User, need access) error {
	switch need {
	case accessRead:
		if u.MayRead() {
			return nil
		}
	case accessWrite:
		app, err := httpkit.PathParam(c, "app")
		if err != nil {
			return err
		}
		if u.MayWrite(app) {
			return nil
		}
		if u.Role == auth.RoleWrite {
			return g.refuse(c, auth.FailureForbidden, http.StatusForbidden, "user "+u.Name+" may not change app "+strings.ToUpper(app))
		}
	case accessAdmin, accessPeer:
		if u.IsAdmin() {
			return nil
		}
	}
	return g.refuse(c, auth.FailureForbidden, http.StatusForbidden, "user "+u.Name+" ("+u.Role.String()+") may not do this")
}

// verifyPeer checks a request's peer signature. The body is read here (up
// to the batch limit) and put back for the handler.
func (g *Guard) verifyPeer(c echo.Context) error {
	req := c.Request()
	var body []byte
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 {
		if req.ContentLength > g.maxPeerBody {
			return ErrBodyTooLarge(g.maxPeerBody)
		}
		b, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, g.maxPeerBody))
		if err != nil {
			var maxBytes *http.MaxBytesError
			if errors.As(err, &maxBytes) {
				return ErrBodyTooLarge(g.maxPeerBody)
			}
			if errors.Is(err, ErrBodyReadTimeout) {
				return ErrBodyReadTimeout
			}
			return httpkit.BadRequest("reading request body: %v", err)
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	_, f := g.peers.Verify(req.Header, req.Method, req.URL.EscapedPath(), req.URL.RawQuery, body, g.now())
	if f == auth.FailureNone {
		return nil
	}
	g.logPeer(c, f, req.Header.Get(auth.HeaderPeerNode))
	return g.challenge(c, f, "peer signature refused: "+peerFailureText(f))
}

func peerFailureText(f auth.Failure) string {
	switch f {
	case auth.FailurePeerStale:
		return "timestamp outside the allowed clock skew"
	case auth.FailurePeerReplayed:
		return "already used (replay)"
	case auth.FailurePeerMalformed:
		return "signature headers missing or unreadable"
	}
	return "bad signature (different cluster.peer-secret?)"
}

// challenge answers 401 with the Basic challenge Spring's clients expect.
func (g *Guard) challenge(c echo.Context, f auth.Failure, msg string) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="muster"`)
	return g.refuse(c, f, http.StatusUnauthorized, msg)
}

func (g *Guard) refuse(c echo.Context, f auth.Failure, code int, msg string) error {
	g.failures.WithLabelValues(string(f)).Inc()
	return echo.NewHTTPError(code, msg)
}

// logPeer writes one line per refused peer request, at most one per source
// address per minute. It never logs credentials or signatures; the node
// name is what the request claims.
func (g *Guard) logPeer(c echo.Context, f auth.Failure, claimedNode string) {
	src, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		src = c.Request().RemoteAddr
	}
	suppressed, ok := g.peerLogs.allow(src, g.now())
	if !ok {
		return
	}
	if len(claimedNode) > 64 {
		claimedNode = claimedNode[:64]
	}
	claimedNode = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, claimedNode)
	g.log.Warn().Str("source", src).Str("reason", string(f)).Str("claimed_node", claimedNode).
		Str("path", c.Request().URL.Path).Int("suppressed_since_last", suppressed).
		Msg("refused peer request")
}

// sourceLimiter lets one event per source through per interval, and counts
// the ones it held back. It forgets everything when it tracks too many
// sources, so its memory stays bounded.
type sourceLimiter struct {
	interval time.Duration
	limit    int

	// mu guards last.
	mu   sync.Mutex
	last map[string]*sourceState
}

type sourceState struct {
	at         time.Time
	suppressed int
}

func newSourceLimiter(interval time.Duration, limit int) *sourceLimiter {
	return &sourceLimiter{interval: interval, limit: limit, last: map[string]*sourceState{}}
}

// allow reports whether an event from src may be logged now, and how many
// were held back since the last one that was.
func (l *sourceLimiter) allow(src string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.last[src]
	if ok && now.Sub(st.at) < l.interval {
		st.suppressed++
		return 0, false
	}
	if !ok {
		if len(l.last) >= l.limit {
			clear(l.last)
		}
		st = &sourceState{}
		l.last[src] = st
	}
	n := st.suppressed
	st.at, st.suppressed = now, 0
	return n, true
}

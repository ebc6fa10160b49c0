package eureka

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/httpapi/edge"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
)

// BatchHandler applies an inbound peer replication batch (POST
// /peerreplication/batch): it decodes body, applies every item and returns
// the encoded response. An error means the body as a whole could not be
// read (400); per-item failures are in the response.
type BatchHandler func(body []byte) (response []byte, err error)

// Registry is what the Eureka API needs of the registry: one write path
// (every request is an operation from a client or, with the replication
// header, a peer), its snapshots and lookups, and the change stream for
// blocking fetches and watch streams. *registry.Registry implements it;
// every method must be safe for concurrent use.
type Registry interface {
	Apply(registry.Op) (*registry.Instance, error)
	Instance(app, id string) (registry.InstanceView, bool)
	InstanceByID(id string) (registry.InstanceView, bool)
	Snapshot() *registry.Snapshot
	Version() uint64
	Subscribe() *registry.Cursor
	SubscribeAfter(seq uint64) (*registry.Cursor, bool)
}

var _ Registry = (*registry.Registry)(nil)

// Config wires the Eureka API to the node. httpapi fills it from its own
// Config, where each knob's key and default are documented.
type Config struct {
	Registry Registry
	Node     ops.NodeInfo
	Logger   zerolog.Logger
	// Ready: syncUp is done (peers copying the registry get 503 before).
	// ReadsAllowed: registry reads may be answered (403 otherwise, so
	// clients fail over). Peers: for GET /status. nil means always, always
	// and none.
	Ready        func() bool
	ReadsAllowed func() bool
	Peers        func() []ops.PeerInfo
	// Batch handles POST /peerreplication/batch (nil answers 501); Digests
	// serves anti-entropy (nil answers 404, as a Java server does).
	Batch   BatchHandler
	Digests replication.DigestSource
	// DisableDelta answers GET /apps/delta with 403.
	DisableDelta bool
	// Body limits of client requests and of peer batches (413 beyond).
	MaxBodyBytes, MaxBatchBodyBytes int64
	// Watches: the longest wait of a blocking fetch, how many may be held
	// at once (0: no limit) and the clock a wait runs on (nil: real
	// timers).
	WatchMaxWait     time.Duration
	WatchMaxWatchers int
	WatchTimer       func(d time.Duration) (<-chan time.Time, func())
	// Now is the clock of GET /status's uptime; nil means time.Now.
	Now func() time.Time
	// Regions are the remote regions served with regions= and in
	// transparent fallback (nil: none). DeltaRetention is how far back a
	// merged delta takes the remote regions' changes (the registry's
	// delta retention; 0: 3 min).
	Regions        RemoteRegions
	DeltaRetention time.Duration
	// Drain notes the clients' reads in its reader table and answers
	// peers' questions about them (POST /peerreplication/drain-readers);
	// nil: no reads are noted and the endpoint answers 404.
	Drain *drain.Drainer
}

// API is Eureka's REST API under /eureka/, /eureka/v2/ and /v2/, the peer
// endpoints and the watch stream. New starts nothing: the watch hub's feed
// starts with the first watch, and StopWatches ends it.
//
// The API serves the registry reads itself and composes the other
// concerns: the clients' writes, the held reads (blocking fetches and the
// watch stream), the remote regions' data and the peer endpoints.
type API struct {
	cfg      Config
	reg      Registry
	log      zerolog.Logger
	payloads *payloadCache
	pieces   *pieceStore
	watch    *watchHub
	now      func() time.Time
	started  time.Time

	writes clientWrites
	holds  *watches
	remote *remoteReads
	peers  peerEndpoints
	// readers is Drain's reader table; nil when there is none.
	readers *drain.Readers
}

// New builds the API over cfg.Registry, which must be set.
func New(cfg Config) *API {
	s := &API{cfg: cfg, reg: cfg.Registry, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Ready == nil {
		s.cfg.Ready = func() bool { return true }
	}
	if s.cfg.ReadsAllowed == nil {
		s.cfg.ReadsAllowed = s.cfg.Ready
	}
	if s.cfg.Peers == nil {
		s.cfg.Peers = func() []ops.PeerInfo { return nil }
	}
	s.started = s.now()
	s.log = cfg.Logger
	s.payloads = newPayloadCache(defaultPayloadCacheEntries)
	s.pieces = newPieceStore()
	s.watch = newWatchHub(cfg.Registry, s.log)
	s.writes = clientWrites{reg: cfg.Registry, leaving: s.forgetReader}
	s.remote = newRemoteReads(cfg.Regions, cfg.DeltaRetention)
	s.holds = &watches{reg: cfg.Registry, watch: s.watch, watchTimer: cfg.WatchTimer,
		maxWait: cfg.WatchMaxWait, maxWatchers: cfg.WatchMaxWatchers, remote: s.remote,
		readsAllowed: s.readsAllowed, streamRun: strconv.FormatUint(rand.Uint64()>>16, 36), noteStream: s.noteStream}
	if s.holds.watchTimer == nil {
		s.holds.watchTimer = realTimer
	}
	s.peers = peerEndpoints{batchHandler: cfg.Batch, digests: cfg.Digests, drain: cfg.Drain}
	if cfg.Drain != nil {
		s.readers = cfg.Drain.Readers()
	}
	return s
}

// Bases are the paths the API answers under: Spring's /eureka/ and
// Netflix's /eureka/v2/ (and bare /v2/); Eureka treats any other version
// segment as V2 as well.
var Bases = []string{"/eureka", "/eureka/v2", "/v2"}

// Route adds a route with the server's middleware.
type Route func(path string, h echo.HandlerFunc, extra ...echo.MiddlewareFunc)

// Routes mounts the API; group returns the adders (POST, PUT, GET,
// DELETE) under a base, root the GET adder at the root.
func (s *API) Routes(group func(base string) (post, put, get, del Route), rootGet Route) {
	w, peers := s.writes, s.peers
	for _, base := range Bases {
		post, put, get, del := group(base)
		post("/apps/:app", w.register, edge.LimitBody(s.cfg.MaxBodyBytes))
		put("/apps/:app/:id", w.heartbeat)
		del("/apps/:app/:id", w.cancel)
		put("/apps/:app/:id/status", w.updateStatus)
		del("/apps/:app/:id/status", w.deleteStatusOverride)
		put("/apps/:app/:id/metadata", w.updateMetadata)
		get("/apps", s.getApps)
		get("/apps/delta", s.getDelta)
		get("/apps/:app", s.getApp)
		get("/apps/:app/:id", s.getAppInstance)
		get("/instances/:id", s.getInstanceByID)
		get("/vips/:vip", s.getVIP)
		get("/svips/:vip", s.getSVIP)
		get("/status", s.getStatus)
		post("/peerreplication/batch", peers.batch, edge.LimitBody(s.cfg.MaxBatchBodyBytes))
		post("/peerreplication/digest", peers.digest, edge.LimitBody(s.cfg.MaxBodyBytes))
		post("/peerreplication/copies", peers.copies, edge.LimitBody(s.cfg.MaxBodyBytes))
		post(DrainReadersPath, peers.drainReaders, edge.LimitBody(s.cfg.MaxBodyBytes))
	}
	rootGet("/eureka/watch", s.holds.watchStream)
}

// Collectors are the API's own metrics: payload encodings and assemblies,
// and the watches'.
func (s *API) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_payload_encodings_total", Help: "Payload pieces encoded: an app's or a delta group's JSON or XML, plain or compressed (at most one per changed app and form), and partial apps of VIP lookups."},
			func() float64 { return float64(s.pieces.encodings.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_payload_assemblies_total", Help: "Registry payloads assembled from pieces (at most one per kind, format and registry version)."},
			func() float64 { return float64(s.payloads.buildCount()) }),
	}
	return append(cs, s.watch.collectors()...)
}

// IsReplication reports whether a request carries the replication header
// (kept by the guard only where it can be trusted).
func IsReplication(c echo.Context) bool { return isReplication(c) }

// Held reports whether a request was held (a blocking fetch or a watch
// stream), whose latency is kept apart from plain reads.
func Held(c echo.Context) bool { return c.Get(heldKey) != nil }

package xds

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/registry"
)

// Registry is what the xDS server reads of the registry: its change stream
// (to wake on every change batch) and its current snapshot (the state it
// serves). *registry.Registry implements it.
type Registry interface {
	Subscribe() *registry.Cursor
	Snapshot() *registry.Snapshot
}

// Options are a server's collaborators.
type Options struct {
	Registry Registry
	// Opened is closed once the node is open for traffic; nothing is served
	// before (nil: open at once).
	Opened <-chan struct{}
	// Ready tells whether registry reads are allowed (false while a node
	// that could not sync refuses reads); nil: always.
	Ready func() bool
	// Users checks the credentials of a stream; nil leaves xDS open.
	Users *auth.Authenticator
	// TLS is the listener's TLS (the node's server.ssl.*, reloading); nil
	// serves plaintext.
	TLS     *tls.Config
	Metrics prometheus.Registerer // nil: not registered
	Logger  zerolog.Logger
}

// Server is the xDS control plane of one node.
type Server struct {
	cfg     Config
	opts    Options
	cache   cache.SnapshotCache
	hash    *zoneHash
	m       *metrics
	streams *streams
	grpc    *grpc.Server
	log     zerolog.Logger

	// mu guards ln, cancel and done.
	mu     sync.Mutex
	ln     net.Listener
	cancel context.CancelFunc
	done   chan struct{}

	// pubMu guards published and pushedAt.
	pubMu     sync.Mutex
	published string               // EDS version of the last snapshot set
	pushedAt  map[string]time.Time // version → when its change was read
	pushOrder []string
}

// New builds a server; Start listens and follows the registry.
func New(cfg Config, o Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Registry == nil {
		return nil, errors.New("xds: no registry")
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	s := &Server{cfg: cfg, opts: o, hash: &zoneHash{}, m: newMetrics(o.Metrics), log: o.Logger,
		pushedAt: map[string]time.Time{}}
	s.streams = newStreams(cfg.MaxStreams, o.Users, s.m)
	s.cache = cache.NewSnapshotCache(false, s.hash, nil)
	return s, nil
}

// Start listens on cfg.Addr and follows the registry until Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	gopts := []grpc.ServerOption{
		grpc.StreamInterceptor(s.streams.intercept),
		grpc.UnaryInterceptor(s.streams.interceptUnary),
		// Envoy and grpc-go keep their ADS stream open for hours; let them
		// ping to keep it alive through NATs and load balancers.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(4 << 20),
	}
	if s.opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(s.opts.TLS)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := xdsserver.NewServer(ctx, s.cache, s.streams.callbacks(s))
	g := grpc.NewServer(gopts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, srv)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, srv)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, srv)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, srv)
	routeservice.RegisterRouteDiscoveryServiceServer(g, srv)
	done := make(chan struct{})
	s.mu.Lock()
	s.ln, s.cancel, s.done, s.grpc = ln, cancel, done, g
	s.mu.Unlock()
	cur := s.opts.Registry.Subscribe()
	go func() {
		defer close(done)
		defer cur.Close()
		s.follow(ctx, cur)
	}()
	go func() { _ = g.Serve(ln) }()
	return nil
}

// Addr is the address served, nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown ends every stream and stops following the registry.
func (s *Server) Shutdown() {
	s.mu.Lock()
	g, cancel, done := s.grpc, s.cancel, s.done
	s.grpc, s.cancel = nil, nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	cancel()
	// Stop, not GracefulStop: xDS streams never end on their own.
	g.Stop()
	<-done
}

// follow sets a snapshot for every change batch read from the stream,
// once the node is open for traffic and allows reads.
func (s *Server) follow(ctx context.Context, cur *registry.Cursor) {
	if s.opts.Opened != nil {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Opened:
		}
	}
	// A node that opened without its peers' registry refuses reads for a
	// while (by the registry's clock); until then xDS serves nothing too.
	for !s.opts.Ready() {
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	b := newBuilder(newEpoch())
	buf := make([]registry.Event, 0, 1024)
	s.publish(b, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-cur.Ready():
		}
		read := time.Now()
		// Drain what is there: one snapshot for the whole batch. A resync
		// needs nothing more, since the snapshot is rebuilt from the
		// registry's current state anyway.
		for {
			evs, resync := cur.Read(buf)
			if len(evs) == 0 && !resync {
				break
			}
		}
		s.publish(b, read)
	}
}

// publish builds the registry's current state and sets it for every zone.
func (s *Server) publish(b *builder, read time.Time) {
	snap := s.opts.Registry.Snapshot()
	s.pubMu.Lock()
	same := s.published == b.epoch+"."+strconv.FormatUint(snap.Version, 10)
	s.pubMu.Unlock()
	if same {
		return // a spurious wake, or a write that changed nothing visible
	}
	t0 := time.Now()
	bt := b.update(snap)
	s.hash.set(bt.zones)
	s.notePublished(bt.version, read)
	ctx := context.Background()
	s.setSnapshot(ctx, "", bt.snapshot(""))
	for z := range bt.zones {
		s.setSnapshot(ctx, z, bt.snapshot(z))
	}
	for _, key := range s.cache.GetStatusKeys() {
		if key != "" && !bt.zones[key] {
			// A zone without endpoints now: its clients moved to "" at
			// their next request; stale watches get the zone-less view.
			s.setSnapshot(ctx, key, bt.snapshot(""))
		}
	}
	s.m.builds.Inc()
	s.m.buildSeconds.Observe(time.Since(t0).Seconds())
	s.m.names.Set(float64(len(bt.names)))
}

func (s *Server) setSnapshot(ctx context.Context, key string, snap *cache.Snapshot) {
	if err := s.cache.SetSnapshot(ctx, key, snap); err != nil {
		s.log.Warn().Err(err).Str("zone", key).Msg("xds: setting the snapshot")
	}
}

// notePublished remembers when version's change was read, for the push
// latency of the responses that carry it.
func (s *Server) notePublished(version string, read time.Time) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.published = version
	s.pushedAt[version] = read
	s.pushOrder = append(s.pushOrder, version)
	if len(s.pushOrder) > 256 {
		delete(s.pushedAt, s.pushOrder[0])
		s.pushOrder = s.pushOrder[1:]
	}
}

// changeRead is when the change a version carries was read from the
// stream; ok is false for an unknown or too old version.
func (s *Server) changeRead(version string) (time.Time, bool) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	t, ok := s.pushedAt[version]
	return t, ok
}

// Version is the EDS version last set ("" before the node opened).
func (s *Server) Version() string {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.published
}

// Clients lists the open xDS streams, oldest first.
func (s *Server) Clients() []Client { return s.streams.list() }

func newEpoch() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// zoneHash keys the snapshot cache by the client's zone when that zone has
// a snapshot of its own, else "".
type zoneHash struct {
	mu    sync.RWMutex
	zones map[string]bool // guarded by mu
}

func (h *zoneHash) set(z map[string]bool) {
	h.mu.Lock()
	h.zones = z
	h.mu.Unlock()
}

// ID implements cache.NodeHash.
func (h *zoneHash) ID(node *corev3.Node) string {
	z := node.GetLocality().GetZone()
	if z == "" {
		return ""
	}
	h.mu.RLock()
	ok := h.zones[z]
	h.mu.RUnlock()
	if ok {
		return z
	}
	return ""
}

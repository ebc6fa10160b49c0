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

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
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
	// OnAck hears of each state-of-the-world EDS acknowledgement of a
	// version this node published: the stream's node id and remote IP,
	// the resource names it asked for (none: every one) and the registry
	// version (Snapshot.Version) those resources are current at. A drain's
	// reader (package drain). nil: none.
	OnAck func(node, addr string, names []string, version uint64)
}

// StreamWindow is the HTTP/2 receive window of an xDS connection and of
// each stream on it: 64 KiB (HTTP/2's default is one byte less), static.
const StreamWindow = 1 << 16

// Server is the xDS control plane of one node.
type Server struct {
	cfg     Config
	opts    Options
	caches  *caches
	m       *metrics
	streams *streams
	grpc    *grpc.Server
	log     zerolog.Logger

	// mu guards ln, cancel and done.
	mu     sync.Mutex
	ln     net.Listener
	cancel context.CancelFunc
	done   chan struct{}

	// pubMu guards published and lastRead.
	pubMu     sync.Mutex
	published string    // registry version last published, with the epoch
	lastRead  time.Time // when the change last published was read
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
	s := &Server{cfg: cfg, opts: o, m: newMetrics(o.Metrics), log: o.Logger, caches: newCaches(newEpoch(), o.Logger)}
	s.streams = newStreams(cfg.MaxStreams, o.Users, s.m)
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
		// An idle stream is mostly its connection's buffers: release the
		// write buffer between writes, and read in smaller chunks (xDS
		// requests are small).
		grpc.SharedWriteBuffer(true),
		grpc.ReadBufferSize(8 << 10),
		// A static receive window: clients send only requests and ACKs (a
		// few hundred bytes), which never need a window above HTTP/2's
		// default, and grpc-go's window estimation (BDP) would answer
		// every ACK with a window update and a PING the client must read
		// and answer: two more frames, wake-ups and syscalls per push on
		// both sides, at every stream.
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(StreamWindow),
	}
	if s.opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(s.opts.TLS)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Ordered ADS: an ADS stream's responses of every type come through one
	// channel and a plain select, in the order the caches produced them,
	// instead of a channel per request and a reflect.Select rebuilt at
	// every ACK (the unordered path); requests, versions, nonces and ACKs
	// are handled alike. The per-type services are unchanged.
	srv := xdsserver.NewServer(ctx, s.caches, s.streams.callbacks(s), sotw.WithOrderedADS())
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
	b := newBuilder(s.caches.epoch)
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

// publish builds the registry's current state and sets what changed.
func (s *Server) publish(b *builder, read time.Time) {
	snap := s.opts.Registry.Snapshot()
	version := b.epoch + "." + strconv.FormatUint(snap.Version, 10)
	s.pubMu.Lock()
	same := s.published == version
	s.pubMu.Unlock()
	if same {
		return // a spurious wake, or a write that changed nothing visible
	}
	t0 := time.Now()
	bt := b.update(snap)
	s.pubMu.Lock()
	s.published, s.lastRead = version, read
	s.pubMu.Unlock()
	if err := s.caches.publish(bt); err != nil {
		s.log.Warn().Err(err).Msg("xds: publishing a registry version")
	}
	s.m.builds.Inc()
	s.m.buildSeconds.Observe(time.Since(t0).Seconds())
	s.m.names.Set(float64(len(bt.names)))
}

// changeRead is when the change last published was read off the stream.
func (s *Server) changeRead() time.Time {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.lastRead
}

// Version is the registry version last published, with the process's
// epoch ("" before the node opened).
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

package xds

import (
	"context"
	"encoding/base64"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/muster-registry/muster/auth"
)

// Client is one open xDS stream as the console shows it.
type Client struct {
	Node        string    // the node id the client sent
	Cluster     string    // the node cluster the client sent
	Zone        string    // the client's locality zone
	Addr        string    // remote address
	Since       time.Time // when the stream opened
	Incremental bool      // delta xDS rather than state of the world
	// Types are the resource types asked for (cds, eds, lds, rds), sorted.
	Types []string
	// Version is the last EDS (else any) version the client acknowledged.
	Version string
	NACKs   int
	// LastNACK is the client's error_detail message of its last rejection
	// (at most 200 bytes).
	LastNACK string
}

// streamKey tells SotW and delta streams apart: the library numbers each
// kind on its own.
type streamKey struct {
	delta bool
	id    int64
}

// streams counts, checks and lists the server's xDS streams.
type streams struct {
	max    int64
	users  *auth.Authenticator
	m      *metrics
	active atomic.Int64

	// mu guards open and delta.
	mu    sync.Mutex
	open  map[streamKey]*Client
	delta map[int64]*deltaEDS // incremental streams' EDS, by stream id
}

// deltaEDS is what an incremental stream's EDS acknowledgements need to be
// a drain's reads: the names it subscribes to, and the cache version each
// of its recent responses was sent at (an incremental client acknowledges
// a response by its nonce, without a version).
type deltaEDS struct {
	seen     bool // an EDS request came: the first decides the wildcard
	wildcard bool
	names    map[string]bool
	sent     []sentDelta // the newest maxUnackedDelta responses, oldest first
}

type sentDelta struct{ nonce, version string }

// maxUnackedDelta bounds the responses remembered per incremental stream
// for their acknowledgements: a client acknowledges each before the next
// is sent, so a few cover any real client.
const maxUnackedDelta = 16

func newStreams(max int, users *auth.Authenticator, m *metrics) *streams {
	return &streams{max: int64(max), users: users, m: m, open: map[streamKey]*Client{}, delta: map[int64]*deltaEDS{}}
}

// intercept admits a stream: authorised, and under muster.xds.max-streams.
func (st *streams) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := st.authorize(ss.Context()); err != nil {
		return err
	}
	if st.active.Add(1) > st.max {
		st.active.Add(-1)
		st.m.refused.WithLabelValues("max_streams").Inc()
		return status.Errorf(codes.ResourceExhausted,
			"muster.xds.max-streams (%d) reached on this node: connect to another node of the cluster or retry later", st.max)
	}
	st.m.streams.Inc()
	defer func() {
		st.active.Add(-1)
		st.m.streams.Dec()
	}()
	return handler(srv, ss)
}

// interceptUnary checks the unary Fetch calls as streams are checked.
func (st *streams) interceptUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := st.authorize(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// authorize lets a stream read the registry when the node has no users, or
// it comes with a client certificate the node verified (server.ssl
// client-auth want or need), or with HTTP Basic credentials of a user with
// the read role in its "authorization" metadata. Refusals say what is
// wanted, never which part of a credential was wrong.
func (st *streams) authorize(ctx context.Context) error {
	if st.users == nil {
		return nil
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			return nil
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		st.m.refused.WithLabelValues("unauthenticated").Inc()
		return status.Error(codes.Unauthenticated,
			"authentication required: send HTTP Basic credentials in the authorization metadata (Basic base64(user:password)) or a client certificate")
	}
	name, password, ok := parseBasic(vals[0])
	if !ok {
		st.m.refused.WithLabelValues("unauthenticated").Inc()
		return status.Error(codes.Unauthenticated, "malformed authorization metadata: want Basic base64(user:password)")
	}
	u, f := st.users.Authenticate(name, password)
	if f != auth.FailureNone {
		st.m.refused.WithLabelValues("unauthenticated").Inc()
		return status.Error(codes.Unauthenticated, "bad credentials")
	}
	if !u.MayRead() {
		st.m.refused.WithLabelValues("forbidden").Inc()
		return status.Error(codes.PermissionDenied, "user "+u.Name+" may not read the registry")
	}
	return nil
}

func parseBasic(v string) (name, password string, ok bool) {
	const prefix = "basic "
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	name, password, ok = strings.Cut(string(raw), ":")
	return name, password, ok
}

// callbacks are the library's hooks: the stream list, pushes, NACKs and
// push latency.
func (st *streams) callbacks(s *Server) xdsserver.Callbacks {
	return xdsserver.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			st.opened(ctx, streamKey{false, id})
			return nil
		},
		StreamClosedFunc: func(id int64, _ *corev3.Node) { st.closed(streamKey{false, id}) },
		DeltaStreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			st.opened(ctx, streamKey{true, id})
			return nil
		},
		DeltaStreamClosedFunc: func(id int64, _ *corev3.Node) { st.closed(streamKey{true, id}) },
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			st.request(streamKey{false, id}, req.GetNode(), req.GetTypeUrl(), req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
			st.acked(s, streamKey{false, id}, req)
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			st.request(streamKey{true, id}, req.GetNode(), req.GetTypeUrl(), "", req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
			st.deltaAcked(s, id, req)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, req *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
			st.response(s, streamKey{false, id}, resp.GetTypeUrl(), req.GetVersionInfo() != "")
		},
		StreamDeltaResponseFunc: func(id int64, req *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
			st.deltaSent(id, resp)
			st.response(s, streamKey{true, id}, resp.GetTypeUrl(), req.GetResponseNonce() != "")
		},
	}
}

func (st *streams) opened(ctx context.Context, k streamKey) {
	c := &Client{Since: time.Now(), Incremental: k.delta}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.Addr = p.Addr.String()
	}
	st.mu.Lock()
	st.open[k] = c
	st.mu.Unlock()
}

func (st *streams) closed(k streamKey) {
	st.mu.Lock()
	delete(st.open, k)
	if k.delta {
		delete(st.delta, k.id)
	}
	st.mu.Unlock()
}

func (st *streams) request(k streamKey, node *corev3.Node, typeURL, version, nack string, isNACK bool) {
	t := typeLabel(typeURL)
	if isNACK {
		st.m.nacks.WithLabelValues(t).Inc()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.open[k]
	if c == nil {
		return
	}
	if node != nil && node.GetId() != "" {
		c.Node, c.Cluster, c.Zone = node.GetId(), node.GetCluster(), node.GetLocality().GetZone()
	}
	if i := sort.SearchStrings(c.Types, t); i == len(c.Types) || c.Types[i] != t {
		c.Types = append(c.Types, t)
		sort.Strings(c.Types)
	}
	switch {
	case isNACK:
		c.NACKs++
		if len(nack) > 200 {
			nack = nack[:200]
		}
		c.LastNACK = nack
	case version != "" && (t == "eds" || c.Version == ""):
		c.Version = version
	}
}

// acked passes an EDS acknowledgement of a known version to
// Options.OnAck. (Incremental streams acknowledge by nonce, without a
// version: deltaAcked.)
func (st *streams) acked(s *Server, k streamKey, req *discovery.DiscoveryRequest) {
	if s.opts.OnAck == nil || req.GetErrorDetail() != nil || req.GetVersionInfo() == "" || typeLabel(req.GetTypeUrl()) != "eds" {
		return
	}
	v, ok := s.caches.registryVersionOf(req.GetVersionInfo())
	if !ok {
		return
	}
	st.mu.Lock()
	c := st.open[k]
	var node, addr string
	if c != nil {
		node, addr = c.Node, c.Addr
	}
	st.mu.Unlock()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	s.opts.OnAck(node, addr, req.GetResourceNames(), v)
}

// deltaSent remembers the cache version of an EDS response on an
// incremental stream, for its acknowledgement.
func (st *streams) deltaSent(id int64, resp *discovery.DeltaDiscoveryResponse) {
	if typeLabel(resp.GetTypeUrl()) != "eds" || resp.GetNonce() == "" {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	d := st.deltaOfLocked(id)
	if len(d.sent) == maxUnackedDelta {
		d.sent = append(d.sent[:0], d.sent[1:]...)
	}
	d.sent = append(d.sent, sentDelta{resp.GetNonce(), resp.GetSystemVersionInfo()})
}

func (st *streams) deltaOfLocked(id int64) *deltaEDS {
	d := st.delta[id]
	if d == nil {
		d = &deltaEDS{names: map[string]bool{}}
		st.delta[id] = d
	}
	return d
}

// deltaAcked follows an incremental stream's EDS subscriptions and passes
// its acknowledgement of a response (by nonce) to Options.OnAck, with the
// names it subscribed to when that response was sent (none: the
// wildcard, every one), as acked does for a state-of-the-world stream.
func (st *streams) deltaAcked(s *Server, id int64, req *discovery.DeltaDiscoveryRequest) {
	if typeLabel(req.GetTypeUrl()) != "eds" {
		return
	}
	st.mu.Lock()
	d := st.deltaOfLocked(id)
	var version string
	var names []string
	if nonce := req.GetResponseNonce(); nonce != "" && req.GetErrorDetail() == nil {
		for i, r := range d.sent {
			if r.nonce == nonce {
				version, d.sent = r.version, d.sent[i+1:]
				break
			}
		}
		if !d.wildcard {
			names = make([]string, 0, len(d.names))
			for n := range d.names {
				names = append(names, n)
			}
		}
	}
	// The subscription changes this request carries apply to what comes
	// next, not to the response it acknowledges.
	if !d.seen {
		d.seen, d.wildcard = true, len(req.GetResourceNamesSubscribe()) == 0
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		if n == "*" {
			d.wildcard = true
		} else if len(d.names) < maxDeltaNames {
			d.names[n] = true
		}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		if n == "*" {
			d.wildcard = false
		} else {
			delete(d.names, n)
		}
	}
	var node, addr string
	if c := st.open[streamKey{true, id}]; c != nil {
		node, addr = c.Node, c.Addr
		if version != "" {
			c.Version = version
		}
	}
	st.mu.Unlock()
	if version == "" || s.opts.OnAck == nil || (names != nil && len(names) == 0) {
		return
	}
	v, ok := s.caches.registryVersionOf(version)
	if !ok {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	s.opts.OnAck(node, addr, names, v)
}

// maxDeltaNames bounds the names followed per incremental stream: the
// names are the client's, and only an app's (or VIP's) name can count.
const maxDeltaNames = 10_000

// response counts a response; one to a subscription that already had
// an answer (a push, not a first answer) on a stream open before the last
// change was read is timed from that read.
func (st *streams) response(s *Server, k streamKey, typeURL string, push bool) {
	st.m.pushesByType[typeLabel(typeURL)].Inc()
	if !push {
		return
	}
	read := s.changeRead()
	st.mu.Lock()
	c := st.open[k]
	st.mu.Unlock()
	if c != nil && !read.IsZero() && c.Since.Before(read) {
		st.m.pushLatency.Observe(time.Since(read).Seconds())
	}
}

func (st *streams) list() []Client {
	st.mu.Lock()
	out := make([]Client, 0, len(st.open))
	for _, c := range st.open {
		cc := *c
		cc.Types = append([]string(nil), c.Types...)
		out = append(out, cc)
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

func typeLabel(typeURL string) string {
	switch typeURL {
	case resource.ClusterType:
		return "cds"
	case resource.EndpointType:
		return "eds"
	case resource.ListenerType:
		return "lds"
	case resource.RouteType:
		return "rds"
	}
	return "other"
}

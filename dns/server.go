package dns

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/registry"
)

// Registry is what the DNS interface reads of the registry: its current
// snapshot, taken afresh for every query. *registry.Registry implements it.
type Registry interface {
	Snapshot() *registry.Snapshot
}

// Node is one live Muster node as DNS names it.
type Node struct {
	Name string // cluster node name, for <name>.node.<domain>
	Host string // the host of its Eureka URL, for the TXT records
	IP   string // the address <name>.node.<domain> resolves to
	Zone string
}

// Nodes lists the live nodes (self included); the node wiring builds it
// from cluster members' metadata.
type Nodes func() []Node

// Server is the DNS interface of one node.
type Server struct {
	cfg    Config
	domain string // lower-cased
	reg    Registry
	nodes  Nodes
	remote func(region, app string) (registry.AppView, bool, bool)
	// onAnswer is Options.OnAnswer; nil: none.
	onAnswer func(resolver netip.Addr, app string, version uint64)
	allowed  []netip.Prefix
	limiter  *limiter
	m        *metrics
	packed   packedCache

	// mu guards servers and addrs.
	mu      sync.Mutex
	servers []*mdns.Server
	addrs   []net.Addr
}

// Options are a server's collaborators.
type Options struct {
	Registry Registry
	Nodes    Nodes                 // nil: no nodes
	Metrics  prometheus.Registerer // nil: not registered
	Now      func() time.Time      // nil: time.Now; the rate limiter's clock
	// RemoteApp looks an app up in a remote region, for
	// <app>.app.<region>.<domain>: known reports whether the region is
	// one of the node's remote regions (nil: none).
	RemoteApp func(region, app string) (view registry.AppView, found, known bool)
	// OnAnswer hears of each answer to a query of a local app's name (its
	// addresses, SRV records, or that it has none) with the resolver that
	// asked and the registry version the answer is current at: a drain's
	// reader (package drain). It runs on the query's path: it must be
	// cheap. nil: none.
	OnAnswer func(resolver netip.Addr, app string, version uint64)
}

// New builds a server; Start listens.
func New(cfg Config, o Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Registry == nil {
		return nil, errors.New("dns: no registry")
	}
	allowed, _ := cfg.prefixes()
	if o.Nodes == nil {
		o.Nodes = func() []Node { return nil }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{cfg: cfg, domain: strings.ToLower(mdns.Fqdn(cfg.Domain)), reg: o.Registry, nodes: o.Nodes, remote: o.RemoteApp, onAnswer: o.OnAnswer,
		allowed: allowed, limiter: newLimiter(cfg.RateLimit, cfg.RateBurst, o.Now), m: newMetrics(o.Metrics)}
	return s, nil
}

// Start listens on cfg.Addr over UDP and TCP (same port; with port 0 the
// TCP port is the one the kernel chose for UDP) and serves until Shutdown.
func (s *Server) Start() error {
	pc, ln, err := listenBoth(s.cfg.Addr)
	if err != nil {
		return err
	}
	udp := &mdns.Server{PacketConn: pc, Handler: mdns.HandlerFunc(s.serveUDP)}
	tcp := &mdns.Server{Listener: ln, Handler: mdns.HandlerFunc(s.serveTCP)}
	s.mu.Lock()
	s.servers, s.addrs = []*mdns.Server{udp, tcp}, []net.Addr{pc.LocalAddr(), ln.Addr()}
	s.mu.Unlock()
	for _, srv := range s.servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
	}
	return nil
}

// listenBoth binds UDP and TCP on one port. With port 0 the kernel's UDP
// port may be in use over TCP (an ephemeral port of an outgoing
// connection, say), so a few other ports are tried before giving up.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	tries := 1
	if port == "0" {
		tries = 16
	}
	var err error
	for range tries {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return nil, nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			return pc, ln, nil
		}
		pc.Close()
	}
	return nil, nil, err
}

// Addr is the UDP address served (TCP is on the same port).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.addrs) == 0 {
		return nil
	}
	return s.addrs[0]
}

// Shutdown stops both listeners.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown())
	}
	return errors.Join(errs...)
}

func (s *Server) serveUDP(w mdns.ResponseWriter, q *mdns.Msg) { s.serve(w, q, false) }
func (s *Server) serveTCP(w mdns.ResponseWriter, q *mdns.Msg) { s.serve(w, q, true) }

func (s *Server) serve(w mdns.ResponseWriter, q *mdns.Msg, tcp bool) {
	start := time.Now()
	src := remoteAddr(w.RemoteAddr())
	if !s.allowedSource(src) {
		// Said nothing about the registry: a REFUSED with no records.
		s.m.refused.WithLabelValues("source").Inc()
		r := new(mdns.Msg)
		r.SetRcode(q, mdns.RcodeRefused)
		s.write(w, q, r, tcp, start)
		return
	}
	if !tcp && !s.limiter.allow(src) {
		// Dropped, not answered: a spoofed flood gets nothing to amplify; a
		// real client retries (or uses TCP, which is not limited).
		s.m.rateLimited.Inc()
		return
	}
	if s.serveFast(w, q, src, tcp, start) {
		return
	}
	var snap *registry.Snapshot // the answer is current at its version at least
	if s.onAnswer != nil {
		snap = s.reg.Snapshot()
	}
	r := s.answer(q)
	s.write(w, q, r, tcp, start)
	if s.onAnswer != nil && len(q.Question) == 1 {
		// An app's name answered the general way: no addresses (none UP,
		// e.g. the one instance drained) or a type the fast path leaves.
		// Only an app that exists: random names must not grow the
		// resolver's record.
		if app, _, _, ok := s.packable(strings.ToLower(q.Question[0].Name)); ok {
			if view, ok := snap.App(app); ok {
				s.onAnswer(src, view.Name, snap.Version)
			}
		}
	}
}

func (s *Server) write(w mdns.ResponseWriter, q, r *mdns.Msg, tcp bool, start time.Time) {
	size := mdns.MinMsgSize
	if opt := q.IsEdns0(); opt != nil {
		size = max(size, min(int(opt.UDPSize()), s.cfg.UDPMaxSize))
		r.SetEdns0(uint16(min(s.cfg.UDPMaxSize, 65535)), false)
	}
	if tcp {
		size = mdns.MaxMsgSize
	}
	r.Truncate(size)
	if r.Truncated {
		s.m.truncated.Inc()
	}
	_ = w.WriteMsg(r)
	qtype := "none"
	if len(q.Question) == 1 {
		qtype = typeLabel(q.Question[0].Qtype)
	}
	s.m.queries.WithLabelValues(qtype, mdns.RcodeToString[r.Rcode]).Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
}

func typeLabel(t uint16) string {
	switch t {
	case mdns.TypeA, mdns.TypeAAAA, mdns.TypeSRV, mdns.TypeTXT, mdns.TypeSOA, mdns.TypeNS, mdns.TypeANY:
		return mdns.TypeToString[t]
	}
	return "other" // bounded label set whatever clients send
}

func remoteAddr(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

func (s *Server) allowedSource(a netip.Addr) bool {
	if len(s.allowed) == 0 {
		return true
	}
	for _, p := range s.allowed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// answer builds the response to one query from the current snapshot.
func (s *Server) answer(q *mdns.Msg) *mdns.Msg {
	r := new(mdns.Msg)
	r.SetReply(q)
	r.Authoritative = true
	r.RecursionAvailable = false
	if q.Opcode != mdns.OpcodeQuery || len(q.Question) != 1 {
		r.SetRcode(q, mdns.RcodeNotImplemented)
		if len(q.Question) != 1 {
			r.Rcode = mdns.RcodeFormatError
		}
		return r
	}
	question := q.Question[0]
	name := strings.ToLower(question.Name)
	if !mdns.IsSubDomain(s.domain, name) {
		s.m.refused.WithLabelValues("outside-domain").Inc()
		r.Rcode = mdns.RcodeRefused
		return r
	}
	rel := strings.TrimSuffix(strings.TrimSuffix(name, s.domain), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	found := s.resolve(r, question, labels)
	if !found {
		r.Rcode = mdns.RcodeNameError
	}
	if len(r.Answer) == 0 {
		r.Ns = []mdns.RR{s.soa()}
	}
	return r
}

func (s *Server) hdr(name string, t uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: t, Class: mdns.ClassINET, Ttl: uint32(s.cfg.TTL)}
}

func (s *Server) soa() mdns.RR {
	return &mdns.SOA{Hdr: s.hdr(s.domain, mdns.TypeSOA), Ns: "ns." + s.domain, Mbox: "hostmaster." + s.domain,
		Serial: uint32(s.reg.Snapshot().Version), Refresh: 3600, Retry: 600, Expire: 86400, Minttl: uint32(s.cfg.TTL)}
}

// resolve fills r for labels (the name under the domain, left to right)
// and says whether the name exists.
func (s *Server) resolve(r *mdns.Msg, q mdns.Question, labels []string) bool {
	n := len(labels)
	switch {
	case n == 0:
		if q.Qtype == mdns.TypeSOA || q.Qtype == mdns.TypeANY {
			r.Answer = append(r.Answer, s.soa())
		}
		return true
	case n >= 3 && labels[n-2] == "app" && s.remote != nil && s.isRegion(labels[n-1]):
		return s.resolveRemoteApp(r, q, labels[n-1], labels[:n-2])
	case n >= 2 && labels[n-1] == "app":
		return s.resolveApp(r, q, labels[:n-1])
	case n >= 2 && (labels[n-1] == "vip" || labels[n-1] == "svip"):
		return s.resolveVIP(r, q, labels[:n-1], labels[n-1] == "svip")
	case n == 2 && labels[1] == "addr":
		ip := addrFromLabel(labels[0])
		if !ip.IsValid() {
			return false
		}
		s.addAddr(r, q, q.Name, ip)
		return true
	case n == 2 && labels[1] == "node":
		for _, nd := range s.nodes() {
			if strings.EqualFold(nd.Name, labels[0]) {
				if ip, err := netip.ParseAddr(nd.IP); err == nil {
					s.addAddr(r, q, q.Name, ip.Unmap())
				}
				return true
			}
		}
		return false
	case n == 2 && labels[0] == "txt":
		return s.resolveTXT(r, q, labels[1])
	}
	return false
}

// resolveApp: <app>, <zone>.<app>, _<app>._tcp, _<app>._tls,
// _<app>._tcp.<zone>, _<app>._tls.<zone>.
func (s *Server) resolveApp(r *mdns.Msg, q mdns.Question, labels []string) bool {
	var app, zone, proto string
	switch {
	case len(labels) >= 2 && strings.HasPrefix(labels[0], "_") && (labels[1] == "_tcp" || labels[1] == "_tls") && len(labels) <= 3:
		app, proto = labels[0][1:], labels[1]
		if len(labels) == 3 {
			zone = labels[2]
		}
	case len(labels) == 1:
		app = labels[0]
	case len(labels) == 2:
		zone, app = labels[0], labels[1]
	default:
		return false
	}
	view, ok := s.reg.Snapshot().App(app)
	if !ok {
		return false
	}
	s.addInstances(r, q, proto, zone, view.Instances)
	return true
}

func (s *Server) isRegion(name string) bool {
	_, _, ok := s.remote(name, "")
	return ok
}

// resolveRemoteApp: <app>.app.<region> and _<app>._tcp.app.<region>
// (and _tls): a remote region's instances of the app, as the node serves
// them with ?regions=<region>.
func (s *Server) resolveRemoteApp(r *mdns.Msg, q mdns.Question, region string, labels []string) bool {
	var app, proto string
	switch {
	case len(labels) == 2 && strings.HasPrefix(labels[0], "_") && (labels[1] == "_tcp" || labels[1] == "_tls"):
		app, proto = labels[0][1:], labels[1]
	case len(labels) == 1:
		app = labels[0]
	default:
		return false
	}
	view, ok, _ := s.remote(region, app)
	if !ok {
		return false
	}
	s.addInstances(r, q, proto, "", view.Instances)
	return true
}

// resolveVIP: <vip>, _<vip>._tcp (vip) or _<vip>._tls (svip); a VIP name
// may have dots. VIPs match case-insensitively (DNS names have no case).
func (s *Server) resolveVIP(r *mdns.Msg, q mdns.Question, labels []string, secure bool) bool {
	proto := ""
	if len(labels) >= 2 && strings.HasPrefix(labels[0], "_") && (labels[1] == "_tcp" || labels[1] == "_tls") {
		proto, labels = labels[1], append([]string{labels[0][1:]}, labels[2:]...)
	}
	vip := strings.Join(labels, ".")
	var matched []registry.InstanceView
	for _, app := range s.reg.Snapshot().Apps {
		for _, iv := range app.Instances {
			list := iv.VIPAddress
			if secure {
				list = iv.SecureVIPAddress
			}
			if listHasFold(list, vip) {
				matched = append(matched, iv)
			}
		}
	}
	if len(matched) == 0 {
		return false
	}
	s.addInstances(r, q, proto, "", matched)
	return true
}

func listHasFold(list, name string) bool {
	for _, part := range strings.Split(list, ",") {
		if strings.EqualFold(strings.TrimSpace(part), name) {
			return true
		}
	}
	return false
}

// addInstances answers with the UP instances (of zone, when given),
// shuffled, at most MaxAnswers: addresses, or SRV records with their
// targets' addresses as additional records.
func (s *Server) addInstances(r *mdns.Msg, q mdns.Question, proto, zone string, ins []registry.InstanceView) {
	up := make([]*registry.Instance, 0, len(ins))
	for _, iv := range ins {
		if iv.Status != registry.StatusUp || (zone != "" && !strings.EqualFold(InstanceZone(iv.Instance), zone)) {
			continue
		}
		up = append(up, iv.Instance)
	}
	rand.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	added := 0
	for _, in := range up {
		if added == s.cfg.MaxAnswers {
			break
		}
		ip, err := netip.ParseAddr(in.IPAddr)
		if err != nil {
			continue // a host name in ipAddr: nothing to give as an address
		}
		ip = ip.Unmap()
		if proto == "" {
			if s.addAddr(r, q, q.Name, ip) {
				added++
			}
			continue
		}
		if q.Qtype != mdns.TypeSRV && q.Qtype != mdns.TypeANY {
			continue
		}
		port := in.Port
		if proto == "_tls" {
			port = in.SecurePort
		}
		if !port.Enabled || port.Number <= 0 || port.Number > 65535 {
			continue
		}
		target := addrLabel(ip) + ".addr." + s.domain
		r.Answer = append(r.Answer, &mdns.SRV{Hdr: s.hdr(q.Name, mdns.TypeSRV), Priority: 0,
			Weight: instanceWeight(in), Port: uint16(port.Number), Target: target})
		r.Extra = append(r.Extra, s.addrRR(target, ip))
		added++
	}
}

func instanceWeight(in *registry.Instance) uint16 {
	if v, ok := in.Metadata.Get("weight"); ok {
		if w, err := strconv.Atoi(v); err == nil && w >= 0 && w <= 65535 {
			return uint16(w)
		}
	}
	return 1
}

// InstanceZone is an instance's zone: the EC2 availability zone of an
// Amazon instance, else the "zone" metadata Spring Cloud sets.
func InstanceZone(in *registry.Instance) string {
	if in.DataCenterInfo.Name == "Amazon" {
		if z, ok := in.DataCenterInfo.Metadata.Get("availability-zone"); ok {
			return z
		}
	}
	z, _ := in.Metadata.Get("zone")
	return z
}

func (s *Server) addrRR(name string, ip netip.Addr) mdns.RR {
	if ip.Is4() {
		return &mdns.A{Hdr: s.hdr(name, mdns.TypeA), A: ip.AsSlice()}
	}
	return &mdns.AAAA{Hdr: s.hdr(name, mdns.TypeAAAA), AAAA: ip.AsSlice()}
}

// addAddr adds ip if the question asks for its family.
func (s *Server) addAddr(r *mdns.Msg, q mdns.Question, name string, ip netip.Addr) bool {
	want := (ip.Is4() && q.Qtype == mdns.TypeA) || (ip.Is6() && q.Qtype == mdns.TypeAAAA) || q.Qtype == mdns.TypeANY
	if want {
		r.Answer = append(r.Answer, s.addrRR(name, ip))
	}
	return want
}

// addrLabel names an address as one label: 8 hex digits for IPv4, 32 for
// IPv6 (as Consul's .addr names do), so SRV targets need no lookup.
func addrLabel(ip netip.Addr) string {
	b := ip.AsSlice()
	return hex.EncodeToString(b)
}

func addrFromLabel(l string) netip.Addr {
	if len(l) != 8 && len(l) != 32 {
		return netip.Addr{}
	}
	b, err := hex.DecodeString(l)
	if err != nil {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// resolveTXT answers Eureka's DNS server discovery: txt.<region> lists the
// zones with live nodes as <zone>.<domain>; txt.<zone> lists those nodes'
// host names (Java's EndpointUtils and DnsTxtRecordClusterResolver read
// both).
func (s *Server) resolveTXT(r *mdns.Msg, q mdns.Question, key string) bool {
	nodes := s.nodes()
	var values []string
	seen := map[string]bool{}
	if key == strings.ToLower(s.cfg.Region) {
		for _, nd := range nodes {
			z := strings.ToLower(nd.Zone)
			if z != "" && !seen[z] {
				seen[z] = true
				values = append(values, z+"."+strings.TrimSuffix(s.domain, "."))
			}
		}
	} else {
		for _, nd := range nodes {
			if strings.EqualFold(nd.Zone, key) && nd.Host != "" && !seen[nd.Host] {
				seen[nd.Host] = true
				values = append(values, nd.Host)
			}
		}
		if len(values) == 0 {
			return false
		}
	}
	if len(values) > 0 && (q.Qtype == mdns.TypeTXT || q.Qtype == mdns.TypeANY) {
		// One record, one character-string per name: a character-string
		// holds at most 255 bytes, so one joined string would not pack past
		// a handful of nodes; JNDI (Eureka's DnsResolver) reads the strings
		// of one record back space-separated, which is what it splits on.
		// A second record would be ignored (it reads the first value only).
		r.Answer = append(r.Answer, &mdns.TXT{Hdr: s.hdr(q.Name, mdns.TypeTXT), Txt: values})
	}
	return true
}

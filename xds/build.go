package xds

import (
	"sort"
	"strconv"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/muster-registry/muster/registry"
)

// MaxZones is how many zones get assignments of their own (zone-first
// priorities); clients of further zones get the zone-less ones. It bounds
// the work per change by the registry's content, never by what clients
// send.
const MaxZones = 64

// named is the shared, zone-independent resources of one xDS name.
type named struct {
	cluster  types.Resource
	listener types.Resource
	route    types.Resource
}

// builder turns registry snapshots into xDS resources. It is used by one
// goroutine (the follower) at a time.
type builder struct {
	epoch  string               // per process: versions never repeat across restarts or nodes
	pieces map[string]*appPiece // by upper-case app name
	named  map[string]named     // by xDS name, kept while the name exists

	names        []string // sorted xDS names of the last build
	namesVersion string   // version at which names last changed
}

func newBuilder(epoch string) *builder {
	return &builder{epoch: epoch, pieces: map[string]*appPiece{}, named: map[string]named{}}
}

// source is where one xDS name's endpoints come from: an app's piece, or
// the endpoints of every instance listing a VIP.
type source struct {
	piece  *appPiece  // nil for a VIP-only name
	vipEPs []endpoint // for a VIP-only name
	vipCLA map[string]*endpointv3.ClusterLoadAssignment
}

// built is one registry version as xDS serves it.
type built struct {
	version      string // EDS version (registry version)
	namesVersion string // LDS, RDS and CDS version
	regVersion   uint64 // the registry version (Snapshot.Version) built
	names        []string
	sources      map[string]*source
	zones        map[string]bool // zones with endpoints, at most MaxZones

	clusters, listeners, routes []types.Resource
}

// update builds the xDS view of snap, reusing the pieces of apps whose
// version did not change.
func (b *builder) update(snap *registry.Snapshot) *built {
	bt := &built{regVersion: snap.Version, version: b.epoch + "." + strconv.FormatUint(snap.Version, 10),
		sources: map[string]*source{}, zones: map[string]bool{}}
	live := make(map[string]bool, len(snap.Apps))
	for _, app := range snap.Apps {
		live[app.Name] = true
		p := b.pieces[app.Name]
		if p == nil || p.version != app.Version || app.Version == 0 {
			p = buildPiece(app)
			b.pieces[app.Name] = p
		}
		bt.sources[Name(app.Name)] = &source{piece: p}
		for _, ep := range p.endpoints {
			if ep.zone != "" && len(bt.zones) < MaxZones {
				bt.zones[ep.zone] = true
			}
		}
	}
	for name := range b.pieces {
		if !live[name] {
			delete(b.pieces, name)
		}
	}
	// VIPs that are not also an app's name, in app order (sorted).
	for _, app := range snap.Apps {
		p := b.pieces[app.Name]
		for _, vip := range p.vips {
			if s, ok := bt.sources[vip]; ok {
				if s.piece == nil {
					s.vipEPs = append(s.vipEPs, p.vipEPs[vip]...)
				}
				continue
			}
			bt.sources[vip] = &source{vipEPs: append([]endpoint(nil), p.vipEPs[vip]...),
				vipCLA: map[string]*endpointv3.ClusterLoadAssignment{}}
		}
	}
	for _, s := range bt.sources {
		if s.piece == nil {
			s.vipEPs = dedupe(s.vipEPs)
		}
	}
	names := make([]string, 0, len(bt.sources))
	for n := range bt.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	if !equalStrings(names, b.names) || b.namesVersion == "" {
		b.names, b.namesVersion = names, bt.version
		keep := make(map[string]named, len(names))
		for _, n := range names {
			r, ok := b.named[n]
			if !ok {
				r = named{cluster: edsCluster(n), listener: apiListener(n), route: routeConfig(n)}
			}
			keep[n] = r
		}
		b.named = keep
	}
	bt.names, bt.namesVersion = b.names, b.namesVersion
	bt.clusters = make([]types.Resource, 0, len(names))
	bt.listeners = make([]types.Resource, 0, len(names))
	bt.routes = make([]types.Resource, 0, len(names))
	for _, n := range names {
		r := b.named[n]
		bt.clusters = append(bt.clusters, r.cluster)
		bt.listeners = append(bt.listeners, r.listener)
		bt.routes = append(bt.routes, r.route)
	}
	return bt
}

// dedupe drops endpoints whose address:port came earlier (two apps listing
// one VIP may share an address; grpc-go rejects the assignment otherwise).
func dedupe(eps []endpoint) []endpoint {
	seen := make(map[string]bool, len(eps))
	out := eps[:0]
	for _, ep := range eps {
		k := ep.addr + "|" + strconv.FormatUint(uint64(ep.port), 10)
		if !seen[k] {
			seen[k] = true
			out = append(out, ep)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// cla is name's assignment for a client in zone.
func (s *source) cla(name, zone string) *endpointv3.ClusterLoadAssignment {
	if s.piece != nil {
		return s.piece.claFor(name, zone)
	}
	if !hasZone(s.vipEPs, zone) {
		zone = ""
	}
	if c, ok := s.vipCLA[zone]; ok {
		return c
	}
	c := cla(name, s.vipEPs, zone)
	s.vipCLA[zone] = c
	return c
}

package xds

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
)

// caches holds what is served: one linear cache per type (per client zone
// for EDS). A linear cache versions each resource on its own and wakes
// only the watches of resources that changed, and marshals a resource once
// for every stream it goes to: a change to one app costs the streams that
// watch that app, not every stream. Each publish is one UpdateResources per
// cache, so one version per change batch.
//
// Until the first publish (the node not yet open for traffic) watches are
// held, not answered: a client gets nothing rather than an empty registry,
// and its first answer is the registry as it is once open.
type caches struct {
	epoch         string
	log           libLogger
	cds, lds, rds *cache.LinearCache

	// mu guards eds, edsVersions, acked, last, names, open and held.
	mu  sync.RWMutex
	eds map[string]*cache.LinearCache // by zone key, "" for none
	// edsVersions counts each EDS cache's UpdateResources, as the linear
	// cache counts its version; acked maps the version string a client
	// acknowledges (prefix and count) to the registry version published
	// then, for a drain's readers (the newest maxAckedVersions).
	edsVersions map[string]uint64
	acked       map[string]uint64
	ackedOrder  []string
	last        map[string]map[string]types.Resource // by zone key: the assignments set
	names       map[string]bool                      // names set in cds, lds, rds
	open        bool
	held        map[*heldWatch]struct{}
}

// heldWatch is a watch that arrived before the first publish.
type heldWatch struct {
	sotw   *cache.Request
	delta  *cache.DeltaRequest
	sub    cache.Subscription
	value  chan cache.Response
	dvalue chan cache.DeltaResponse
	cancel func() // the real watch's, once created
}

var _ cache.Cache = (*caches)(nil)

func newCaches(epoch string, logger zerolog.Logger) *caches {
	c := &caches{epoch: epoch, log: libLogger{logger.With().Str("component", "xds").Logger()},
		eds: map[string]*cache.LinearCache{}, last: map[string]map[string]types.Resource{},
		edsVersions: map[string]uint64{}, acked: map[string]uint64{},
		names: map[string]bool{}, held: map[*heldWatch]struct{}{}}
	c.cds = cache.NewLinearCache(resource.ClusterType, cache.WithVersionPrefix(epoch+"-c-"), cache.WithLogger(c.log))
	c.lds = cache.NewLinearCache(resource.ListenerType, cache.WithVersionPrefix(epoch+"-l-"), cache.WithLogger(c.log))
	c.rds = cache.NewLinearCache(resource.RouteType, cache.WithVersionPrefix(epoch+"-r-"), cache.WithLogger(c.log))
	c.eds[""] = c.newEDS("")
	return c
}

func (c *caches) newEDS(zone string) *cache.LinearCache {
	return cache.NewLinearCache(resource.EndpointType, cache.WithVersionPrefix(c.edsPrefix(zone)), cache.WithLogger(c.log))
}

func (c *caches) edsPrefix(zone string) string { return c.epoch + "-e-" + zone + "-" }

// maxAckedVersions bounds the EDS versions remembered for acknowledgements:
// a client that acknowledges one older than that is not noted as a reader.
const maxAckedVersions = 4096

// noteEDSVersionLocked records that zone's EDS cache moved to its next
// version with the registry at regVersion (one UpdateResources: the linear
// cache counts one version a call).
func (c *caches) noteEDSVersionLocked(zone string, regVersion uint64) {
	c.edsVersions[zone]++
	v := c.edsPrefix(zone) + strconv.FormatUint(c.edsVersions[zone], 10)
	c.acked[v] = regVersion
	c.ackedOrder = append(c.ackedOrder, v)
	if len(c.ackedOrder) > maxAckedVersions {
		delete(c.acked, c.ackedOrder[0])
		c.ackedOrder = c.ackedOrder[1:]
	}
}

// registryVersionOf is the registry version an acknowledged EDS version
// was published at; false for one not known (too old, or not EDS).
func (c *caches) registryVersionOf(version string) (uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.acked[version]
	return v, ok
}

// libLogger passes go-control-plane's warnings and errors to the node's
// log; its debug and info lines (one per watch) are dropped.
type libLogger struct{ l zerolog.Logger }

func (libLogger) Debugf(string, ...any)          {}
func (libLogger) Infof(string, ...any)           {}
func (g libLogger) Warnf(f string, args ...any)  { g.l.Warn().Msgf(f, args...) }
func (g libLogger) Errorf(f string, args ...any) { g.l.Error().Msgf(f, args...) }

// publish sets bt in every cache (only what changed) and, the first time,
// creates the held watches.
func (c *caches) publish(bt *built) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for z := range bt.zones {
		if _, ok := c.eds[z]; !ok && len(c.eds) <= MaxZones {
			c.eds[z] = c.newEDS(z)
		}
	}
	var errs []error
	// Zone caches are kept once made (at most MaxZones); for a zone without
	// endpoints now, the assignments are the zone-less ones.
	for z, lc := range c.eds {
		last := c.last[z]
		if last == nil {
			last = map[string]types.Resource{}
			c.last[z] = last
		}
		update := map[string]types.Resource{}
		for _, n := range bt.names {
			src := bt.sources[n]
			cla := src.cla(n, z)
			prev, ok := last[n]
			// Pieces keep their assignments while their app is unchanged;
			// a VIP-only name is rebuilt, so compare its content.
			if ok && (prev == types.Resource(cla) || (src.piece == nil && proto.Equal(prev, cla))) {
				continue
			}
			update[n] = cla
			last[n] = cla
		}
		// A name gone keeps an empty assignment rather than none: state of
		// the world cannot tell an EDS client that a resource was removed,
		// and a client that only follows EDS (an Envoy static cluster) would
		// keep the last endpoints forever. Kept until the process ends.
		for n, prev := range last {
			if _, ok := bt.sources[n]; !ok && len(prev.(*endpointv3.ClusterLoadAssignment).GetEndpoints()) > 0 {
				empty := &endpointv3.ClusterLoadAssignment{ClusterName: n}
				update[n], last[n] = empty, empty
			}
		}
		if len(update) > 0 {
			errs = append(errs, lc.UpdateResources(update, nil))
			c.noteEDSVersionLocked(z, bt.regVersion)
		}
	}
	if upd, gone := c.nameChanges(bt); len(upd) > 0 || len(gone) > 0 {
		clusters, listeners, routes := map[string]types.Resource{}, map[string]types.Resource{}, map[string]types.Resource{}
		for _, i := range upd {
			n := bt.names[i]
			clusters[n], listeners[n], routes[n] = bt.clusters[i], bt.listeners[i], bt.routes[i]
		}
		// Routes and clusters before the listeners that name them.
		errs = append(errs, c.cds.UpdateResources(clusters, gone), c.rds.UpdateResources(routes, gone),
			c.lds.UpdateResources(listeners, gone))
	}
	if !c.open {
		c.open = true
		for h := range c.held {
			errs = append(errs, c.createLocked(h))
		}
	}
	return errors.Join(errs...)
}

// nameChanges are the indexes in bt.names of new names and the names gone.
func (c *caches) nameChanges(bt *built) (added []int, gone []string) {
	now := make(map[string]bool, len(bt.names))
	for i, n := range bt.names {
		now[n] = true
		if !c.names[n] {
			added = append(added, i)
		}
	}
	for n := range c.names {
		if !now[n] {
			gone = append(gone, n)
		}
	}
	c.names = now
	return added, gone
}

// createLocked creates a held watch for real. The caller holds mu.
func (c *caches) createLocked(h *heldWatch) error {
	var err error
	if h.sotw != nil {
		h.cancel, err = c.sotwCache(h.sotw.GetTypeUrl(), h.sotw.GetNode()).CreateWatch(h.sotw, h.sub, h.value)
	} else {
		h.cancel, err = c.deltaCache(h.delta.GetTypeUrl(), h.delta.GetNode()).CreateDeltaWatch(h.delta, h.sub, h.dvalue)
	}
	return err
}

func (c *caches) sotwCache(typeURL string, node *corev3.Node) *cache.LinearCache {
	switch typeURL {
	case resource.ClusterType:
		return c.cds
	case resource.ListenerType:
		return c.lds
	case resource.RouteType:
		return c.rds
	}
	if lc, ok := c.eds[node.GetLocality().GetZone()]; ok {
		return lc
	}
	return c.eds[""]
}

func (c *caches) deltaCache(typeURL string, node *corev3.Node) *cache.LinearCache {
	return c.sotwCache(typeURL, node)
}

func served(typeURL string) error {
	switch typeURL {
	case resource.ClusterType, resource.ListenerType, resource.RouteType, resource.EndpointType:
		return nil
	}
	return fmt.Errorf("xds: type %s is not served (only CDS, EDS, LDS and RDS)", typeURL)
}

// CreateWatch implements cache.ConfigWatcher.
func (c *caches) CreateWatch(req *cache.Request, sub cache.Subscription, value chan cache.Response) (func(), error) {
	if err := served(req.GetTypeUrl()); err != nil {
		return nil, err
	}
	c.mu.RLock()
	if c.open {
		lc := c.sotwCache(req.GetTypeUrl(), req.GetNode())
		c.mu.RUnlock()
		return lc.CreateWatch(req, sub, value)
	}
	c.mu.RUnlock()
	return c.hold(&heldWatch{sotw: req, sub: sub, value: value})
}

// CreateDeltaWatch implements cache.ConfigWatcher.
func (c *caches) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse) (func(), error) {
	if err := served(req.GetTypeUrl()); err != nil {
		return nil, err
	}
	c.mu.RLock()
	if c.open {
		lc := c.deltaCache(req.GetTypeUrl(), req.GetNode())
		c.mu.RUnlock()
		return lc.CreateDeltaWatch(req, sub, value)
	}
	c.mu.RUnlock()
	return c.hold(&heldWatch{delta: req, sub: sub, dvalue: value})
}

// hold keeps a watch until the first publish (or creates it, if that
// happened meanwhile).
func (c *caches) hold(h *heldWatch) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open {
		if err := c.createLocked(h); err != nil {
			return nil, err
		}
		return h.cancel, nil
	}
	c.held[h] = struct{}{}
	return func() {
		c.mu.Lock()
		delete(c.held, h)
		cancel := h.cancel
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}, nil
}

// Fetch implements cache.ConfigFetcher: the REST-style one-shot fetch is
// not served; clients use a stream.
func (c *caches) Fetch(context.Context, *cache.Request) (cache.Response, error) {
	return nil, errors.New("xds: fetch is not served; open a stream (ADS)")
}

package eureka

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// RemoteRegions is what the API reads of the node's remote regions
// (*regions.Set implements it): what each serves now, an immutable
// wire.CopyView of registry types (apps, counts, versions, changes).
type RemoteRegions interface {
	// Enabled: at least one remote region is configured; otherwise every
	// request is served from the local registry alone.
	Enabled() bool
	// TransparentFallback: plain requests of clients are served remote
	// apps unknown locally.
	TransparentFallback() bool
	// RequireAll: a regions= request naming a region without data is 403.
	RequireAll() bool
	// Served is every region's view; Resolve those a regions= parameter
	// names (with no data too, Apps empty) and the named ones without data.
	Served() []*wire.CopyView
	Resolve(param string) (views []*wire.CopyView, missing []string)
	// Now is the clock the views' changes are stamped on.
	Now() time.Time
	// Changed is closed at the next change of any view.
	Changed() <-chan struct{}
}

// HeaderRegionsMissing names the regions a regions= request asked for
// that have no data on this node (never reached, or dropped as stale):
// the answer holds the local data and the other regions' (Eureka answers
// 403 instead; muster.regions.require-all restores that).
const HeaderRegionsMissing = "X-Muster-Regions-Missing"

// remoteReads are the reads of remote regions' data: what a read merges
// (regions= or the transparent fallback), the merged documents and their
// cache, an app or an instance unknown locally.
type remoteReads struct {
	regions RemoteRegions // nil: none
	// retention is how far back a merged delta takes the regions' changes.
	retention time.Duration
	// payloads are the merged documents.
	payloads regionPayloads
}

func newRemoteReads(regions RemoteRegions, retention time.Duration) *remoteReads {
	if retention <= 0 {
		retention = 3 * time.Minute
	}
	return &remoteReads{regions: regions, retention: retention}
}

// remoteScope is what remote data a read merges: the views, and whether
// only apps unknown locally are taken (transparent fallback).
type remoteScope struct {
	views    []*wire.CopyView
	fallback bool
	key      string // the views' names, for the payload cache
	// wanted: the request reads remote data (regions= or the fallback),
	// even if no region has any now; versions is the sum of the versions
	// of the regions it reads, with or without data: added to the local
	// version, it is the index of a merged document.
	wanted   bool
	versions uint64
}

// isServer reports whether a request comes from a Eureka server (a remote
// region's fetcher, Java's or Muster's), by its identity header.
func isServer(c echo.Context) bool {
	return c.Request().Header.Get(wire.HeaderIdentityName) == wire.ServerIdentityName
}

// scopeOf decides what remote data a registry read serves: for a peer (the
// replication header) or a server (DefaultServer), nothing, whatever it
// asks: a peer must never copy remote instances into its registry, and a
// remote region must get this region's own instances only, so regions
// never mirror mirrors. For a client: with regions=, the named remote
// regions (names this node does not fetch, its own among them, add
// nothing); without it, every region's apps unknown locally (Eureka's
// transparent fallback).
func (s *remoteReads) scopeOf(c echo.Context) (remoteScope, error) {
	rr := s.regions
	if rr == nil || !rr.Enabled() || isReplication(c) || isServer(c) {
		return remoteScope{}, nil
	}
	if param, ok := queryValue(c.Request().URL.RawQuery, "regions"); ok && strings.TrimSpace(param) != "" {
		views, missing := rr.Resolve(param)
		if len(missing) > 0 {
			if rr.RequireAll() {
				return remoteScope{}, echo.NewHTTPError(http.StatusForbidden,
					"remote region(s) "+strings.Join(missing, ",")+" have no data on this node yet (muster.regions.require-all)")
			}
			c.Response().Header().Set(HeaderRegionsMissing, strings.Join(missing, ","))
		}
		return scopeOfViews(views, false), nil
	}
	if !rr.TransparentFallback() {
		return remoteScope{}, nil
	}
	return scopeOfViews(rr.Served(), true), nil
}

func scopeOfViews(all []*wire.CopyView, fallback bool) remoteScope {
	// A region with nothing to serve and no change to tell is left out:
	// a scope of none is served by the local path, pieces and all.
	views := make([]*wire.CopyView, 0, len(all))
	names := make([]string, 0, len(all))
	var versions uint64
	for _, v := range all {
		versions += v.Version
		if len(v.Apps) == 0 && len(v.Changes) == 0 {
			continue
		}
		views = append(views, v)
		names = append(names, v.Region)
	}
	return remoteScope{views: views, fallback: fallback, key: strings.Join(names, ","), wanted: true, versions: versions}
}

// generation identifies the remote content of a scope.
func (rs remoteScope) generation() string {
	var b strings.Builder
	for _, v := range rs.views {
		b.WriteString(strconv.FormatUint(v.Version, 10))
		b.WriteByte('.')
	}
	return b.String()
}

// mergedApps is the full registry a scope serves: the local apps with the
// remote instances merged into same-named apps (in fallback, only apps
// unknown locally), and the counts per status of what was added. A remote
// instance whose id is already served in its app (local first, then the
// regions in order) is left out, so that the apps hashcode is over
// exactly the instances a client keeps.
func (rs remoteScope) mergedApps(snap *registry.Snapshot) ([]registry.AppView, registry.StatusCounts) {
	var added registry.StatusCounts
	extra := map[string]*registry.AppView{}
	var order []string
	seen := map[string]map[string]bool{}
	for _, v := range rs.views {
		for _, ra := range v.Apps {
			name := strings.ToUpper(ra.Name)
			local, known := snap.App(name)
			if known && rs.fallback {
				continue
			}
			ids := seen[name]
			if ids == nil {
				ids = map[string]bool{}
				for _, iv := range local.Instances {
					ids[iv.ID()] = true
				}
				seen[name] = ids
			}
			for _, iv := range ra.Instances {
				if ids[iv.ID()] {
					continue
				}
				ids[iv.ID()] = true
				e := extra[name]
				if e == nil {
					e = &registry.AppView{Name: name}
					extra[name] = e
					order = append(order, name)
				}
				e.Instances = append(e.Instances, iv)
				added.Add(iv.Status)
			}
		}
	}
	if len(extra) == 0 {
		return snap.Apps, added
	}
	out := make([]registry.AppView, 0, len(snap.Apps)+len(extra))
	for _, a := range snap.Apps {
		if e, ok := extra[a.Name]; ok {
			merged := registry.AppView{Name: a.Name, Version: a.Version}
			merged.Instances = append(append(make([]registry.InstanceView, 0, len(a.Instances)+len(e.Instances)), a.Instances...), e.Instances...)
			out = append(out, merged)
			delete(extra, a.Name)
			continue
		}
		out = append(out, a)
	}
	for _, name := range order {
		if e, ok := extra[name]; ok {
			out = append(out, *e)
		}
	}
	sortApps(out)
	return out, added
}

// mergedDelta is the delta a scope serves: the local delta and, of each
// region, the latest change of each instance in the retention, for the
// same apps and instances mergedApps serves (in fallback, apps unknown
// locally; never an instance whose id is served locally in its app).
//
// What mergedApps serves of an app also changes when the app changes
// locally: in fallback, a remote app is hidden once the app exists locally
// and shown again when its last local instance goes; a remote instance
// whose id a local one takes is hidden while it lasts. So for every app in
// the local delta (changed within the retention), each remote instance of
// the scope is restated as it is served now, after the local changes: put
// (ADDED) when served, removed (DELETED) when hidden by the local app;
// one hidden by a local instance of the same id is left to that
// instance's own entries. A client that applies each delta then holds
// exactly what the full document serves.
func (rs remoteScope) mergedDelta(snap *registry.Snapshot, since time.Time) []registry.AppView {
	type key struct{ app, id string }
	latest := map[key]registry.InstanceView{}
	var keys []key
	put := func(k key, iv registry.InstanceView) {
		if _, ok := latest[k]; !ok {
			keys = append(keys, k)
		}
		latest[k] = iv
	}
	for _, v := range rs.views {
		for _, ch := range v.ChangesSince(since) {
			name := strings.ToUpper(ch.Instance.App)
			local, known := snap.App(name)
			switch {
			case known && hasInstance(local, ch.Instance.ID()):
				// Hidden by the local instance, whose entries say what it is.
			case known && rs.fallback:
				// Hidden now by the local app: a client that still holds it
				// (the app became local since its last fetch) drops it.
				put(key{name, ch.Instance.ID()}, ch.Instance.WithAction(registry.ActionDeleted))
			default:
				put(key{name, ch.Instance.ID()}, ch.Instance)
			}
		}
	}
	served := map[key]bool{}
	for _, la := range snap.Delta {
		local, known := snap.App(la.Name)
		for _, v := range rs.views {
			ra, ok := v.App(la.Name)
			if !ok {
				continue
			}
			for _, iv := range ra.Instances {
				k := key{la.Name, iv.ID()}
				switch {
				case known && hasInstance(local, iv.ID()):
					// The local instance's own entries say what it is.
				case known && rs.fallback:
					put(k, iv.WithAction(registry.ActionDeleted))
				case !served[k]:
					served[k] = true
					put(k, iv.WithAction(registry.ActionAdded))
				}
			}
		}
	}
	if len(keys) == 0 {
		return snap.Delta
	}
	extra := map[string][]registry.InstanceView{}
	var order []string
	for _, k := range keys {
		if _, ok := extra[k.app]; !ok {
			order = append(order, k.app)
		}
		extra[k.app] = append(extra[k.app], latest[k])
	}
	out := make([]registry.AppView, 0, len(snap.Delta)+len(extra))
	for _, a := range snap.Delta {
		if e, ok := extra[a.Name]; ok {
			merged := registry.AppView{Name: a.Name, Version: a.Version}
			merged.Instances = append(append(make([]registry.InstanceView, 0, len(a.Instances)+len(e)), a.Instances...), e...)
			out = append(out, merged)
			delete(extra, a.Name)
			continue
		}
		out = append(out, a)
	}
	for _, name := range order {
		if e, ok := extra[name]; ok {
			out = append(out, registry.AppView{Name: name, Instances: e})
		}
	}
	sortApps(out)
	return out
}

func hasInstance(a registry.AppView, id string) bool {
	for _, iv := range a.Instances {
		if iv.ID() == id {
			return true
		}
	}
	return false
}

func sortApps(apps []registry.AppView) {
	// Insertion into order by name: the local apps are sorted already and
	// the remote ones are few.
	for i := 1; i < len(apps); i++ {
		for j := i; j > 0 && apps[j].Name < apps[j-1].Name; j-- {
			apps[j], apps[j-1] = apps[j-1], apps[j]
		}
	}
}

// hashcodeWith is the hashcode of the local apps plus the remote
// instances added: the hashcode of exactly what a merged document serves.
func hashcodeWith(snap *registry.Snapshot, added registry.StatusCounts) string {
	if len(added) == 0 {
		return snap.Hashcode
	}
	counts := snap.Counts.Clone()
	counts.Merge(added)
	return counts.Hashcode()
}

// regionPayloads caches merged documents: one per (document, scope) and
// content (local and remote versions). The scopes are combinations of the
// configured regions only, so the cache stays small; it is emptied when
// full rather than swept.
type regionPayloads struct {
	mu      sync.Mutex // guards entries
	entries map[string]regionPayload
}

type regionPayload struct {
	gen  string
	body payload
}

const maxRegionPayloads = 256

func (rp *regionPayloads) get(key, gen string, build func() payload) payload {
	rp.mu.Lock()
	if e, ok := rp.entries[key]; ok && e.gen == gen {
		rp.mu.Unlock()
		return e.body
	}
	rp.mu.Unlock()
	body := build()
	rp.mu.Lock()
	if rp.entries == nil || len(rp.entries) >= maxRegionPayloads {
		rp.entries = map[string]regionPayload{}
	}
	rp.entries[key] = regionPayload{gen: gen, body: body}
	rp.mu.Unlock()
	return body
}

// encodeDocument encodes an applications document in one piece (merged
// documents do not use the per-app pieces, which are the local apps').
func encodeDocument(apps []registry.AppView, versionsDelta, hashcode string, f payloadFormat, gz, compact bool) payload {
	var b []byte
	switch {
	case f == formatXML && compact:
		b = wire.AppendApplicationsCompactXML(nil, apps, versionsDelta, hashcode)
	case f == formatXML:
		b = wire.AppendApplicationsXML(nil, apps, versionsDelta, hashcode)
	case compact:
		b = wire.AppendApplicationsCompactJSON(nil, apps, versionsDelta, hashcode)
	default:
		b = wire.AppendApplicationsJSON(nil, apps, versionsDelta, hashcode)
	}
	if !gz {
		return bytesPayload(b)
	}
	return bytesPayload(gzipBytes(b))
}

func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&out)
	_, _ = w.Write(b) // a bytes.Buffer does not fail
	_ = w.Close()
	return out.Bytes()
}

// getAppsMerged and getDeltaMerged serve /apps and /apps/delta with
// remote data.
func (s *remoteReads) getAppsMerged(c echo.Context, snap *registry.Snapshot, rs remoteScope) error {
	f, gz, compact := formatOf(c), httpkit.AcceptsGzip(c), wantsCompact(c)
	key := fmt.Sprintf("full|%d|%t|%t|%t|%s", f, gz, compact, rs.fallback, rs.key)
	gen := strconv.FormatUint(snap.Version, 10) + "|" + rs.generation()
	body := s.payloads.get(key, gen, func() payload {
		apps, added := rs.mergedApps(snap)
		return encodeDocument(apps, "1", hashcodeWith(snap, added), f, gz, compact)
	})
	return writePayload(c, f, gz, body)
}

func (s *remoteReads) getDeltaMerged(c echo.Context, snap *registry.Snapshot, rs remoteScope) error {
	f, gz, compact := formatOf(c), httpkit.AcceptsGzip(c), wantsCompact(c)
	key := fmt.Sprintf("delta|%d|%t|%t|%t|%s", f, gz, compact, rs.fallback, rs.key)
	gen := strconv.FormatUint(snap.Version, 10) + "|" + strconv.FormatUint(snap.DeltaVersion, 10) + "|" + rs.generation()
	since := s.regions.Now().Add(-s.retention)
	body := s.payloads.get(key, gen, func() payload {
		_, added := rs.mergedApps(snap)
		return encodeDocument(rs.mergedDelta(snap, since), strconv.FormatUint(snap.DeltaVersion, 10), hashcodeWith(snap, added), f, gz, compact)
	})
	return writePayload(c, f, gz, body)
}

// appReadsRemote reports whether GET /apps/{APP} of an app unknown
// locally looks in remote regions: for clients only (a peer or a server
// asks about this region's own registry), with regions= or by the
// transparent fallback.
func (s *remoteReads) appReadsRemote(c echo.Context) bool {
	rr := s.regions
	if rr == nil || !rr.Enabled() || isReplication(c) || isServer(c) {
		return false
	}
	if param, ok := queryValue(c.Request().URL.RawQuery, "regions"); ok && strings.TrimSpace(param) != "" {
		return true
	}
	return rr.TransparentFallback()
}

// remoteApp is an app unknown locally, from the remote regions (all of
// them in transparent fallback, or those regions= names), its instances
// merged by id in region order; and its index: the sum over those
// regions of the view version of the app's last change there (its going
// included), which grows whenever what is served of it changes (0: never
// served by any).
func (s *remoteReads) remoteApp(c echo.Context, name string) (registry.AppView, uint64, bool) {
	if !s.appReadsRemote(c) {
		return registry.AppView{}, 0, false
	}
	rr := s.regions
	var views []*wire.CopyView
	if param, ok := queryValue(c.Request().URL.RawQuery, "regions"); ok && strings.TrimSpace(param) != "" {
		views, _ = rr.Resolve(param)
	} else {
		views = rr.Served()
	}
	out := registry.AppView{Name: strings.ToUpper(name)}
	ids := map[string]bool{}
	var index uint64
	for _, v := range views {
		index += v.AppChanged(name)
		a, ok := v.App(name)
		if !ok {
			continue
		}
		for _, iv := range a.Instances {
			if !ids[iv.ID()] {
				ids[iv.ID()] = true
				out.Instances = append(out.Instances, iv)
			}
		}
	}
	return out, index, len(out.Instances) > 0
}

// servedAppIndex is the index of what GET /apps/{APP} serves from snap:
// the local app's version, or for an app unknown locally the remote
// app's index (remoteApp).
func (s *remoteReads) servedAppIndex(c echo.Context, snap *registry.Snapshot, name string) uint64 {
	if v, ok := snap.App(name); ok {
		return v.Version
	}
	_, index, _ := s.remoteApp(c, name)
	return index
}

// remoteInstance finds an instance unknown locally in the remote regions,
// as Eureka's getInstanceByAppAndId and getInstancesById fall back (app ""
// looks in every app). Never for a peer: it asks about its own registry.
func (s *remoteReads) remoteInstance(c echo.Context, app, id string) (registry.InstanceView, bool) {
	rr := s.regions
	if rr == nil || !rr.Enabled() || isReplication(c) {
		return registry.InstanceView{}, false
	}
	for _, v := range rr.Served() {
		var iv registry.InstanceView
		var ok bool
		if app == "" {
			iv, ok = v.InstanceByID(id)
		} else {
			iv, ok = v.Instance(app, id)
		}
		if ok {
			return iv, true
		}
	}
	return registry.InstanceView{}, false
}

func appDocumentOf(app registry.AppView, f payloadFormat, compact bool) payload {
	switch {
	case f == formatXML && compact:
		return bytesPayload(wire.AppendApplicationCompactXML(nil, app))
	case f == formatXML:
		return bytesPayload(wire.AppendApplicationXML(nil, app))
	case compact:
		return bytesPayload(wire.AppendApplicationCompactJSON(nil, app))
	}
	return bytesPayload(wire.AppendApplicationJSON(nil, app))
}

// vipOf is Snapshot.VIP over merged apps: the instances whose vipAddress
// (secureVipAddress) lists name as one of its comma-separated parts.
func vipOf(apps []registry.AppView, name string, secure bool) []registry.AppView {
	var out []registry.AppView
	for _, app := range apps {
		var matched []registry.InstanceView
		for _, iv := range app.Instances {
			addr := iv.VIPAddress
			if secure {
				addr = iv.SecureVIPAddress
			}
			for _, part := range strings.Split(addr, ",") {
				if part == name {
					matched = append(matched, iv)
					break
				}
			}
		}
		if len(matched) > 0 {
			out = append(out, registry.AppView{Name: app.Name, Instances: matched})
		}
	}
	return out
}

// eitherChanged is closed when a or b is; stop ends its watch.
func eitherChanged(a, b <-chan struct{}) (changed <-chan struct{}, stop func()) {
	out, done := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		case <-done:
			return
		}
		close(out)
	}()
	return out, func() { close(done) }
}

// holdScope holds a blocking fetch of a document that reads remote data:
// its index is the local version plus the scope's region versions, so it
// wakes on a change of either. Without remote data it is holdRegistry.
func (s *watches) holdScope(c echo.Context) (remoteScope, error) {
	rs, err := s.remote.scopeOf(c)
	if err != nil || !rs.wanted {
		if err == nil {
			err = s.holdRegistry(c)
		}
		return rs, err
	}
	err = s.hold(c, func(index uint64) (<-chan struct{}, func()) {
		remote := s.remote.regions.Changed() // before the versions: no change is missed
		now, err := s.remote.scopeOf(c)
		local := s.reg.Version()
		if err != nil || local+now.versions != index {
			return nil, nil
		}
		localCh := s.watch.waitAny(local)
		if localCh == nil {
			return nil, nil
		}
		return eitherChanged(localCh, remote)
	})
	if err != nil {
		return rs, err
	}
	return s.remote.scopeOf(c)
}

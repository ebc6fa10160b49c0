package console

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
)

// consoleStatuses is the order in which the console lists statuses.
var consoleStatuses = [...]registry.Status{
	registry.StatusUp, registry.StatusDown, registry.StatusStarting,
	registry.StatusOutOfService, registry.StatusUnknown,
}

func statusIndex(st registry.Status) int {
	for i, s := range consoleStatuses {
		if s == st {
			return i
		}
	}
	return len(consoleStatuses) - 1
}

// instanceZone is the zone the console shows and filters on: the EC2
// availability zone of an Amazon instance, else the "zone" metadata Spring
// Cloud sets (eureka.instance.metadata-map.zone).
func instanceZone(in *registry.Instance) string {
	if in.DataCenterInfo.Name == "Amazon" {
		if z, ok := metaGet(in.DataCenterInfo.Metadata, "availability-zone"); ok {
			return z
		}
	}
	z, _ := metaGet(in.Metadata, "zone")
	return z
}

// metaGet is Metadata.Get, scanning short lists (the usual handful of
// entries) instead of searching them: the console runs it for every
// instance a filter looks at.
func metaGet(md registry.Metadata, key string) (string, bool) {
	if len(md) > 8 {
		return md.Get(key)
	}
	for _, kv := range md {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// appSummary is one row of the apps overview.
type appSummary struct {
	Name       string
	Total      int
	ByStatus   [len(consoleStatuses)]int
	Zones      []zoneCount
	LastChange int64 // ms, the newest lastUpdatedTimestamp of its instances
}

type zoneCount struct {
	Zone  string
	Count int
}

// consoleIndex is what the console derives from one snapshot: the apps
// overview without filters and the zones that exist. It is built once per
// snapshot, so a page view of an unchanged registry costs a page's worth
// of work, not a pass over every instance.
type consoleIndex struct {
	snap  *registry.Snapshot
	apps  []appSummary   // in snap.Apps order
	zones []string       // sorted; "" for instances without a zone
	rows  [][]searchable // per app, in snap.Apps[i].Instances order

	// searchMu guards searches, which caches the results of the last few
	// instance searches of this version, by filter.
	searchMu sync.Mutex
	searches []cachedSearch
}

// match names one instance of the snapshot: its app and its place there.
type match struct{ app, inst uint32 }

type cachedSearch struct {
	key     string
	matches []match
}

// maxCachedSearches bounds the cache: a search matching all of 100k
// instances holds 800 KB.
const maxCachedSearches = 8

// matches returns the instances that pass f, of app appIdx or, when it is
// -1, of every app whose name matches, in the snapshot's order.
func (idx *consoleIndex) matches(appIdx int, f *consoleFilter) []match {
	key := strconv.Itoa(appIdx) + "?" + f.query().Encode()
	idx.searchMu.Lock()
	for i, c := range idx.searches {
		if c.key == key {
			// Most recently used last.
			idx.searches = append(append(idx.searches[:i:i], idx.searches[i+1:]...), c)
			idx.searchMu.Unlock()
			return c.matches
		}
	}
	idx.searchMu.Unlock()

	cf := idx.compile(f)
	var out []match
	for a, app := range idx.snap.Apps {
		if appIdx >= 0 && a != appIdx || appIdx < 0 && !f.matchApp(app.Name) {
			continue
		}
		rows := idx.rows[a]
		for i := range rows {
			if cf.match(&rows[i], &app.Instances[i]) {
				out = append(out, match{uint32(a), uint32(i)})
			}
		}
	}
	idx.searchMu.Lock()
	if len(idx.searches) == maxCachedSearches {
		idx.searches = append(idx.searches[:0], idx.searches[1:]...)
	}
	idx.searches = append(idx.searches, cachedSearch{key, out})
	idx.searchMu.Unlock()
	return out
}

// searchable is what the filters look at, kept contiguous: a search over
// 100k instances then reads a few MB in order instead of chasing a
// pointer into every instance.
type searchable struct {
	// host is "host name\x00IP", lower-cased; meta is "\x00k=v\x00k=v\x00".
	// Both are slices of one string per index, so a scan reads memory in
	// order.
	host, meta string
	status     uint8 // index in consoleStatuses
	zone       uint32
	// metaExact: no key holds "=" and nothing holds a NUL, so a match in
	// meta is a match of the metadata itself.
	metaExact bool
}

type consoleIndexCache struct {
	cur      atomic.Pointer[consoleIndex]
	building atomic.Bool
	mu       sync.Mutex // guards no field: one build at a time
}

// staleViewInstances is the registry size from which a console view may
// show the previous version while the new one is built in the background:
// at 100k instances a snapshot and its index take tens of milliseconds,
// which the first viewer after every change would otherwise wait for. The
// page's live index names the version it shows, so the next poll fetches
// the new one. Smaller registries are always shown current.
const staleViewInstances = 10_000

// consoleIndex returns the index of the registry's current version, or,
// for a large registry that changed since the last build and unless fresh
// is asked for, the last one while a new one is built.
func (s *Console) consoleIndex(fresh bool) *consoleIndex {
	c := &s.consoleIdx
	cur := c.cur.Load()
	if cur != nil && cur.snap.Version == s.reg.Version() {
		return cur
	}
	if fresh || cur == nil || cur.snap.Instances < staleViewInstances {
		return c.get(s.reg.Snapshot())
	}
	if c.building.CompareAndSwap(false, true) {
		go func() {
			defer c.building.Store(false)
			c.get(s.reg.Snapshot())
		}()
	}
	return cur
}

// get returns the index of snap, building it when snap is new.
func (c *consoleIndexCache) get(snap *registry.Snapshot) *consoleIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.cur.Load(); cur != nil && cur.snap == snap {
		return cur
	}
	idx := &consoleIndex{snap: snap, apps: make([]appSummary, len(snap.Apps)), rows: make([][]searchable, len(snap.Apps))}
	zones := map[string]int{}
	all := make([]searchable, snap.Instances)
	zoneOf := make([]string, snap.Instances)
	text := make([]byte, 0, snap.Instances*96)
	offsets := make([]int, 0, 2*snap.Instances+1)
	k := 0
	for i, app := range snap.Apps {
		idx.rows[i] = all[k : k+len(app.Instances) : k+len(app.Instances)]
		for j := range app.Instances {
			in := app.Instances[j].Instance
			z := instanceZone(in)
			zones[z] = 0
			zoneOf[k+j] = z
			idx.rows[i][j] = searchable{status: uint8(statusIndex(in.Status))}
			// Offsets into text for now; made strings below.
			offsets = append(offsets, len(text))
			text = appendLower(text, in.HostName)
			text = append(text, 0)
			text = appendLower(text, in.IPAddr)
			offsets = append(offsets, len(text))
			text = append(text, 0)
			exact := true
			for _, kv := range in.Metadata {
				text = append(append(append(append(text, kv.Key...), '='), kv.Value...), 0)
				if strings.IndexByte(kv.Key, '=') >= 0 || strings.IndexByte(kv.Key, 0) >= 0 || strings.IndexByte(kv.Value, 0) >= 0 {
					exact = false
				}
			}
			idx.rows[i][j].metaExact = exact
		}
		k += len(app.Instances)
	}
	offsets = append(offsets, len(text))
	text16 := string(text)
	for k := range all {
		all[k].host = text16[offsets[2*k]:offsets[2*k+1]]
		all[k].meta = text16[offsets[2*k+1]:offsets[2*k+2]]
	}
	for z := range zones {
		idx.zones = append(idx.zones, z)
	}
	slices.Sort(idx.zones)
	for i, z := range idx.zones {
		zones[z] = i
	}
	for k := range all {
		all[k].zone = uint32(zones[zoneOf[k]])
	}
	var scratch []match
	for i, app := range snap.Apps {
		idx.apps[i] = idx.summarize(i, app, &scratch)
	}
	if cur := c.cur.Load(); cur == nil || cur.snap.Version <= snap.Version {
		c.cur.Store(idx)
	}
	return idx
}

// summarize counts the instances of app, the i-th; scratch is reused
// between calls.
func (idx *consoleIndex) summarize(i int, app registry.AppView, scratch *[]match) appSummary {
	all := (*scratch)[:0]
	for j := range app.Instances {
		all = append(all, match{uint32(i), uint32(j)})
	}
	*scratch = all
	return idx.summarizeMatches(all)
}

// summarizeMatches counts the given instances, all of one app.
func (idx *consoleIndex) summarizeMatches(ms []match) appSummary {
	if len(ms) == 0 {
		return appSummary{}
	}
	app := idx.snap.Apps[ms[0].app]
	sum := appSummary{Name: app.Name}
	rows := idx.rows[ms[0].app]
	var zones []int // per zone index, grown on demand
	for _, m := range ms {
		j := m.inst
		e := &rows[j]
		sum.Total++
		sum.ByStatus[e.status]++
		sum.LastChange = max(sum.LastChange, app.Instances[j].LastUpdatedTimestamp)
		if int(e.zone) >= len(zones) {
			zones = append(zones, make([]int, int(e.zone)+1-len(zones))...)
		}
		zones[e.zone]++
	}
	for z, n := range zones {
		if n > 0 {
			sum.Zones = append(sum.Zones, zoneCount{Zone: idx.zones[z], Count: n})
		}
	}
	return sum
}

// compiledFilter is a consoleFilter resolved against one index: the
// status and zone as the indexes searchable holds.
type compiledFilter struct {
	*consoleFilter
	status int // -1: any
	zone   int // -1: any, -2: a zone no instance has
}

func (idx *consoleIndex) compile(f *consoleFilter) *compiledFilter {
	cf := &compiledFilter{consoleFilter: f, status: -1, zone: -1}
	if f.Status != "" {
		cf.status = statusIndex(f.Status)
	}
	if f.Zone != "" {
		want := f.Zone
		if want == "-" {
			want = ""
		}
		cf.zone = -2
		if i, ok := slices.BinarySearch(idx.zones, want); ok {
			cf.zone = i
		}
	}
	return cf
}

// match tells whether an instance passes the filter: the cheap checks on
// its searchable row first, the metadata last.
func (f *compiledFilter) match(e *searchable, iv *registry.InstanceView) bool {
	if f.status >= 0 && int(e.status) != f.status {
		return false
	}
	if f.zone != -1 && int(e.zone) != f.zone {
		return false
	}
	if f.Host != "" && !strings.Contains(e.host, f.hostLower) {
		return false
	}
	if f.metaKey != "" {
		// The text finds the candidates; where it could mislead (a key
		// holding "=", a NUL anywhere), the instance's own metadata decides.
		if !strings.Contains(e.meta, f.metaNeedle) {
			return false
		}
		if e.metaExact {
			return true
		}
		v, ok := metaGet(iv.Metadata, f.metaKey)
		if !ok || f.metaHasValue && v != f.metaValue {
			return false
		}
	}
	return true
}

// consoleFilter is the search form: every field narrows the result; empty
// fields do not filter.
type consoleFilter struct {
	App    string          // substring of the app name, any case
	Status registry.Status // exact
	Zone   string          // exact; "-" means instances without a zone
	Host   string          // substring of host name or IP address, any case
	Meta   string          // key=value (exact value) or key (present)

	metaKey, metaValue string
	metaHasValue       bool
	metaNeedle         string // "\x00key=value\x00" or "\x00key="
	hostLower          string
}

// maxFilterLen bounds each search field; longer ones get 400.
const maxFilterLen = 256

func parseConsoleFilter(c echo.Context) (consoleFilter, error) {
	q := c.QueryParams()
	f := consoleFilter{
		App:  strings.TrimSpace(q.Get("app")),
		Zone: strings.TrimSpace(q.Get("zone")),
		Host: strings.TrimSpace(q.Get("host")),
		Meta: strings.TrimSpace(q.Get("meta")),
	}
	for _, v := range []string{f.App, f.Zone, f.Host, f.Meta, q.Get("status")} {
		if len(v) > maxFilterLen {
			return f, httpkit.BadRequest("search fields are limited to %d bytes", maxFilterLen)
		}
	}
	if st := strings.TrimSpace(q.Get("status")); st != "" {
		parsed, err := registry.ParseStatus(st)
		if err != nil {
			return f, httpkit.BadRequest("status: want UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN, got %q", st)
		}
		f.Status = parsed
	}
	f.App = strings.ToUpper(f.App)
	f.hostLower = strings.ToLower(f.Host)
	if f.Meta != "" {
		f.metaKey, f.metaValue, f.metaHasValue = strings.Cut(f.Meta, "=")
		f.metaKey = strings.TrimSpace(f.metaKey)
		f.metaValue = strings.TrimSpace(f.metaValue)
		if f.metaKey == "" {
			return f, httpkit.BadRequest("meta: want key=value or key")
		}
		f.metaNeedle = "\x00" + f.metaKey + "="
		if f.metaHasValue {
			f.metaNeedle += f.metaValue + "\x00"
		}
	}
	return f, nil
}

// instanceLevel tells whether the filter looks inside apps.
func (f *consoleFilter) instanceLevel() bool {
	return f.Status != "" || f.Zone != "" || f.Host != "" || f.Meta != ""
}

func (f *consoleFilter) matchApp(name string) bool {
	return f.App == "" || strings.Contains(name, f.App)
}

// query writes the filter as URL parameters, for links that keep it.
func (f *consoleFilter) query() url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("app", f.App)
	set("status", string(f.Status))
	set("zone", f.Zone)
	set("host", f.Host)
	set("meta", f.Meta)
	return v
}

// paging is one page of a list: 1-based page, size rows.
type paging struct {
	Page, Size, Total, Pages int
}

const (
	defaultPageSize = 50
	maxPageSize     = 500
)

func parsePaging(c echo.Context) (paging, error) {
	p := paging{Page: 1, Size: defaultPageSize}
	for _, f := range []struct {
		name string
		dst  *int
		max  int
	}{{"page", &p.Page, 1 << 30}, {"size", &p.Size, maxPageSize}} {
		raw := c.QueryParam(f.name)
		if raw == "" {
			continue
		}
		n := 0
		for _, ch := range raw {
			if ch < '0' || ch > '9' || n > f.max {
				return p, httpkit.BadRequest("%s: want a number from 1 to %d", f.name, f.max)
			}
			n = n*10 + int(ch-'0')
		}
		if n < 1 || n > f.max {
			return p, httpkit.BadRequest("%s: want a number from 1 to %d", f.name, f.max)
		}
		*f.dst = n
	}
	return p, nil
}

// window sets Total and Pages and returns the bounds of the page's rows;
// a page past the end shows the last page.
func (p *paging) window(total int) (from, to int) {
	p.Total = total
	p.Pages = max(1, (total+p.Size-1)/p.Size)
	p.Page = min(p.Page, p.Pages)
	from = (p.Page - 1) * p.Size
	return from, min(total, from+p.Size)
}

// appendLower appends s lower-cased (ASCII; host names and addresses).
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

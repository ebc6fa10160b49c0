package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/registry"
)

//go:embed assets
var assets embed.FS

var consoleTemplate = template.Must(template.New("console.html").Funcs(template.FuncMap{
	"statusClass": func(st registry.Status) string {
		if st == registry.StatusUp {
			return "ok"
		}
		return "bad"
	},
	// base is the server's context path; each console's clone sets it.
	"base": func() string { return "" },
}).ParseFS(assets, "assets/console.html"))

type consolePage struct {
	View        string // overview, instances, confirm
	Title       string
	Index       string
	Node        ops.NodeInfo
	Ready       bool
	CurrentTime string
	Uptime      string
	SP          registry.SelfPreservation
	Security    ops.Security
	Peers       []dashboardPeer
	XDS         bool // the node serves xDS: show its clients
	XDSClients  []xdsClientRow
	Regions     []ops.RemoteRegionInfo
	General     [][2]string

	Chart    template.HTML
	Episodes []episodeView
	Sampled  bool

	Filter   consoleFilter
	Zones    []string // for the zone menu; nil when there are too many (a text field then)
	Statuses []registry.Status
	Query    string // the filter as URL parameters, for links

	MatchingURL string // the instances matching the overview's search

	Apps      []appRow
	Instances []instanceRow
	Paging    paging
	PrevURL   string
	NextURL   string
	App       string // the app page's app
	Matching  int    // instances matching an instance-level filter

	// Guarded are the apps whose health-check marks the guard holds back.
	Guarded []string

	CanAct  bool
	WhyNot  string
	Flash   string
	Confirm *confirmView
}

type dashboardPeer struct {
	ops.PeerInfo
	Available           bool
	SyncText, SyncClass string
}

type xdsClientRow struct {
	ops.XDSClient
	Connected string // how long ago the stream opened
	TypesText string
}

type appRow struct {
	appSummary
	Link       string
	ZoneText   string
	LastChange string
}

type instanceRow struct {
	App, ID      string
	HostPort     string
	IP           string
	Status       registry.Status
	Override     string
	Zone         string
	LeaseAge     string
	LastRenewal  string
	Origin       string
	Metadata     []registry.KV
	MoreMetadata int
	Link         string
	HasOverride  bool
	// Health is the health checks' word on the instance: its mark (any
	// node's) and, where this node probes it, the probe state.
	Health      string
	HealthClass string
	// Drained is set for a drained instance, Drain its receipt in words,
	// DrainComplete when every reader confirmed; CanDrain when the node
	// serves drains.
	Drained, DrainComplete, CanDrain bool
	Drain                            string
}

type episodeView struct {
	Start, End string
	Duration   string
	Active     bool
	Drops      []appDrop
}

type confirmView struct {
	Action   consoleAction
	Describe string
	Instance instanceRow
	CSRF     string
	Back     string
}

// liveIndex changes whenever the page's content may have: a visible
// registry change or a new self-preservation sample.
func (s *Console) liveIndex() string {
	return liveIndexOf(s.reg.Version(), s.history.seq.Load())
}

func liveIndexOf(version, samples uint64) string {
	return strconv.FormatUint(version, 10) + "." + strconv.FormatUint(samples, 10)
}

// basePage fills what every console page shows: the header, the banners.
// snap is the version the page shows (nil: the current one); the page's
// live index names it, so a page built from an older version is refreshed
// by the next poll.
func (s *Console) basePage(c echo.Context, view string, snap *registry.Snapshot) consolePage {
	now := s.now()
	index := s.liveIndex()
	if snap != nil {
		index = liveIndexOf(snap.Version, s.history.seq.Load())
	}
	p := consolePage{
		View:        view,
		Index:       index,
		Node:        s.cfg.Node,
		Ready:       s.cfg.Ready(),
		CurrentTime: now.Format("2006-01-02T15:04:05 -0700"),
		Uptime:      httpkit.FormatUptime(now.Sub(s.started)),
		SP:          s.reg.SelfPreservationState(),
		Security:    s.cfg.Security,
		Statuses:    consoleStatuses[:],
	}
	p.CanAct, p.WhyNot = s.actionsAllowed(c)
	if s.cfg.HealthChecks != nil {
		p.Guarded = s.cfg.HealthChecks.GuardedApps()
	}
	return p
}

// consoleOverview is the dashboard: system status, self-preservation with
// its chart, replicas, the apps (filtered, paginated) and general info.
func (s *Console) consoleOverview(c echo.Context) error {
	f, err := parseConsoleFilter(c)
	if err != nil {
		return err
	}
	pg, err := parsePaging(c)
	if err != nil {
		return err
	}
	s.consoleSession(c)
	idx := s.consoleIndex(false)
	snap := idx.snap
	p := s.basePage(c, "overview", snap)
	p.Title = "Muster — " + s.cfg.Node.Name
	p.Filter, p.Zones, p.Query = f, zoneMenu(idx.zones), f.query().Encode()
	p.MatchingURL = s.cfg.BasePath + "/console/instances?" + p.Query
	now := s.now()

	var rows []appSummary
	if f.instanceLevel() {
		// The search's matches come in app order: summarise each run.
		matches := idx.matches(-1, &f)
		p.Matching = len(matches)
		for len(matches) > 0 {
			a := matches[0].app
			n := 1
			for n < len(matches) && matches[n].app == a {
				n++
			}
			rows = append(rows, idx.summarizeMatches(matches[:n]))
			matches = matches[n:]
		}
	} else {
		for i, app := range snap.Apps {
			if f.matchApp(app.Name) {
				rows = append(rows, idx.apps[i])
			}
		}
	}
	from, to := pg.window(len(rows))
	for _, sum := range rows[from:to] {
		p.Apps = append(p.Apps, s.appRow(sum, f, now))
	}
	p.Paging = pg
	p.PrevURL, p.NextURL = pageLinks(c, s.cfg.BasePath, pg)

	// Peers and general info, as Eureka's status page has them.
	var available, unavailable, registered []string
	for _, peer := range s.cfg.Peers() {
		ok := peer.State == "alive" || peer.State == "static"
		dp := dashboardPeer{PeerInfo: peer, Available: ok}
		dp.SyncText, dp.SyncClass = peer.SyncLabel()
		p.Peers = append(p.Peers, dp)
		registered = append(registered, peer.URL)
		if ok {
			available = append(available, peer.URL)
		} else {
			unavailable = append(unavailable, peer.URL)
		}
	}
	if s.cfg.XDSClients != nil {
		p.XDS = true
		for _, c := range s.cfg.XDSClients() {
			p.XDSClients = append(p.XDSClients, xdsClientRow{XDSClient: c,
				Connected: now.Sub(c.Since).Truncate(time.Second).String(), TypesText: strings.Join(c.Types, " ")})
		}
	}
	if s.cfg.RemoteRegions != nil {
		p.Regions = s.cfg.RemoteRegions()
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	p.General = [][2]string{
		{"environment", s.cfg.Node.Environment},
		{"num-of-cpus", fmt.Sprint(runtime.NumCPU())},
		{"total-avail-memory", fmt.Sprintf("%dmb", mem.Sys>>20)},
		{"current-memory-usage", fmt.Sprintf("%dmb (%d%%)", mem.HeapAlloc>>20, 100*mem.HeapAlloc/max(mem.Sys, 1))},
		{"server-uptime", p.Uptime},
		{"registered-replicas", strings.Join(registered, ", ")},
		{"available-replicas", strings.Join(available, ", ")},
		{"unavailable-replicas", strings.Join(unavailable, ", ")},
		{"instances", fmt.Sprint(snap.Instances)},
		{"apps", fmt.Sprint(len(snap.Apps))},
		{"apps hashcode", snap.Hashcode},
		{"registry version", fmt.Sprint(snap.Version)},
	}

	samples, episodes := s.history.view()
	p.Sampled = len(samples) > 0
	p.Chart = renderSPChart(samples, now)
	for _, ep := range episodes {
		ev := episodeView{Start: ep.Start.Format("15:04:05"), Active: ep.Active, Drops: ep.Drops}
		end := now
		if !ep.End.IsZero() {
			ev.End, end = ep.End.Format("15:04:05"), ep.End
		}
		ev.Duration = formatAge(end.Sub(ep.Start))
		p.Episodes = append(p.Episodes, ev)
	}
	return s.renderConsole(c, http.StatusOK, &p)
}

func (s *Console) appRow(sum appSummary, f consoleFilter, now time.Time) appRow {
	q := f.query()
	q.Del("app")
	link := s.cfg.BasePath + "/console/apps/" + url.PathEscape(sum.Name)
	if e := q.Encode(); e != "" {
		link += "?" + e
	}
	zones := make([]string, len(sum.Zones))
	for i, z := range sum.Zones {
		name := z.Zone
		if name == "" {
			name = "(none)"
		}
		zones[i] = name + " (" + strconv.Itoa(z.Count) + ")"
	}
	r := appRow{appSummary: sum, Link: link, ZoneText: strings.Join(zones, ", ")}
	if sum.LastChange > 0 {
		r.LastChange = formatAge(now.Sub(time.UnixMilli(sum.LastChange))) + " ago"
	}
	return r
}

// consoleInstances lists instances, filtered and paginated: of one app at
// /console/apps/{app}, of every app at /console/instances.
func (s *Console) consoleInstances(c echo.Context) error {
	f, err := parseConsoleFilter(c)
	if err != nil {
		return err
	}
	pg, err := parsePaging(c)
	if err != nil {
		return err
	}
	s.consoleSession(c)
	// Right after an action, show its result.
	idx := s.consoleIndex(c.QueryParam("done") != "")
	snap := idx.snap
	p := s.basePage(c, "instances", snap)
	p.Zones = zoneMenu(idx.zones)
	now := s.now()

	appIdx := -1 // the app page's app in snap.Apps
	if c.Path() == "/console/apps/:app" {
		name, err := httpkit.PathParam(c, "app")
		if err != nil {
			return err
		}
		app, ok := snap.App(name)
		if !ok && idx.snap.Instances >= staleViewInstances {
			// A new app may not be in the version shown yet.
			idx = s.consoleIndex(true)
			snap = idx.snap
			p.Index = liveIndexOf(snap.Version, s.history.seq.Load())
			app, ok = snap.App(name)
		}
		if !ok {
			return echo.NewHTTPError(http.StatusNotFound, "no application "+strings.ToUpper(name))
		}
		appIdx = slices.IndexFunc(snap.Apps, func(a registry.AppView) bool { return a.Name == app.Name })
		p.App = app.Name
		p.Title = app.Name + " — Muster"
	} else {
		p.Title = "Instances — Muster"
	}
	p.Filter, p.Query = f, f.query().Encode()

	var keep []*registry.InstanceView
	if f.instanceLevel() {
		// A search looks at every instance once per version; paging through
		// its result and the live refreshes reuse it.
		matches := idx.matches(appIdx, &f)
		from, to := pg.window(len(matches))
		for _, m := range matches[from:to] {
			keep = append(keep, &snap.Apps[m.app].Instances[m.inst])
		}
	} else {
		// Without instance filters, whole apps are counted, not scanned.
		total := 0
		for a, app := range snap.Apps {
			if appIdx >= 0 && a == appIdx || appIdx < 0 && f.matchApp(app.Name) {
				total += len(app.Instances)
			}
		}
		from, to := pg.window(total)
		seen := 0
		for a, app := range snap.Apps {
			if appIdx >= 0 && a != appIdx || appIdx < 0 && !f.matchApp(app.Name) {
				continue
			}
			for i := max(from-seen, 0); i < len(app.Instances) && seen+i < to; i++ {
				keep = append(keep, &app.Instances[i])
			}
			seen += len(app.Instances)
			if seen >= to {
				break
			}
		}
	}
	p.Paging = pg
	p.PrevURL, p.NextURL = pageLinks(c, s.cfg.BasePath, pg)
	for _, iv := range keep {
		p.Instances = append(p.Instances, s.instanceRow(iv, now))
	}
	// The flash is shown only for a redirect this server signed, so a link
	// cannot make the page claim an action that did not happen.
	if done := c.QueryParam("done"); done != "" && s.flashSigned(done, p.App, c.QueryParam("id"), c.QueryParam("sig")) {
		if a, err := parseConsoleAction(done); err == nil {
			p.Flash = "Done: " + string(a) + " " + c.QueryParam("id") + " (applied on this node and replicated to its peers)."
		}
	}
	return s.renderConsole(c, http.StatusOK, &p)
}

const maxMetadataShown = 6

// maxShownText is the longest metadata key or value a row shows; the
// rest is in GET /eureka/apps/{APP}/{id}.
const maxShownText = 80

func clip(s string) string {
	if len(s) <= maxShownText {
		return s
	}
	cut := maxShownText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxZoneMenu is the most zones the search form offers as a menu; beyond
// it (zones come from client metadata) the form has a text field, so the
// page stays small.
const maxZoneMenu = 64

func zoneMenu(zones []string) []string {
	if len(zones) > maxZoneMenu {
		return nil
	}
	return zones
}

// consoleMaxFormBytes bounds an action's form (four short fields); a
// larger body gets 413.
const consoleMaxFormBytes = 16 << 10

func (s *Console) instanceRow(iv *registry.InstanceView, now time.Time) instanceRow {
	in := iv.Instance
	r := instanceRow{App: in.App, ID: in.ID(), IP: in.IPAddr, Status: in.Status, Zone: instanceZone(in)}
	hp := in.HostName
	if in.Port.Enabled || !in.SecurePort.Enabled {
		hp += ":" + strconv.Itoa(in.Port.Number)
	}
	if in.SecurePort.Enabled {
		hp += " (https :" + strconv.Itoa(in.SecurePort.Number) + ")"
	}
	r.HostPort = hp
	if in.OverriddenStatus != "" && in.OverriddenStatus != registry.StatusUnknown {
		r.Override, r.HasOverride = string(in.OverriddenStatus), true
	}
	if in.RegistrationTimestamp > 0 {
		r.LeaseAge = formatAge(now.Sub(time.UnixMilli(in.RegistrationTimestamp)))
	}
	// A snapshot's views carry their app's renewal times as of its last
	// change; the live lease says when the instance last renewed.
	renewed := iv.LastRenewalTimestamp
	if live, ok := s.reg.Instance(in.App, in.ID()); ok && live.Instance == in {
		renewed = live.LastRenewalTimestamp
	}
	if renewed > 0 {
		r.LastRenewal = formatAge(now.Sub(time.UnixMilli(renewed))) + " ago"
	}
	if s.reg.IsClientLive(in.App, in.ID()) {
		r.Origin = "this node"
	} else {
		r.Origin = "a peer"
	}
	md := in.Metadata
	if len(md) > maxMetadataShown {
		r.MoreMetadata = len(md) - maxMetadataShown
		md = md[:maxMetadataShown]
	}
	r.Metadata = make([]registry.KV, len(md))
	for i, kv := range md {
		r.Metadata[i] = registry.KV{Key: clip(kv.Key), Value: clip(kv.Value)}
	}
	if strings.HasPrefix(in.StatusPageURL, "http") {
		r.Link = in.StatusPageURL
	}
	r.Health, r.HealthClass = s.healthText(in, now)
	r.CanDrain = s.cfg.Drains != nil
	if m, ok := in.Drain(); ok {
		r.Drained = true
		r.Drain = "drained " + formatAge(now.Sub(time.UnixMilli(m.At))) + " ago by " + clip(m.By)
		if s.cfg.Drains != nil {
			// Asks every node: rare rows (drained instances), and bounded
			// by the drain's peer timeout.
			progress, complete := s.cfg.Drains.Progress(context.Background(), in.App, in.ID())
			r.Drain += ": " + clip(progress)
			r.DrainComplete = complete
		}
	}
	return r
}

// healthText is the instance table's health-check cell.
func (s *Console) healthText(in *registry.Instance, now time.Time) (text, class string) {
	if s.cfg.HealthChecks == nil && in.Health == nil {
		return "", ""
	}
	var parts []string
	if h := in.Health; h != nil {
		mark := "marked DOWN"
		if !h.Hides {
			mark = "marked failing (its status or override stands)"
		}
		parts = append(parts, mark+": "+clip(h.Reason)+", "+formatAge(now.Sub(time.UnixMilli(h.Since)))+" ago, by "+clip(h.By))
		class = "bad"
	}
	if s.cfg.HealthChecks != nil {
		if ps, ok := s.cfg.HealthChecks.Probe(in.App, in.ID()); ok {
			probe := "probed here (" + ps.Mode + "): " + ps.State
			if ps.State == "failing" || ps.State == "recovering" || ps.State == "down" {
				probe += ", " + strconv.Itoa(ps.Failures) + " failed / " + strconv.Itoa(ps.Successes) + " passed in a row"
			}
			if ps.LastResult != "" {
				probe += ", last " + clip(ps.LastResult)
			}
			parts = append(parts, probe)
			if ps.State != "up" && class == "" {
				class = "bad"
			}
		} else if by := s.cfg.HealthChecks.ProbedBy(in.App, in.ID()); by != "" && in.Health != nil {
			parts = append(parts, "probed by "+by)
		}
	}
	return strings.Join(parts, "; "), class
}

// pageLinks returns the URLs of the previous and next pages, "" at the
// ends.
func pageLinks(c echo.Context, base string, pg paging) (prev, next string) {
	link := func(page int) string {
		q := c.QueryParams()
		nq := url.Values{}
		for k, v := range q {
			if k != "page" && k != "partial" && k != "done" && k != "id" && k != "sig" {
				nq[k] = v
			}
		}
		nq.Set("page", strconv.Itoa(page))
		return base + c.Request().URL.Path + "?" + nq.Encode()
	}
	if pg.Page > 1 {
		prev = link(pg.Page - 1)
	}
	if pg.Page < pg.Pages {
		next = link(pg.Page + 1)
	}
	return prev, next
}

// consoleConfirm is the confirmation step of an action: it names the
// instance and what will happen, and carries the CSRF token to the POST.
func (s *Console) consoleConfirm(c echo.Context) error {
	if ok, why := s.actionsAllowed(c); !ok {
		return echo.NewHTTPError(http.StatusForbidden, why)
	}
	a, err := parseConsoleAction(c.QueryParam("action"))
	if err != nil {
		return err
	}
	app, id := c.QueryParam("app"), c.QueryParam("id")
	iv, ok := s.reg.Instance(app, id)
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no instance "+id+" in "+strings.ToUpper(app))
	}
	session := s.consoleSession(c)
	p := s.basePage(c, "confirm", nil)
	p.Title = "Confirm — Muster"
	p.Confirm = &confirmView{Action: a, Describe: a.describe(), Instance: s.instanceRow(&iv, s.now()),
		CSRF: s.csrfToken(session, httpkit.UserOf(c)), Back: s.cfg.BasePath + "/console/apps/" + url.PathEscape(iv.App)}
	return s.renderConsole(c, http.StatusOK, &p)
}

// consoleAction applies a confirmed action: POST only, admin (or the
// policy without auth), CSRF-checked, then the same registry call as the
// Eureka API's, so it replicates like one.
func (s *Console) consoleAction(c echo.Context) error {
	if ok, why := s.actionsAllowed(c); !ok {
		return echo.NewHTTPError(http.StatusForbidden, why)
	}
	if err := s.checkCSRF(c); err != nil {
		return err
	}
	a, err := parseConsoleAction(c.FormValue("action"))
	if err != nil {
		return err
	}
	app, id := c.FormValue("app"), c.FormValue("id")
	if app == "" || id == "" || len(app) > maxFilterLen || len(id) > maxFilterLen {
		return httpkit.BadRequest("app and id are required")
	}
	if err := s.applyConsoleAction(c.Request().Context(), a, app, id); err != nil {
		return err
	}
	user := "(no auth)"
	if u := httpkit.UserOf(c); u != nil {
		user = u.Name
	}
	s.log.Info().Str("action", string(a)).Str("app", strings.ToUpper(app)).Str("instance_id", id).
		Str("user", user).Msg("console action")
	q := url.Values{"done": {string(a)}, "id": {id}, "sig": {s.flashSignature(string(a), strings.ToUpper(app), id)}}
	return c.Redirect(http.StatusSeeOther, s.cfg.BasePath+"/console/apps/"+url.PathEscape(strings.ToUpper(app))+"?"+q.Encode())
}

// consoleSummary is the live endpoint: 304 while index (the page's
// version) is current, else the figures that changed.
func (s *Console) consoleSummary(c echo.Context) error {
	index := s.liveIndex()
	h := c.Response().Header()
	h.Set(echo.HeaderCacheControl, "no-store")
	if c.QueryParam("index") == index {
		return c.NoContent(http.StatusNotModified)
	}
	snap := s.reg.Snapshot()
	sp := s.reg.SelfPreservationState()
	return c.JSON(http.StatusOK, map[string]any{
		"index":     index,
		"version":   snap.Version,
		"apps":      len(snap.Apps),
		"instances": snap.Instances,
		"hashcode":  snap.Hashcode,
		"selfPreservation": ops.SelfPreservationDoc{
			Enabled: sp.Enabled, Active: sp.Active, WarmingUp: sp.WarmingUp,
			LeaseExpirationEnabled: sp.LeaseExpirationEnabled, ExpectedRenewsPerMin: sp.ExpectedRenewsPerMin,
			RenewsThreshold: sp.RenewsThreshold, RenewsLastMin: sp.RenewsLastMin, ArrivingRenewsPerMin: sp.ArrivingRenewsPerMin,
		},
	})
}

// renderConsole writes the page, or only its live part when the script
// asks (partial=1), gzipped when the client accepts it.
func (s *Console) renderConsole(c echo.Context, code int, p *consolePage) error {
	name := "console.html"
	if c.QueryParam("partial") == "1" {
		name = "live"
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		return fmt.Errorf("render console: %w", err)
	}
	h := c.Response().Header()
	h.Set("X-Console-Index", p.Index)
	h.Set(echo.HeaderCacheControl, "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	return httpkit.WriteMaybeGzip(c, code, echo.MIMETextHTMLCharsetUTF8, b.Bytes())
}

// formatAge writes a duration the way people read ages: 45s, 12m, 3h10m,
// 2d4h.
func formatAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h" + strconv.Itoa(int(d%time.Hour/time.Minute)) + "m"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d" + strconv.Itoa(int(d%(24*time.Hour)/time.Hour)) + "h"
}

// static serves the embedded stylesheet and script.
func (s *Console) static(c echo.Context) error {
	name := c.Param("*")
	var ct string
	switch name {
	case "muster.css":
		ct = "text/css; charset=utf-8"
	case "console.js":
		ct = "text/javascript; charset=utf-8"
	default:
		return echo.NewHTTPError(http.StatusNotFound, "no such asset")
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "max-age=3600")
	c.Response().Header().Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	return httpkit.WriteMaybeGzip(c, http.StatusOK, ct, b)
}

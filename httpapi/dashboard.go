package httpapi

import (
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"runtime"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
)

//go:embed assets
var assets embed.FS

var dashboardTemplate = template.Must(template.ParseFS(assets, "assets/dashboard.html"))

type dashboardPage struct {
	Node        NodeInfo
	Ready       bool
	CurrentTime string
	Uptime      string
	SP          registry.SelfPreservation
	Peers       []dashboardPeer
	Apps        []dashboardApp
	General     [][2]string
	Security    Security
}

type dashboardPeer struct {
	PeerInfo
	Available bool
}

type dashboardApp struct {
	Name   string
	AMIs   string
	Zones  string
	Groups []statusGroup
}

type statusGroup struct {
	Status    registry.Status
	Up        bool
	Instances []dashboardInstance
}

type dashboardInstance struct {
	ID   string
	Link string
}

// dashboard renders Eureka's status page: system status, the
// self-preservation banners in Eureka's words, replicas, and every app
// with its instances grouped by status.
func (s *Server) dashboard(c echo.Context) error {
	now := s.now()
	snap := s.reg.Snapshot()
	page := dashboardPage{
		Node:        s.cfg.Node,
		Ready:       s.cfg.Ready(),
		CurrentTime: now.Format("2006-01-02T15:04:05 -0700"),
		Uptime:      formatUptime(now.Sub(s.started)),
		SP:          s.reg.SelfPreservationState(),
		Security:    s.cfg.Security,
	}
	var available, unavailable, registered []string
	for _, p := range s.cfg.Peers() {
		ok := p.State == "alive" || p.State == "static"
		page.Peers = append(page.Peers, dashboardPeer{PeerInfo: p, Available: ok})
		registered = append(registered, p.URL)
		if ok {
			available = append(available, p.URL)
		} else {
			unavailable = append(unavailable, p.URL)
		}
	}
	for _, app := range snap.Apps {
		page.Apps = append(page.Apps, summarizeApp(app))
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	page.General = [][2]string{
		{"environment", s.cfg.Node.Environment},
		{"num-of-cpus", fmt.Sprint(runtime.NumCPU())},
		{"total-avail-memory", fmt.Sprintf("%dmb", mem.Sys>>20)},
		{"current-memory-usage", fmt.Sprintf("%dmb (%d%%)", mem.HeapAlloc>>20, 100*mem.HeapAlloc/max(mem.Sys, 1))},
		{"server-uptime", page.Uptime},
		{"registered-replicas", strings.Join(registered, ", ")},
		{"available-replicas", strings.Join(available, ", ")},
		{"unavailable-replicas", strings.Join(unavailable, ", ")},
		{"instances", fmt.Sprint(snap.Instances)},
		{"apps hashcode", snap.Hashcode},
		{"registry version", fmt.Sprint(snap.Version)},
	}
	var b strings.Builder
	if err := dashboardTemplate.Execute(&b, page); err != nil {
		return fmt.Errorf("render dashboard: %w", err)
	}
	return c.HTML(http.StatusOK, b.String())
}

func summarizeApp(app registry.AppView) dashboardApp {
	byStatus := map[registry.Status][]dashboardInstance{}
	amis := map[string]int{}
	zones := map[string]int{}
	for _, iv := range app.Instances {
		link := ""
		if strings.HasPrefix(iv.StatusPageURL, "http") {
			link = iv.StatusPageURL
		}
		byStatus[iv.Status] = append(byStatus[iv.Status], dashboardInstance{ID: iv.ID(), Link: link})
		if iv.DataCenterInfo.Name == "Amazon" {
			ami, _ := iv.DataCenterInfo.Metadata.Get("ami-id")
			amis[ami]++
			if z, ok := iv.DataCenterInfo.Metadata.Get("availability-zone"); ok {
				zones[z]++
			}
		} else {
			amis["n/a"]++
			if z, ok := iv.Metadata.Get("zone"); ok {
				zones[z]++
			}
		}
	}
	d := dashboardApp{Name: app.Name, AMIs: countsString(amis), Zones: countsString(zones)}
	for st, ins := range byStatus {
		d.Groups = append(d.Groups, statusGroup{Status: st, Up: st == registry.StatusUp, Instances: ins})
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Status < d.Groups[j].Status })
	return d
}

// countsString writes "a (2), b (1)" in key order.
func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (%d)", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func (s *Server) static(c echo.Context) error {
	name := c.Param("*")
	if name != "muster.css" {
		return echo.NewHTTPError(http.StatusNotFound, "no such asset")
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "max-age=3600")
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", b)
}

package httpapi

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
)

func (s *Server) status() AdminStatus {
	sp := s.reg.SelfPreservationState()
	snap := s.reg.Snapshot()
	st := s.reg.Stats()
	peers := s.cfg.Peers()
	if peers == nil {
		peers = []PeerInfo{}
	}
	doc := AdminStatus{
		Node:           s.cfg.Node.Name,
		Zone:           s.cfg.Node.Zone,
		URL:            s.cfg.Node.URL,
		Version:        s.cfg.Node.Version,
		OpenForTraffic: s.cfg.Ready(),
		UptimeSeconds:  int64(s.now().Sub(s.started) / time.Second),
		SelfPreservation: SelfPreservationDoc{
			Enabled:                sp.Enabled,
			Active:                 sp.Active,
			WarmingUp:              sp.WarmingUp,
			LeaseExpirationEnabled: sp.LeaseExpirationEnabled,
			ExpectedRenewsPerMin:   sp.ExpectedRenewsPerMin,
			RenewsThreshold:        sp.RenewsThreshold,
			RenewsLastMin:          sp.RenewsLastMin,
			ArrivingRenewsPerMin:   sp.ArrivingRenewsPerMin,
			UnprovenRenewsPerMin:   sp.UnprovenRenewsPerMin,
		},
		Registry: RegistryDoc{
			Apps:          len(snap.Apps),
			Instances:     snap.Instances,
			Version:       snap.Version,
			AppsHashcode:  snap.Hashcode,
			Registrations: st.Registrations,
			Renewals:      st.Renewals,
			Cancels:       st.Cancels,
			Evictions:     st.Evictions,
		},
		Peers:    peers,
		Security: s.cfg.Security,
	}
	if s.cfg.Digests != nil {
		doc.Registry.Digest = fmt.Sprintf("%016x", s.cfg.Digests.RootDigest())
	}
	return doc
}

func (s *Server) adminStatus(c echo.Context) error {
	return c.JSONPretty(http.StatusOK, s.status(), "  ")
}

// readyz answers 200 once the node has opened for traffic and answers
// registry reads, so a load balancer sends nothing to a node that is still
// syncing or that could not reach the peers it knows.
func (s *Server) readyz(c echo.Context) error {
	switch {
	case !s.cfg.Ready():
		return c.String(http.StatusServiceUnavailable, "not ready: syncing the registry from peers\n")
	case !s.cfg.ReadsAllowed():
		return c.String(http.StatusServiceUnavailable, "not ready: opened without the registry (no peer had it, or none could be reached); refusing registry reads for a while\n")
	}
	return c.String(http.StatusOK, "ok\n")
}

func (s *Server) livez(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }

// statusInfo is Eureka's StatusInfo (GET /status), with the general and
// application stats as string maps, as Eureka writes them.
type statusInfo struct {
	XMLName          xml.Name  `json:"-" xml:"status"`
	GeneralStats     statsMap  `json:"generalStats" xml:"generalStats"`
	ApplicationStats statsMap  `json:"applicationStats" xml:"applicationStats"`
	InstanceInfo     *selfInfo `json:"instanceInfo,omitempty" xml:"instanceInfo,omitempty"`
}

type selfInfo struct {
	HostName string `json:"hostName" xml:"hostName"`
	Status   string `json:"status" xml:"status"`
	URL      string `json:"url,omitempty" xml:"url,omitempty"`
}

// statsMap encodes as a JSON object and as XML elements named by key.
type statsMap [][2]string

func (m statsMap) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", kv[0], kv[1])
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

func (m statsMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	for _, kv := range m {
		if err := e.EncodeElement(kv[1], xml.StartElement{Name: xml.Name{Local: kv[0]}}); err != nil {
			return err
		}
	}
	return e.EncodeToken(start.End())
}

func (s *Server) getStatus(c echo.Context) error {
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	var registered, available, unavailable []string
	for _, p := range s.cfg.Peers() {
		registered = append(registered, p.URL)
		if p.State == "alive" || p.State == "static" {
			available = append(available, p.URL)
		} else {
			unavailable = append(unavailable, p.URL)
		}
	}
	info := statusInfo{
		GeneralStats: statsMap{
			{"environment", s.cfg.Node.Environment},
			{"num-of-cpus", fmt.Sprint(runtime.NumCPU())},
			{"total-avail-memory", fmt.Sprintf("%dmb", mem.Sys>>20)},
			{"current-memory-usage", fmt.Sprintf("%dmb (%d%%)", mem.HeapAlloc>>20, 100*mem.HeapAlloc/max(mem.Sys, 1))},
			{"server-uptime", httpkit.FormatUptime(s.now().Sub(s.started))},
		},
		ApplicationStats: statsMap{
			{"registered-replicas", strings.Join(registered, ",")},
			{"available-replicas", strings.Join(available, ",")},
			{"unavailable-replicas", strings.Join(unavailable, ",")},
		},
		InstanceInfo: &selfInfo{HostName: s.cfg.Node.Name, Status: "UP", URL: s.cfg.Node.URL},
	}
	if wantsJSON(c) {
		return c.JSON(http.StatusOK, info)
	}
	return c.XML(http.StatusOK, info)
}

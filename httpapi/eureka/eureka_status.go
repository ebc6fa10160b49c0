package eureka

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
)

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

func (s *API) getStatus(c echo.Context) error {
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

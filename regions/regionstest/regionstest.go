// Package regionstest holds what the tests of remote regions share across
// packages (the Eureka API's own tests and the node's): reading an
// applications document as a client does, and keeping the copy a Eureka
// client keeps from full fetches and deltas.
package regionstest

import (
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

var httpClient = &http.Client{Timeout: 5 * time.Second}

// FetchDoc GETs an applications document (JSON unless xml) with headers;
// anything but a 200 with a document that decodes fails tb.
func FetchDoc(tb testing.TB, u string, xml bool, hdr map[string]string) (*wire.Applications, http.Header) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if !xml {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	var doc *wire.Applications
	if xml {
		doc, err = wire.DecodeApplicationsXML(b)
	} else {
		doc, err = wire.DecodeApplicationsJSON(b)
	}
	if err != nil {
		tb.Fatalf("GET %s: %v\n%s", u, err, b)
	}
	return doc, resp.Header
}

// ClientCopy is what a Eureka client keeps: app → id → instance.
type ClientCopy map[string]map[string]*registry.Instance

// CopyOf is a client's copy after a full fetch of doc.
func CopyOf(doc *wire.Applications) ClientCopy {
	c := ClientCopy{}
	c.Apply(doc, true)
	return c
}

// Apply is DiscoveryClient#updateDelta (or, full, a full fetch's replace).
func (c ClientCopy) Apply(doc *wire.Applications, full bool) {
	for _, a := range doc.Apps {
		for _, iv := range a.Instances {
			m := c[a.Name]
			if m == nil {
				m = map[string]*registry.Instance{}
				c[a.Name] = m
			}
			if !full && iv.ActionType == registry.ActionDeleted {
				delete(m, iv.ID())
				continue
			}
			m[iv.ID()] = iv.Instance
		}
	}
}

// Hashcode is the copy's apps__hashcode, which a client compares with the
// server's after applying a delta.
func (c ClientCopy) Hashcode() string {
	var counts registry.StatusCounts
	for _, m := range c {
		for _, in := range m {
			counts.Add(in.Status)
		}
	}
	return counts.Hashcode()
}

// IDs lists app/id=STATUS@region of the copy, sorted.
func (c ClientCopy) IDs() []string {
	var out []string
	for app, m := range c {
		for id, in := range m {
			r, _ := in.Metadata.Get(regions.MetadataKey)
			out = append(out, app+"/"+id+"="+string(in.Status)+"@"+r)
		}
	}
	sort.Strings(out)
	return out
}

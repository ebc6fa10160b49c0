package regions

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
)

// TestSet_report: the remote regions' part of /admin/status is the set's
// own Report, from a real remote over HTTP: the region's URLs with their
// passwords redacted, its data and hashcode, the last fetch and its age;
// cut off, the failures and the last error (redacted too); past max
// staleness, no data.
func TestSet_report(t *testing.T) {
	remote := &fakeRemote{apps: []registry.AppView{{Name: "ORDERS", Instances: []registry.InstanceView{
		inst("ORDERS", "o1", registry.StatusUp, nil), inst("ORDERS", "o2", registry.StatusDown, nil)}}}}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	withPW := strings.Replace(srv.URL, "http://", "http://u:secret@", 1) + "/eureka/"
	s, f := newTestSet(t, srv.URL, func(c *Config) {
		c.URLs = map[string][]string{"b": {withPW}}
		c.MaxStaleness = time.Minute
	})
	if r := s.Report(); len(r) != 1 || r[0].Name != "b" || r[0].HasData || r[0].LastFetch != "" {
		t.Fatalf("before the first fetch: %+v", r)
	}
	fetchView(t, f)
	clock := f.clock.(clockOf)
	clock.Advance(10 * time.Second)
	r := s.Report()[0]
	if !r.HasData || r.Apps != 1 || r.Instances != 2 || r.Hashcode != "DOWN_1_UP_1_" || r.AgeSeconds != 10 ||
		r.LastFetch == "" || r.Failures != 0 || r.LastError != "" {
		t.Fatalf("after a fetch: %+v", r)
	}
	if len(r.URLs) != 1 || strings.Contains(r.URLs[0], "secret") || !strings.Contains(r.URLs[0], srv.URL[len("http://"):]) {
		t.Fatalf("URLs %v: want the one URL, password redacted", r.URLs)
	}

	remote.mu.Lock()
	remote.code = 500
	remote.mu.Unlock()
	if err := f.FetchOnce(context.Background()); err == nil {
		t.Fatal("a failing remote: no error")
	}
	clock.Advance(time.Minute)
	f.DropIfStale()
	r = s.Report()[0]
	if r.HasData || r.Instances != 0 || r.Failures != 1 || r.LastError == "" || strings.Contains(r.LastError, "secret") || r.AgeSeconds < 60 {
		t.Fatalf("cut off past max staleness: %+v", r)
	}
	var none *Set
	if none.Report() != nil {
		t.Fatal("a nil set reports regions")
	}
}

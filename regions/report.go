package regions

import (
	"time"

	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/report"
)

// Report is every remote region as this node holds it, in Config.Names
// order, for /admin/status and the console (nil without a region).
func (s *Set) Report() []report.RemoteRegion {
	if s == nil {
		return nil
	}
	var out []report.RemoteRegion
	now := s.Now()
	for _, f := range s.fetchers {
		v, st := f.View(), f.Stats()
		r := report.RemoteRegion{Name: f.Region(), HasData: v.HasData, Apps: len(v.Apps), Instances: v.Instances,
			Hashcode: v.Hashcode(), AgeSeconds: v.Age(now).Seconds(), Failures: st.Failures, LastError: st.LastError,
			Mismatches: st.Mismatches}
		if !v.Fetched.IsZero() {
			r.LastFetch = v.Fetched.UTC().Format(time.RFC3339)
		}
		for _, u := range s.cfg.URLs[f.Region()] {
			r.URLs = append(r.URLs, redact.URL(u))
		}
		out = append(out, r)
	}
	return out
}

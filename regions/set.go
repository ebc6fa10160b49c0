package regions

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/muster-registry/muster/internal/clock"
	"github.com/muster-registry/muster/registry/wire"
)

// Set is every remote region of a node: its fetchers and what the Eureka
// API asks of them. A Set with no region serves nothing more than the
// local registry.
type Set struct {
	cfg      Config
	fetchers []*Fetcher // in Config.Names order
	byName   map[string]*Fetcher
	clock    Clock

	// mu guards changed: closed and replaced whenever a view changes, so
	// blocking fetches of merged documents wake.
	mu      sync.Mutex
	changed chan struct{}
}

// NewSet builds one fetcher per remote region of cfg; it starts nothing.
func NewSet(cfg Config, fc FetcherConfig) *Set {
	s := &Set{cfg: cfg, byName: map[string]*Fetcher{}, clock: fc.Clock, changed: make(chan struct{})}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	for _, name := range cfg.Names() {
		f := newFetcher(name, &s.cfg, fc)
		f.published = s.broadcast
		s.fetchers = append(s.fetchers, f)
		s.byName[name] = f
	}
	if fc.Metrics != nil {
		fc.Metrics.MustRegister(s.collectors()...)
	}
	return s
}

// Run runs every fetcher until ctx ends, and returns when they have.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range s.fetchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Run(ctx)
		}()
	}
	wg.Wait()
}

// Changed returns a channel closed at the next change of any view.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Set) broadcast() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Enabled reports whether any remote region is configured.
func (s *Set) Enabled() bool { return s != nil && len(s.fetchers) > 0 }

// LocalRegion is the node's own region.
func (s *Set) LocalRegion() string { return s.cfg.LocalRegion }

// TransparentFallback reports whether plain requests are served remote
// apps unknown locally.
func (s *Set) TransparentFallback() bool { return !s.cfg.DisableTransparentFallback }

// RequireAll reports whether a regions= request naming a region without
// data is refused (403).
func (s *Set) RequireAll() bool { return s.cfg.RequireAll }

// Fetchers returns the fetchers, in region name order.
func (s *Set) Fetchers() []*Fetcher { return s.fetchers }

// Views returns the current view of every region, in name order.
func (s *Set) Views() []*View {
	vs := make([]*View, len(s.fetchers))
	for i, f := range s.fetchers {
		vs[i] = f.View()
	}
	return vs
}

// Served is Views as the Eureka API reads them (eureka.RemoteRegions):
// what each region serves, in registry/wire's type.
func (s *Set) Served() []*wire.CopyView {
	vs := make([]*wire.CopyView, len(s.fetchers))
	for i, f := range s.fetchers {
		vs[i] = &f.View().CopyView
	}
	return vs
}

// Resolve reads a regions= parameter: what the remote regions it names
// serve (in the order named, each once; those without data too, with no
// apps), and the named remote regions that have no data (never reached,
// or dropped as stale). Names that are
// not remote regions of this node, its own among them, are ignored, as
// Eureka does.
func (s *Set) Resolve(param string) (views []*wire.CopyView, missing []string) {
	seen := map[string]bool{}
	for _, name := range strings.Split(param, ",") {
		name = strings.TrimSpace(name)
		f := s.byName[name]
		if f == nil {
			f = s.byName[strings.ToLower(name)]
		}
		if f == nil || seen[f.region] {
			continue
		}
		seen[f.region] = true
		v := f.View()
		if !v.HasData {
			// Still a view: its Changes tell a client's delta what went
			// when the data was dropped.
			missing = append(missing, f.region)
		}
		views = append(views, &v.CopyView)
	}
	return views, missing
}

// Now is the regions' clock.
func (s *Set) Now() time.Time { return s.clock.Now() }

// collectors are the per-region metrics.
func (s *Set) collectors() []prometheus.Collector {
	var cs []prometheus.Collector
	for _, f := range s.fetchers {
		labels := prometheus.Labels{"region": f.region}
		gauge := func(name, help string, v func() float64) prometheus.Collector {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, v)
		}
		counter := func(name, help string, v func() float64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, v)
		}
		cs = append(cs,
			gauge("muster_region_last_fetch_timestamp_seconds", "Time of the last successful fetch of a remote region (0: never).", func() float64 {
				v := f.View()
				if v.Fetched.IsZero() {
					return 0
				}
				return float64(v.Fetched.UnixMilli()) / 1000
			}),
			gauge("muster_region_age_seconds", "Age of a remote region's data: time since its last successful fetch (0: never fetched).", func() float64 {
				return f.View().Age(s.clock.Now()).Seconds()
			}),
			gauge("muster_region_has_data", "1 while a remote region's data is served, 0 before its first fetch or after it was dropped as stale.", func() float64 {
				if f.View().HasData {
					return 1
				}
				return 0
			}),
			gauge("muster_region_instances", "Instances of a remote region served (after the whitelist).", func() float64 { return float64(f.View().Instances) }),
			counter("muster_region_fetches_total", "Fetch attempts of a remote region.", func() float64 { return float64(f.fetches.Load()) }),
			counter("muster_region_full_fetches_total", "Full fetches of a remote region that succeeded.", func() float64 { return float64(f.fullFetches.Load()) }),
			counter("muster_region_fetch_errors_total", "Failed fetch attempts of a remote region (every URL failed).", func() float64 { return float64(f.errorsTotal.Load()) }),
			counter("muster_region_hashcode_mismatches_total", "Deltas of a remote region whose hashcode disagreed with the copy they were applied to (each followed by a full fetch).", func() float64 { return float64(f.mismatches.Load()) }),
		)
	}
	return cs
}

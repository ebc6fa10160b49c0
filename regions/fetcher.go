package regions

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/clock"
	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Clock is the time a fetcher runs on: when the next fetch is due, how
// old a region's data is. Tests hand in one they move.
type Clock = clock.Clock

// Identity headers a Eureka server sends to another (EurekaServerIdentity,
// wire's): a remote Muster answers a server's plain request with its local
// instances only.
const (
	HeaderIdentityName    = wire.HeaderIdentityName
	HeaderIdentityVersion = wire.HeaderIdentityVersion
	HeaderIdentityID      = wire.HeaderIdentityID
	ServerIdentityName    = wire.ServerIdentityName
	serverIdentityVersion = "1.0"
)

// maxBodyBytes bounds a remote's response: a 1M-instance registry in JSON
// is well under it.
const maxBodyBytes = 2 << 30

// Fetcher copies one remote region: a full fetch first, then deltas
// applied to its copy and checked against the remote's apps hashcode, a
// full fetch on any mismatch, as a Eureka client does. Run owns its
// schedule; FetchOnce is one attempt (tests call it directly).
type Fetcher struct {
	region    string
	urls      []string
	cfg       *Config
	client    *http.Client
	clock     Clock
	id        string
	retention time.Duration
	log       zerolog.Logger

	// mu guards the fields below it: one fetch at a time.
	mu sync.Mutex
	// copy is the remote's registry as it serves it (not whitelisted):
	// what its hashcode is computed over.
	copy    *wire.Copy[registry.InstanceView]
	lastURL int
	version uint64

	// statMu guards failures and lastError, read by metrics while a fetch
	// runs.
	statMu    sync.Mutex
	failures  int
	lastError string

	view atomic.Pointer[View]
	// published is called after each new view (the Set's broadcast).
	published func()

	fetches, fullFetches, deltaFetches, errorsTotal, mismatches, mirrored atomic.Uint64
}

// FetcherConfig is what a fetcher needs beyond the regions' Config.
type FetcherConfig struct {
	// Client makes the requests (nil: one from Config's timeouts and TLS).
	Client *http.Client
	// TLS verifies HTTPS remotes when Client is nil (nil: system roots).
	TLS *tls.Config
	// Clock (nil: real time).
	Clock Clock
	// ID is the node's identity sent as DiscoveryIdentity-Id.
	ID string
	// Retention is how long a change stays in a view's Changes (the
	// registry's delta retention).
	Retention time.Duration
	Logger    zerolog.Logger
	// Metrics registers the per-region metrics, as NewSet builds the
	// fetchers (nil: not registered).
	Metrics prometheus.Registerer
}

// NewHTTPClient is a client with the connect and read timeouts of cfg.
func NewHTTPClient(cfg Config, tlsCfg *tls.Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSClientConfig:       tlsCfg,
			TLSHandshakeTimeout:   cfg.ConnectTimeout,
			ResponseHeaderTimeout: cfg.ReadTimeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
		},
		// The body of a large registry may take longer than the read
		// timeout to arrive; the whole exchange is bounded by a few
		// intervals' worth in FetchOnce's context.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func newFetcher(region string, cfg *Config, fc FetcherConfig) *Fetcher {
	f := &Fetcher{region: region, urls: cfg.URLs[region], cfg: cfg, client: fc.Client, clock: fc.Clock,
		id: fc.ID, retention: fc.Retention, log: fc.Logger.With().Str("region", region).Logger(),
		copy: wire.NewCopy(func(_ string, iv registry.InstanceView) registry.InstanceView { return iv },
			func(iv registry.InstanceView) registry.Status { return iv.Status })}
	if f.client == nil {
		f.client = NewHTTPClient(*cfg, fc.TLS)
	}
	if f.clock == nil {
		f.clock = clock.Real{}
	}
	if f.retention <= 0 {
		f.retention = 3 * time.Minute
	}
	f.view.Store(&View{CopyView: wire.NewCopyView(region, nil, 0, nil)})
	return f
}

// Region is the fetcher's region.
func (f *Fetcher) Region() string { return f.region }

// View is the region's current view (never nil).
func (f *Fetcher) View() *View { return f.view.Load() }

// Run fetches until ctx ends: every FetchInterval while fetches succeed;
// after failures, an exponential back-off capped at 8 intervals and
// jittered, so that nodes cut off together do not retry together. With a
// max staleness, it also wakes when the data is due to be dropped.
func (f *Fetcher) Run(ctx context.Context) {
	for {
		err := f.FetchOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		f.DropIfStale()
		wait := f.nextWait(err)
		if v := f.View(); f.cfg.MaxStaleness > 0 && v.HasData {
			if until := v.Fetched.Add(f.cfg.MaxStaleness).Sub(f.clock.Now()); until > 0 && until < wait {
				wait = until
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-f.clock.After(wait):
		}
	}
}

// nextWait is the pause before the next attempt.
func (f *Fetcher) nextWait(err error) time.Duration {
	interval := f.cfg.FetchInterval
	if err == nil {
		return interval
	}
	f.statMu.Lock()
	n := f.failures
	f.statMu.Unlock()
	d := interval
	for i := 1; i < n && d < 8*interval; i++ {
		d *= 2
	}
	d = min(d, 8*interval)
	// Jitter: up to a tenth less, never more than the cap.
	return d - time.Duration(rand.Int64N(int64(d)/10+1))
}

// DropIfStale drops the region's data when MaxStaleness is set and the
// last successful fetch is older than that: every instance leaves the view
// with a DELETED change, so clients' deltas stay consistent.
func (f *Fetcher) DropIfStale() bool {
	if f.cfg.MaxStaleness <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.view.Load()
	now := f.clock.Now()
	if !v.HasData || now.Sub(v.Fetched) < f.cfg.MaxStaleness {
		return false
	}
	f.log.Warn().Dur("age", now.Sub(v.Fetched)).Msg("remote region data dropped: not refreshed within muster.regions.max-staleness-ms")
	f.copy.Clear()
	f.publishLocked(now, nil, false, v.Fetched)
	return true
}

// FetchOnce makes one attempt: a delta when the fetcher holds a copy and
// deltas are allowed, a full fetch otherwise or when the delta's hashcode
// disagrees with the copy it was applied to.
func (f *Fetcher) FetchOnce(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout+f.cfg.ReadTimeout+max(f.cfg.FetchInterval, 30*time.Second))
	defer cancel()
	err := f.fetchLocked(ctx)
	f.statMu.Lock()
	defer f.statMu.Unlock()
	if err != nil {
		f.failures++
		f.errorsTotal.Add(1)
		if msg := err.Error(); msg != f.lastError || f.failures == 1 {
			f.log.Warn().Err(err).Int("failures", f.failures).Msg("remote region fetch failed; serving its last data")
		}
		f.lastError = err.Error()
		return err
	}
	if f.failures > 0 {
		f.log.Info().Int("after_failures", f.failures).Msg("remote region reached again")
	}
	f.failures, f.lastError = 0, ""
	return nil
}

func (f *Fetcher) fetchLocked(ctx context.Context) error {
	now := func() time.Time { return f.clock.Now() }
	if f.copy.Filled() && !f.cfg.DisableDelta {
		doc, code, err := f.get(ctx, "/apps/delta")
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			f.deltaFetches.Add(1)
			touched := f.copy.ApplyDelta(doc.Apps)
			got := f.copy.Hashcode()
			if got == doc.Hashcode {
				f.publishLocked(now(), touched, true, now())
				return nil
			}
			f.mismatches.Add(1)
			f.log.Info().Str("ours", got).Str("theirs", doc.Hashcode).Msg("remote region hashcode mismatch after a delta: full fetch")
		}
	}
	doc, code, err := f.get(ctx, "/apps")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("full fetch answered %d", code)
	}
	f.fullFetches.Add(1)
	f.copy.Replace(doc.Apps)
	f.publishLocked(now(), nil, true, now())
	return nil
}

// get asks the remote region's servers in turn, from the last that
// answered. It asks for the remote's own region by name, so that a Java
// or Spring server answers with its local instances only (its
// getApplicationsFromMultipleRegions ignores a name that is not one of its
// remotes) and a Muster remote likewise: regions never mirror mirrors.
func (f *Fetcher) get(ctx context.Context, path string) (*wire.Applications, int, error) {
	var errs []error
	for i := range f.urls {
		k := (f.lastURL + i) % len(f.urls)
		base := strings.TrimRight(f.urls[k], "/")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path+"?regions="+f.region, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", redact.URL(base), err))
			continue
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set(HeaderIdentityName, ServerIdentityName)
		req.Header.Set(HeaderIdentityVersion, serverIdentityVersion)
		if f.id != "" {
			req.Header.Set(HeaderIdentityID, f.id)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", redact.URL(base), stripURL(err)))
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
		resp.Body.Close()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: reading %s: %v", redact.URL(base), path, stripURL(err)))
			continue
		case len(body) > maxBodyBytes:
			errs = append(errs, fmt.Errorf("%s: %s is larger than %d bytes", redact.URL(base), path, maxBodyBytes))
			continue
		case resp.StatusCode == http.StatusForbidden && path == "/apps/delta":
			// Delta disabled there: a full fetch, without blaming the server.
			f.lastURL = k
			return nil, resp.StatusCode, nil
		case resp.StatusCode != http.StatusOK:
			errs = append(errs, fmt.Errorf("%s: GET %s answered %d", redact.URL(base), path, resp.StatusCode))
			continue
		}
		doc, err := wire.DecodeApplicationsJSON(body)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: GET %s: %w", redact.URL(base), path, err))
			continue
		}
		f.lastURL = k
		return doc, http.StatusOK, nil
	}
	return nil, 0, errors.Join(errs...)
}

// stripURL drops the URL from a net/http error (which names it, though
// without its password) so the message names the server once, redacted.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// publishLocked builds the next view from the copy: the apps in touched
// (nil: all) are rebuilt, the others kept; every instance that appeared,
// changed or went is a change.
func (f *Fetcher) publishLocked(now time.Time, touched map[string]bool, hasData bool, fetched time.Time) {
	old := f.view.Load()
	names := map[string]bool{}
	if touched == nil {
		for _, a := range old.Apps {
			names[strings.ToUpper(a.Name)] = true
		}
		for n := range f.copy.Apps() {
			names[n] = true
		}
	} else {
		names = touched
	}
	version := old.Version + 1
	var changes []wire.CopyChange
	rebuilt := map[string]registry.AppView{}
	for name := range names {
		oldApp, _ := old.App(name)
		app, ch := f.rebuildApp(name, oldApp, now, version)
		changes = append(changes, ch...)
		rebuilt[name] = app
	}
	if len(changes) == 0 && old.HasData == hasData {
		// Nothing served changed: the same view, refreshed.
		v := *old
		v.Fetched = fetched
		v.Changes, v.Pruned = pruneChanges(old, now.Add(-f.retention))
		f.view.Store(&v)
		return
	}
	f.version = version
	var apps []registry.AppView
	for _, a := range old.Apps {
		if _, ok := rebuilt[strings.ToUpper(a.Name)]; !ok {
			apps = append(apps, a)
		}
	}
	for _, a := range rebuilt {
		if len(a.Instances) > 0 {
			apps = append(apps, a)
		}
	}
	defer f.notify()
	sort.Slice(apps, func(i, j int) bool { return apps[i].Name < apps[j].Name })
	sort.Slice(changes, func(i, j int) bool { return changes[i].Instance.ID() < changes[j].Instance.ID() })
	appChanged := old.AppsChanged(len(rebuilt))
	for name, a := range rebuilt {
		if a.Version == version {
			appChanged[name] = version
		}
	}
	v := &View{CopyView: wire.NewCopyView(f.region, apps, version, appChanged), HasData: hasData, Fetched: fetched}
	kept, pruned := pruneChanges(old, now.Add(-f.retention))
	v.Changes, v.Pruned = append(kept, changes...), pruned
	f.view.Store(v)
}

func (f *Fetcher) notify() {
	if f.published != nil {
		f.published()
	}
}

// pruneChanges returns the changes of old at or after before, and the
// view's Pruned after dropping the others.
func pruneChanges(old *View, before time.Time) ([]wire.CopyChange, uint64) {
	cs, pruned := old.Changes, old.Pruned
	i := 0
	for i < len(cs) && cs[i].At.Before(before) {
		pruned = max(pruned, cs[i].Version)
		i++
	}
	return cs[i:len(cs):len(cs)], pruned // appends copy: views share no spare capacity
}

// rebuildApp is the served form of one app from the copy: whitelisted,
// without instances that are themselves remote copies (marked by another
// Muster), each marked with this region; and the changes from oldApp.
func (f *Fetcher) rebuildApp(name string, oldApp registry.AppView, now time.Time, version uint64) (registry.AppView, []wire.CopyChange) {
	prev := make(map[string]registry.InstanceView, len(oldApp.Instances))
	for _, iv := range oldApp.Instances {
		prev[iv.ID()] = iv
	}
	app := registry.AppView{Name: name, Version: oldApp.Version}
	var changes []wire.CopyChange
	if f.cfg.allowed(f.region, name) {
		for id, iv := range f.copy.Apps()[name] {
			if _, marked := iv.Metadata.Get(MetadataKey); marked {
				f.mirrored.Add(1)
				continue
			}
			if p, ok := prev[id]; ok && sameSource(p.Instance, iv.Instance, f.region) {
				app.Instances = append(app.Instances, p)
				delete(prev, id)
				continue
			}
			action := registry.ActionAdded
			if _, ok := prev[id]; ok {
				action = registry.ActionModified
			}
			delete(prev, id)
			m := mark(iv, f.region, registry.ActionAdded)
			app.Instances = append(app.Instances, m)
			changes = append(changes, wire.CopyChange{At: now, Version: version, Instance: m.WithAction(action)})
		}
	}
	for _, p := range prev {
		changes = append(changes, wire.CopyChange{At: now, Version: version, Instance: p.WithAction(registry.ActionDeleted)})
	}
	sort.Slice(app.Instances, func(i, j int) bool { return app.Instances[i].ID() < app.Instances[j].ID() })
	if len(changes) > 0 {
		app.Version = version
	}
	return app, changes
}

// mark returns a copy of iv carrying MetadataKey = region.
func mark(iv registry.InstanceView, region string, action registry.ActionType) registry.InstanceView {
	in := *iv.Instance
	in.Metadata = in.Metadata.With(map[string]string{MetadataKey: region})
	in.ActionType = action
	return registry.InstanceView{Instance: &in, LastRenewalTimestamp: iv.LastRenewalTimestamp}
}

// sameSource reports whether served (a marked copy) shows src unchanged:
// the same instance apart from the mark, the action type (a full fetch
// says ADDED where a delta said MODIFIED) and the timestamps each node of
// the remote region stamps itself (registration, service up, last
// updated: a peer's copy of a registration differs from the first node's
// by a millisecond or so). So a fetcher that fails over to the region's
// next node does not report every instance as MODIFIED; a real change
// (status, metadata, a re-registration's lastDirtyTimestamp) still does.
func sameSource(served, src *registry.Instance, region string) bool {
	a := *src
	a.Metadata = a.Metadata.With(map[string]string{MetadataKey: region})
	b := *served
	for _, in := range []*registry.Instance{&a, &b} {
		in.ActionType = ""
		in.RegistrationTimestamp, in.ServiceUpTimestamp, in.LastUpdatedTimestamp = 0, 0, 0
	}
	return reflect.DeepEqual(a, b)
}

// Stats are a fetcher's counters, for metrics and /admin/status.
type Stats struct {
	Fetches, FullFetches, DeltaFetches, Errors, Mismatches, Mirrored uint64
	Failures                                                         int
	LastError                                                        string
}

// Stats returns the fetcher's counters.
func (f *Fetcher) Stats() Stats {
	f.statMu.Lock()
	failures, lastErr := f.failures, f.lastError
	f.statMu.Unlock()
	return Stats{Fetches: f.fetches.Load(), FullFetches: f.fullFetches.Load(), DeltaFetches: f.deltaFetches.Load(),
		Errors: f.errorsTotal.Load(), Mismatches: f.mismatches.Load(), Mirrored: f.mirrored.Load(),
		Failures: failures, LastError: lastErr}
}

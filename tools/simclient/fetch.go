package simclient

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// view is the fleet's copy of the registry, as the Java client's
// DiscoveryClient keeps one per process. It keeps what the reconcile
// hashcode and the figures need: each instance's status, by app and id.
// Only the fetch goroutine touches it (tests call fetch directly).
type view struct {
	instances map[registry.InstanceKey]registry.Status
	// fetched is true after the first successful full fetch.
	fetched bool
	// seenNonEmpty is true once a fetch returned at least one instance.
	seenNonEmpty bool
}

// keyOf is the view's key of an instance. The strings are copied: a
// decoded document's strings all share one copy of its body, which a key
// would otherwise keep alive (11 MB for a full fetch of 10 000 instances).
func keyOf(app registry.AppView, iv registry.InstanceView) registry.InstanceKey {
	name := iv.App
	if name == "" {
		name = strings.ToUpper(app.Name)
	}
	return registry.InstanceKey{App: strings.Clone(name), ID: strings.Clone(iv.ID())}
}

// replace makes apps the whole view.
func (v *view) replace(apps []registry.AppView) {
	n := 0
	for _, app := range apps {
		n += len(app.Instances)
	}
	v.instances = make(map[registry.InstanceKey]registry.Status, n)
	for _, app := range apps {
		for _, iv := range app.Instances {
			if iv.Instance != nil {
				v.instances[keyOf(app, iv)] = iv.Status
			}
		}
	}
}

// applyDelta applies a delta as DiscoveryClient#updateDelta does: ADDED
// and MODIFIED add or replace the instance, DELETED removes it; other
// entries are ignored.
func (v *view) applyDelta(apps []registry.AppView) {
	if v.instances == nil {
		v.instances = map[registry.InstanceKey]registry.Status{}
	}
	for _, app := range apps {
		for _, iv := range app.Instances {
			if iv.Instance == nil {
				continue
			}
			switch iv.ActionType {
			case registry.ActionAdded, registry.ActionModified:
				v.instances[keyOf(app, iv)] = iv.Status
			case registry.ActionDeleted:
				delete(v.instances, keyOf(app, iv))
			}
		}
	}
}

// hashcode is the view's reconcile hashcode
// (Applications#getReconcileHashCode).
func (v *view) hashcode() string {
	counts := map[registry.Status]int{}
	for _, st := range v.instances {
		counts[st]++
	}
	return registry.AppsHashcode(counts)
}

// fetch updates the view once, as DiscoveryClient#fetchRegistry does: a
// full fetch when the view is empty (first fetch included), otherwise a
// delta; a delta answered 403 or 404 (disabled, or reads refused) falls
// back to a full fetch, and a delta whose result does not match its
// apps__hashcode is followed by a full fetch that replaces the view.
func (f *Fleet) fetch(ctx context.Context) error {
	if !f.view.fetched || len(f.view.instances) == 0 {
		return f.fullFetch(ctx)
	}
	rep, err := f.call(ctx, opFetchDelta, http.MethodGet, "apps/delta", nil)
	if err != nil {
		return f.fetchFailed(ctx, err)
	}
	if rep.code != http.StatusOK {
		return f.fullFetch(ctx)
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		return f.fetchFailed(ctx, fmt.Errorf("delta from %s: %w", rep.server.Redacted(), err))
	}
	f.view.applyDelta(doc.Apps)
	f.stats.deltaFetches.Add(1)
	if h := f.view.hashcode(); h != doc.Hashcode {
		f.log.Debug().Str("view", h).Str("server", doc.Hashcode).Msg("hashcode differs after delta, fetching the full registry")
		f.stats.reconcileFetches.Add(1)
		return f.fullFetch(ctx)
	}
	f.publishView()
	return nil
}

// fullFetch replaces the view with GET apps/ (403 fails over).
func (f *Fleet) fullFetch(ctx context.Context) error {
	rep, err := f.call(ctx, opFetchFull, http.MethodGet, "apps/", nil)
	if err != nil {
		return f.fetchFailed(ctx, err)
	}
	if rep.code != http.StatusOK {
		return f.fetchFailed(ctx, fmt.Errorf("full fetch from %s: status %d", rep.server.Redacted(), rep.code))
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		return f.fetchFailed(ctx, fmt.Errorf("full fetch from %s: %w", rep.server.Redacted(), err))
	}
	f.view.replace(doc.Apps)
	f.view.fetched = true
	f.stats.fullFetches.Add(1)
	if len(f.view.instances) == 0 && f.view.seenNonEmpty {
		f.stats.emptyRegistrySeen.Add(1)
		f.log.Warn().Str("server", rep.server.Redacted()).Msg("full fetch returned an empty registry after a non-empty one")
	}
	f.publishView()
	return nil
}

func (f *Fleet) fetchFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.stats.fetchFailures.Add(1)
	return err
}

func (f *Fleet) publishView() {
	n := len(f.view.instances)
	if n > 0 {
		f.view.seenNonEmpty = true
	}
	h := f.view.hashcode()
	f.stats.lastViewInstances.Store(int64(n))
	f.stats.viewHashcode.Store(&h)
}

// decodeApplications decodes a fetch reply, JSON unless the server
// answered XML.
func decodeApplications(rep reply) (*wire.Applications, error) {
	if strings.Contains(rep.header.Get("Content-Type"), "xml") {
		return wire.DecodeApplicationsXML(rep.body)
	}
	return wire.DecodeApplicationsJSON(rep.body)
}

// fetchLoop fetches now and then every FetchInterval after the previous
// fetch ended (fixed delay, like the Java client's TimedSupervisorTask),
// until ctx ends.
func (f *Fleet) fetchLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := f.fetch(ctx); err != nil && ctx.Err() == nil {
			f.log.Debug().Err(err).Msg("fetch failed")
		}
		timer.Reset(f.cfg.FetchInterval)
	}
}

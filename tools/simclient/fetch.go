package simclient

import (
	"context"
	"time"

	"github.com/muster-registry/muster/client"
)

// view is the fleet's copy of the registry after its last successful
// fetch, as the Java client's DiscoveryClient keeps one per process. Only
// the fetch goroutine touches it (tests call fetch directly).
type view struct {
	apps client.Apps
	// seenNonEmpty is true once a fetch returned at least one instance.
	seenNonEmpty bool
}

// size is the number of instances in the view.
func (v *view) size() int {
	n := 0
	for _, list := range v.apps {
		n += len(list)
	}
	return n
}

// status returns an instance's status in the view, and whether it is
// there.
func (v *view) status(app, id string) (client.Status, bool) {
	for _, in := range v.apps[app] {
		if in.ID == id {
			return in.Status, true
		}
	}
	return "", false
}

// fetch updates the view once through the client package's Fetch, which
// does what DiscoveryClient#fetchRegistry does: a full fetch the first
// time, otherwise a delta; a delta answered 403 or 404 (disabled, or reads
// refused) falls back to a full fetch, and a delta whose result does not
// match its apps__hashcode is followed by a full fetch that replaces the
// copy. A full fetch that returns no instance after the fleet has seen
// some counts in EmptyRegistrySeen.
func (f *Fleet) fetch(ctx context.Context) error {
	fullBefore := f.api.Stats().FullFetches
	apps, err := f.api.Fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.stats.fetchFailures.Add(1)
		return err
	}
	f.view.apps = apps
	n := f.view.size()
	if n == 0 && f.view.seenNonEmpty && f.api.Stats().FullFetches > fullBefore {
		f.stats.emptyRegistrySeen.Add(1)
		f.log.Warn().Str("server", f.api.CurrentServer().URL).Msg("full fetch returned an empty registry after a non-empty one")
	}
	if n > 0 {
		f.view.seenNonEmpty = true
	}
	h := f.view.apps.Hashcode()
	f.stats.lastViewInstances.Store(int64(n))
	f.stats.viewHashcode.Store(&h)
	return nil
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

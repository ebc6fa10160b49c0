package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Apps is a copy of the registry as fetched: upper-case application name
// to its instances, sorted by id. The caller owns it.
type Apps map[string][]Instance

// Hashcode is the apps hashcode of the copy, computed as the server
// computes apps__hashcode (Applications#getReconcileHashCode): equal to the
// server's when the copy holds what the server serves.
func (a Apps) Hashcode() string {
	var counts registry.StatusCounts
	for _, list := range a {
		for _, in := range list {
			counts.Add(registry.Status(in.Status))
		}
	}
	return counts.Hashcode()
}

// newView is the client's copy of the registry, kept between fetches so
// that a delta can be applied to it: each instance converted once, as it
// arrives.
func newView() *wire.Copy[Instance] {
	return wire.NewCopy(func(app string, iv registry.InstanceView) Instance { return fromWire(app, iv.Instance) },
		func(in Instance) registry.Status { return registry.Status(in.Status) })
}

// Fetch brings the client's copy of the registry up to date and returns
// it, as the Java client's DiscoveryClient#fetchRegistry does: the first
// call, and any call while the copy is empty, fetches the whole registry
// (GET apps/); later calls fetch the delta
// (GET apps/delta: the changes of the last few minutes) and apply it
// (ADDED and MODIFIED add or replace an instance, DELETED removes it). The
// delta carries apps__hashcode, the server's count of instances per
// status; when the copy's own count differs (a change fell out of the
// delta window, or the client missed a delta), Fetch fetches the whole
// registry again and replaces the copy. A delta answered 403 or 404
// (deltas disabled, or the server not serving reads yet) also falls back to
// a full fetch. Concurrent calls take turns.
func (c *Client) Fetch(ctx context.Context) (Apps, error) {
	c.fetchMu.Lock()
	defer c.fetchMu.Unlock()
	if err := c.fetchLocked(ctx); err != nil {
		return nil, err
	}
	return snapshot(c.view), nil
}

func (c *Client) fetchLocked(ctx context.Context) error {
	// An empty copy is filled by a full fetch, as DiscoveryClient#fetchRegistry
	// does: a delta could only confirm it.
	if !c.view.Filled() || len(c.view.Apps()) == 0 {
		return c.fullFetchLocked(ctx)
	}
	rep, err := c.call(ctx, request{op: opFetchDelta, method: http.MethodGet, path: "apps/delta"})
	if err != nil {
		return fmt.Errorf("client: fetch delta: %w", err)
	}
	if rep.code != http.StatusOK {
		return c.fullFetchLocked(ctx)
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		return fmt.Errorf("client: fetch delta from %s: %w", c.servers.list[rep.server].base, err)
	}
	c.view.ApplyDelta(doc.Apps)
	c.stats.deltaFetches.Add(1)
	if h := c.view.Hashcode(); h != doc.Hashcode {
		c.log.Debug().Str("local", h).Str("server", doc.Hashcode).Msg("hashcode differs after the delta, fetching the full registry")
		c.stats.reconcileFetches.Add(1)
		return c.fullFetchLocked(ctx)
	}
	return nil
}

func (c *Client) fullFetchLocked(ctx context.Context) error {
	rep, err := c.call(ctx, request{op: opFetchFull, method: http.MethodGet, path: "apps/"})
	if err != nil {
		return fmt.Errorf("client: fetch: %w", err)
	}
	if rep.code != http.StatusOK {
		return &StatusError{Op: opFetchFull.String(), Server: c.servers.list[rep.server].base, Code: rep.code}
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		return fmt.Errorf("client: fetch from %s: %w", c.servers.list[rep.server].base, err)
	}
	c.view.Replace(doc.Apps)
	c.stats.fullFetches.Add(1)
	return nil
}

// snapshot is a copy of the view the caller owns, each app's instances
// sorted by id.
func snapshot(v *wire.Copy[Instance]) Apps {
	out := make(Apps, len(v.Apps()))
	for name, m := range v.Apps() {
		list := make([]Instance, 0, len(m))
		for _, in := range m {
			list = append(list, in.clone())
		}
		sortInstances(list)
		out[name] = list
	}
	return out
}

// appInstances converts the instances of one decoded app document.
func appInstances(doc *wire.Applications) []Instance {
	var out []Instance
	for _, app := range doc.Apps {
		for _, iv := range app.Instances {
			if iv.Instance != nil {
				out = append(out, fromWire(app.Name, iv.Instance))
			}
		}
	}
	sortInstances(out)
	return out
}

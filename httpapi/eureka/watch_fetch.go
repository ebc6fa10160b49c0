package eureka

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
)

// HeaderIndex carries the version of what a registry read describes
// (client/doc.go, "Watching"): the registry's version for a full or delta
// fetch and a VIP lookup, the app's for an app.
const HeaderIndex = "X-Muster-Index"

const (
	paramIndex = "index"
	paramWait  = "wait"
)

// heldKey marks a request that was held, so its latency is not mixed with
// plain reads in muster_http_request_duration_seconds.
const heldKey = "muster.held"

// watches are the held reads: blocking fetches (index and wait) and the
// watch stream, over the registry's change stream and, for remote data,
// the remote regions' changes.
type watches struct {
	reg          Registry
	watch        *watchHub
	watchTimer   func(d time.Duration) (<-chan time.Time, func())
	maxWait      time.Duration
	maxWatchers  int
	remote       *remoteReads
	readsAllowed func(c echo.Context) error
	// streamRun tells this run of the node apart in watch stream cursors
	// with remote regions (whose versions are per node and per run).
	streamRun string
	// noteStream records what a watch stream's reader has been sent: app
	// ("" for every app) up to version (the drain's reader table).
	noteStream func(c echo.Context, app string, version uint64)
}

// watchParams reads index and wait. ok is false when the request is not a
// blocking fetch (either is missing, or wait is 0); a malformed value is a
// 400 either way.
func (s *watches) watchParams(c echo.Context) (index uint64, wait time.Duration, ok bool, err error) {
	q := c.Request().URL.Query()
	rawIndex, hasIndex := q[paramIndex]
	rawWait, hasWait := q[paramWait]
	if !hasIndex && !hasWait {
		return 0, 0, false, nil
	}
	if hasIndex {
		index, err = strconv.ParseUint(rawIndex[0], 10, 64)
		if err != nil {
			return 0, 0, false, httpkit.BadRequest("index must be a version number (from the %s header), got %q", HeaderIndex, truncate(rawIndex[0]))
		}
	}
	if hasWait {
		wait, err = time.ParseDuration(rawWait[0])
		if err != nil || wait < 0 {
			return 0, 0, false, httpkit.BadRequest("wait must be a non-negative duration such as 30s, got %q", truncate(rawWait[0]))
		}
		wait = min(wait, s.maxWait)
	}
	return index, wait, hasIndex && wait > 0, nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// holdApp holds a blocking fetch of app while the index of the app it
// serves is index (servedAppIndex: the Seq of the local app's last
// change, 0 when there is no such app). An app read sets the index from
// the snapshot it answers from, so a client that waits on the index it
// was given is held until the app changes after what it read. It returns
// at once for a plain request. It listens for the app's next change
// before it reads the registry's current version: a change after that
// read wakes it, one before shows in the read.
//
// An app unknown locally that remote regions serve (regions=, or the
// transparent fallback) is held on its remote index and woken by a change
// of the remote views too.
func (s *watches) holdApp(c echo.Context, app string) error {
	remote := s.remote.appReadsRemote(c)
	return s.hold(c, func(index uint64) (<-chan struct{}, func()) {
		var remoteCh <-chan struct{}
		if remote {
			remoteCh = s.remote.regions.Changed() // before the read: no change is missed
		}
		ch := s.watch.waitApp(app)
		release := func() { s.watch.releaseApp(app) }
		snap := s.reg.Snapshot()
		if s.remote.servedAppIndex(c, snap, app) != index {
			release()
			return nil, nil
		}
		if _, local := snap.App(app); local || remoteCh == nil {
			// Served locally: only a local change (its going among them)
			// changes what is served, so remote changes do not wake it.
			return ch, release
		}
		either, stop := eitherChanged(ch, remoteCh)
		return either, func() { stop(); release() }
	})
}

// holdRegistry holds a blocking fetch of a registry-wide view (all apps,
// the delta, a VIP) while the registry's version is index.
func (s *watches) holdRegistry(c echo.Context) error {
	return s.hold(c, func(index uint64) (<-chan struct{}, func()) {
		if s.reg.Version() != index {
			return nil, nil
		}
		return s.watch.waitAny(index), func() {}
	})
}

// hold parses the request's index and wait and, for a blocking fetch,
// waits until wait returns no channel (the view is no longer at index),
// the wait passes, the client goes or the server shuts down. The caller
// then answers as to a plain request.
func (s *watches) hold(c echo.Context, wait func(index uint64) (<-chan struct{}, func())) error {
	index, d, ok, err := s.watchParams(c)
	if err != nil || !ok {
		return err
	}
	h := s.watch
	if n := h.held.Add(1); s.maxWatchers > 0 && n > int64(s.maxWatchers) {
		// Over the limit: answered as if wait were absent. A client that
		// gets its own index back early asks again after a backoff.
		h.held.Add(-1)
		h.overLimit.Add(1)
		return nil
	}
	defer h.held.Add(-1)
	changed, release := wait(index)
	if changed == nil {
		return nil
	}
	c.Set(heldKey, true)
	// A little jitter spreads the answers of watchers that started
	// together; it stays under the wait/16 a client allows on top of wait.
	expired, stop := s.watchTimer(d + rand.N(d/32+1))
	defer stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-changed:
			release()
			if changed, release = wait(index); changed == nil {
				h.wakeups.Add(1)
				return nil
			}
			// Woken by a change that the client has seen already (the
			// hub was behind when it answered): wait on.
		case <-expired:
			release()
			h.timeouts.Add(1)
			return nil
		case <-h.stopped():
			release()
			return nil
		case <-ctx.Done():
			release()
			return nil
		}
	}
}

// setIndex sets X-Muster-Index.
func setIndex(c echo.Context, v uint64) {
	c.Response().Header().Set(HeaderIndex, strconv.FormatUint(v, 10))
}

// StopWatches answers every held blocking fetch and ends every watch
// stream, so that a graceful shutdown does not wait for them. Later
// blocking fetches are answered at once and streams refused. HTTPServer
// registers it to run when Shutdown begins.
func (s *API) StopWatches() { s.watch.close() }

var errWatchStopped = echo.NewHTTPError(http.StatusServiceUnavailable, "this node is shutting down; watch another server")

package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header and query parameters of Muster's blocking fetches (see the
// package documentation, "Watching").
const (
	HeaderIndex = "X-Muster-Index"
	paramIndex  = "index"
	paramWait   = "wait"
)

// Watch delivers the instances of app (sorted by id; empty when the app has
// none) on the returned channel: first the current ones, then the whole
// list again after every change, until ctx ends, when the channel is
// closed. A reader that falls behind skips intermediate lists, never the
// latest: the channel holds one list, and a newer one replaces it.
//
// Against a server that answers with X-Muster-Index, Watch uses blocking
// fetches: each request carries the index it last saw and asks the server
// to hold it for WatchWait, so a change arrives within a round trip of the
// server seeing it, and an idle watch costs one request per WatchWait.
// Against any other server (a plain Eureka server) it polls every
// PollInterval and delivers only when the list actually changed. The
// choice is made per answer, so it follows failovers between the two
// kinds. Requests fail over like every other; when no server answers,
// Watch retries with backoff and keeps the last list delivered.
func (c *Client) Watch(ctx context.Context, app string) (<-chan []Instance, error) {
	if strings.TrimSpace(app) == "" {
		return nil, errors.New("client: Watch needs an app name")
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	ch := make(chan []Instance, 1)
	w := &watch{c: c, app: strings.ToUpper(app), out: ch, indexServer: -1, noHold: map[int]bool{}}
	go w.run(ctx)
	return ch, nil
}

// watch is the state of one Watch; only its goroutine touches it.
type watch struct {
	c   *Client
	app string
	out chan []Instance

	last      []Instance
	delivered bool
	// index is the X-Muster-Index of indexServer's last answer; it means
	// nothing to another server (each node numbers its own changes), so a
	// request to another server starts without one.
	index       uint64
	indexServer int // -1: no index
	// noHold marks servers that answered a held request 400: they get
	// plain polls from then on.
	noHold map[int]bool
	// quick counts held requests in a row that came back early and
	// unchanged: a server that cannot hold them (too many watchers) and
	// answers at once must not be asked in a tight loop.
	quick    int
	failures int
}

func (w *watch) run(ctx context.Context) {
	defer close(w.out)
	c := w.c
	wait := c.cfg.WatchWait
	for {
		var held bool
		var sent uint64
		pathFor := func(srv int) string {
			p := "apps/" + url.PathEscape(w.app)
			held = srv == w.indexServer && !w.noHold[srv]
			if held {
				sent = w.index
				p += "?" + paramIndex + "=" + strconv.FormatUint(w.index, 10) + "&" + paramWait + "=" + wait.String()
			}
			return p
		}
		start := c.clock.Now()
		rep, err := c.call(ctx, request{op: opFetchApp, method: http.MethodGet, pathFor: pathFor, hold: wait + wait/16})
		if ctx.Err() != nil {
			return
		}
		if held {
			c.stats.watchHeld.Add(1)
		} else {
			c.stats.watchPolls.Add(1)
		}
		var pause time.Duration
		switch {
		case err != nil:
			pause = w.failed(err)
		case rep.code == http.StatusBadRequest && held:
			// The server does not take index and wait: poll it.
			c.log.Info().Str("server", c.servers.list[rep.server].base).Str("app", w.app).
				Msg("server refused a blocking fetch, polling it instead")
			w.noHold[rep.server] = true
			w.indexServer = -1
			continue
		case rep.code == http.StatusOK || rep.code == http.StatusNotFound:
			list, ok := w.decode(rep)
			if !ok {
				pause = w.failed(errors.New("undecodable answer"))
				break
			}
			if w.failures > 0 {
				c.log.Info().Str("app", w.app).Int("failures", w.failures).Msg("watch recovered")
				w.failures = 0
			}
			w.deliver(list)
			pause = w.next(rep, held, sent, c.clock.Now().Sub(start))
		default:
			pause = w.failed(&StatusError{Op: "watch", Server: c.servers.list[rep.server].base, Code: rep.code})
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
				return
			case <-c.clock.After(pause):
			}
		}
	}
}

// next records the answer's index and returns the pause before the next
// request: none after a held answer, PollInterval without an index.
func (w *watch) next(rep reply, held bool, sent uint64, took time.Duration) time.Duration {
	c := w.c
	idx, err := strconv.ParseUint(rep.header.Get(HeaderIndex), 10, 64)
	if err != nil || w.noHold[rep.server] {
		w.indexServer = -1
		return c.cfg.PollInterval
	}
	w.index, w.indexServer = idx, rep.server
	if held && idx == sent && took < c.cfg.WatchWait/2 {
		w.quick++
		return backoff(c.cfg.RetryBackoff, c.cfg.PollInterval, w.quick)
	}
	w.quick = 0
	return 0
}

func (w *watch) failed(err error) time.Duration {
	w.failures++
	w.indexServer = -1
	if w.failures == 1 {
		w.c.log.Warn().Err(err).Str("app", w.app).Msg("watch request failed, retrying with backoff")
	} else {
		w.c.log.Debug().Err(err).Str("app", w.app).Int("failures", w.failures).Msg("watch request failed")
	}
	return backoff(w.c.cfg.RetryBackoff, w.c.cfg.MaxRetryBackoff, w.failures)
}

// decode reads an app answer: 404 means the app has no instances.
func (w *watch) decode(rep reply) ([]Instance, bool) {
	if rep.code == http.StatusNotFound {
		return []Instance{}, true
	}
	doc, err := decodeApplications(rep)
	if err != nil {
		return nil, false
	}
	list := appInstances(doc)
	if list == nil {
		list = []Instance{}
	}
	return list, true
}

// deliver hands list to the reader unless it equals the last one, and
// replaces a list the reader has not taken yet.
func (w *watch) deliver(list []Instance) {
	if w.delivered && equalInstances(w.last, list) {
		return
	}
	w.last, w.delivered = list, true
	out := make([]Instance, len(list))
	for i, in := range list {
		out[i] = in.clone()
	}
	for {
		select {
		case w.out <- out:
			return
		default:
			select {
			case <-w.out: // stale: the reader has not taken it
			default:
			}
		}
	}
}

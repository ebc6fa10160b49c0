package eureka

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// streamKeepAlive is how often an idle watch stream gets a comment line, so
// that proxies and load balancers do not close it as idle.
const streamKeepAlive = 15 * time.Second

// watchStream is GET /eureka/watch: every change as a server-sent event
// (text/event-stream), optionally of one app (app=), from now or resumed
// after an index (index=, or the Last-Event-ID header an EventSource sends
// when it reconnects).
//
//	id: 42              the change's version (registry Seq)
//	event: ADDED        ADDED, MODIFIED or DELETED (Eureka's actionType)
//	data: {…}           the instance as JSON; for DELETED {"app":…,"instanceId":…}
//
// The stream opens with "event: open" whose id is the version it starts
// after. When the changes a reader needs are gone — it resumed from an
// index older than the node keeps (registry OutboxSize changes), from
// another incarnation of the node, or it read too slowly — the stream sends
// "event: resync" with the current version as id instead of skipping
// silently: the reader re-reads GET /eureka/apps and goes on with the
// events that follow, which may repeat what that fetch shows.
func (s *API) watchStream(c echo.Context) error {
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	req := c.Request()
	q := req.URL.Query()
	if strings.TrimSpace(q.Get("regions")) != "" {
		// Event ids are this registry's versions, so remote changes have
		// no place in the stream: say so rather than leave them out.
		return httpkit.BadRequest("the watch stream carries this region's changes only; for remote regions use a blocking fetch: GET /eureka/apps?regions=…&index=…&wait=… (docs/regions.md)")
	}
	app := strings.ToUpper(q.Get("app"))
	rawIndex, hasIndex := q.Get(paramIndex), q.Has(paramIndex)
	if !hasIndex {
		if id := req.Header.Get("Last-Event-ID"); id != "" {
			rawIndex, hasIndex = id, true
		}
	}
	var index uint64
	if hasIndex {
		var err error
		if index, err = strconv.ParseUint(rawIndex, 10, 64); err != nil {
			return httpkit.BadRequest("index must be a version number (an event id), got %q", truncate(rawIndex))
		}
	}
	h := s.watch
	select {
	case <-h.stopped():
		return errWatchStopped
	default:
	}
	if n := h.held.Load() + h.streams.Add(1); s.cfg.WatchMaxWatchers > 0 && n > int64(s.cfg.WatchMaxWatchers) {
		h.streams.Add(-1)
		h.overLimit.Add(1)
		return echo.NewHTTPError(http.StatusServiceUnavailable, "too many watchers on this node (muster.watch.max-watchers); try another server")
	}
	defer h.streams.Add(-1)

	var cursor *registry.Cursor
	resync := false
	if hasIndex {
		cursor, resync = s.reg.SubscribeAfter(index)
	} else {
		cursor = s.reg.Subscribe()
	}
	defer cursor.Close()
	c.Set(heldKey, true)

	res := c.Response()
	hd := res.Header()
	hd.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	res.WriteHeader(http.StatusOK)

	w := &eventWriter{app: app}
	if resync {
		h.sseResync.Add(1)
		w.resync(cursor.Head(), "the changes after the requested index are not kept here (too old, or from before a restart of this node)")
	} else {
		start := index
		if !hasIndex {
			start = cursor.Head()
		}
		w.control("open", start, `{"index":`+strconv.FormatUint(start, 10)+`}`)
	}
	if err := w.flush(res); err != nil {
		return nil
	}

	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	buf := make([]registry.Event, 0, 256)
	ctx := req.Context()
	for {
		select {
		case <-h.stopped():
			return nil
		case <-ctx.Done():
			return nil
		case <-keepAlive.C:
			w.buf = append(w.buf, ": keep-alive\n\n"...)
		case <-cursor.Ready():
			for {
				events, behind := cursor.Read(buf)
				if behind {
					h.sseResync.Add(1)
					w.resync(cursor.Head(), "this reader fell behind the changes the node keeps")
					continue
				}
				if len(events) == 0 {
					break
				}
				for i := range events {
					w.event(&events[i])
				}
				clear(events)
				if len(w.buf) >= 64<<10 {
					break // write what we have; Read pokes Ready for the rest
				}
			}
		}
		if err := w.flush(res); err != nil {
			return nil // the reader went away or stopped reading (write deadline)
		}
	}
}

// eventWriter formats server-sent events into a buffer.
type eventWriter struct {
	app string // only this app's events; "" for all
	buf []byte
}

func (w *eventWriter) control(name string, id uint64, data string) {
	w.buf = append(w.buf, "id: "...)
	w.buf = strconv.AppendUint(w.buf, id, 10)
	w.buf = append(w.buf, "\nevent: "...)
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, "\ndata: "...)
	w.buf = append(w.buf, data...)
	w.buf = append(w.buf, "\n\n"...)
}

func (w *eventWriter) resync(head uint64, reason string) {
	data, _ := json.Marshal(struct {
		Index  uint64 `json:"index"`
		Reason string `json:"reason"`
	}{head, reason + "; re-read GET /eureka/apps"})
	w.control("resync", head, string(data))
}

func (w *eventWriter) event(ev *registry.Event) {
	if w.app != "" && !strings.EqualFold(ev.Key.App, w.app) {
		return
	}
	action := registry.ActionDeleted
	if ev.Instance != nil {
		action = ev.Instance.ActionType
	}
	w.buf = append(w.buf, "id: "...)
	w.buf = strconv.AppendUint(w.buf, ev.Seq, 10)
	w.buf = append(w.buf, "\nevent: "...)
	w.buf = append(w.buf, action...)
	w.buf = append(w.buf, "\ndata: "...)
	if action == registry.ActionDeleted || ev.Instance == nil {
		key, _ := json.Marshal(struct {
			App        string `json:"app"`
			InstanceID string `json:"instanceId"`
		}{ev.Key.App, ev.Key.ID})
		w.buf = append(w.buf, key...)
	} else {
		w.buf = wire.AppendInstanceBodyJSON(w.buf, registry.InstanceView{Instance: ev.Instance})
	}
	w.buf = append(w.buf, "\n\n"...)
}

func (w *eventWriter) flush(res *echo.Response) error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := res.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return err
	}
	res.Flush()
	return nil
}

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
//
// With regions=b,c (a client's, as on GET /apps) the stream carries the
// changes of those remote regions too, as the node's views of them
// change: each instance marked with its region (metadata muster.region;
// a DELETED's data has "region"), the whitelist applied. The event id is
// then a cursor over every source, "42;b=7;c=3;@=<run>": this registry's
// version, each region's view version and the token of this run of the
// node. Resuming from it carries on in every region; a remote change no
// longer kept, a cursor of another node or of an earlier run (another
// token) or a plain number resumes with "event: resync" (re-read GET
// /eureka/apps?regions=…). Events of one remote fetch share one version:
// only the last of them carries the id, so a reader cut off among them
// gets them again.
func (s *watches) watchStream(c echo.Context) error {
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	req := c.Request()
	q := req.URL.Query()
	app := strings.ToUpper(q.Get("app"))
	// Read raw: Go's query parser drops a pair holding ';', which an
	// unencoded cursor id (42;b=7) does.
	rawIndex, hasIndex := queryValue(req.URL.RawQuery, paramIndex)
	if !hasIndex {
		if id := req.Header.Get("Last-Event-ID"); id != "" {
			rawIndex, hasIndex = id, true
		}
	}
	var index uint64
	var remoteAt map[string]uint64
	var run string
	if hasIndex {
		var err error
		if index, remoteAt, run, err = parseStreamID(rawIndex); err != nil {
			return err
		}
	}
	rw, err := s.regionWatchOf(c)
	if err != nil {
		return err
	}
	// A cursor of another node or of an earlier run of this one: its
	// versions are not this node's, though they may look valid.
	otherRun := run != "" && run != s.streamRun
	h := s.watch
	select {
	case <-h.stopped():
		return errWatchStopped
	default:
	}
	if n := h.held.Load() + h.streams.Add(1); s.maxWatchers > 0 && n > int64(s.maxWatchers) {
		h.streams.Add(-1)
		h.overLimit.Add(1)
		return echo.NewHTTPError(http.StatusServiceUnavailable, "too many watchers on this node (muster.watch.max-watchers); try another server")
	}
	defer h.streams.Add(-1)

	var cursor *registry.Cursor
	resync := false
	switch {
	case otherRun:
		cursor, resync = s.reg.Subscribe(), true
	case hasIndex:
		cursor, resync = s.reg.SubscribeAfter(index)
	default:
		cursor = s.reg.Subscribe()
	}
	if rw != nil {
		if !hasIndex {
			rw.toHeads(rw.views)
		} else if !rw.resume(remoteAt, run == s.streamRun) || resync {
			// One source cannot resume: all start over from now.
			if !resync {
				cursor.Close()
				cursor = s.reg.Subscribe()
			}
			resync = true
			rw.toHeads(rw.views)
		}
	}
	defer func() { cursor.Close() }()
	c.Set(heldKey, true)

	res := c.Response()
	hd := res.Header()
	hd.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	res.WriteHeader(http.StatusOK)

	w := &eventWriter{app: app, rw: rw, run: s.streamRun}
	if resync {
		h.sseResync.Add(1)
		w.local = cursor.Head()
		w.resync("the changes after the requested index are not kept here (too old, from before a restart of this node, or from another node)")
	} else {
		w.local = index
		if !hasIndex {
			w.local = cursor.Head()
		}
		w.control("open", w.position())
	}
	if err := w.flush(res); err != nil {
		return nil
	}
	s.noteStream(c, app, w.local)
	var remoteChanged <-chan struct{}
	if rw != nil {
		remoteChanged = s.remote.regions.Changed()
		// What a resumed reader is owed, and any change since the stream
		// resolved its regions.
		w.remoteCatchUp(s.remote.regions, h)
		if err := w.flush(res); err != nil {
			return nil
		}
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
		case <-remoteChanged:
			remoteChanged = s.remote.regions.Changed() // before reading: no change is missed
			w.remoteCatchUp(s.remote.regions, h)
		case <-cursor.Ready():
			for {
				events, behind := cursor.Read(buf)
				if behind {
					h.sseResync.Add(1)
					w.local = cursor.Head()
					if rw != nil {
						views, _ := s.remote.regions.Resolve(rw.names)
						rw.toHeads(views)
					}
					w.resync("this reader fell behind the changes the node keeps")
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
		s.noteStream(c, app, w.local)
	}
}

// eventWriter formats server-sent events into a buffer.
type eventWriter struct {
	app   string       // only this app's events; "" for all
	rw    *regionWatch // the remote regions the stream carries; nil: none
	run   string       // the node's run token, in ids with remote regions
	local uint64       // this registry's version the reader has seen
	buf   []byte
}

// writeID writes the id line: the local version, and with remote regions
// each region's view version ("42;b=7").
func (w *eventWriter) writeID() {
	w.buf = append(w.buf, "id: "...)
	w.buf = w.appendPosition(w.buf)
	w.buf = append(w.buf, '\n')
}

func (w *eventWriter) appendPosition(b []byte) []byte {
	b = strconv.AppendUint(b, w.local, 10)
	if w.rw != nil {
		for _, rc := range w.rw.cursors {
			b = append(b, ';')
			b = append(b, rc.region...)
			b = append(b, '=')
			b = strconv.AppendUint(b, rc.version, 10)
		}
		b = append(b, ";@="...)
		b = append(b, w.run...)
	}
	return b
}

// position is the data of an open or resync event: the local version as
// "index" (a number, as before remote regions) and each region's.
func (w *eventWriter) position() string {
	b := append([]byte(`{"index":`), strconv.FormatUint(w.local, 10)...)
	if w.rw != nil {
		b = append(b, `,"regions":{`...)
		for i, rc := range w.rw.cursors {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, rc.region)
			b = append(b, ':')
			b = strconv.AppendUint(b, rc.version, 10)
		}
		b = append(b, '}')
	}
	return string(append(b, '}'))
}

func (w *eventWriter) control(name, data string) {
	w.writeID()
	w.buf = append(w.buf, "event: "...)
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, "\ndata: "...)
	w.buf = append(w.buf, data...)
	w.buf = append(w.buf, "\n\n"...)
}

func (w *eventWriter) resync(reason string) {
	what := "GET /eureka/apps"
	if w.rw != nil {
		what += "?regions=" + w.rw.names
	}
	pos := w.position()
	data, _ := json.Marshal(struct {
		Reason string `json:"reason"`
	}{reason + "; re-read " + what})
	// {"index":…,"regions":{…},"reason":…}
	w.control("resync", pos[:len(pos)-1]+","+string(data[1:]))
}

func (w *eventWriter) event(ev *registry.Event) {
	w.local = ev.Seq
	if w.app != "" && !strings.EqualFold(ev.Key.App, w.app) {
		return
	}
	action := registry.ActionDeleted
	if ev.Instance != nil {
		action = ev.Instance.ActionType
	}
	w.writeID()
	w.instance(action, ev.Key.App, ev.Key.ID, "", ev.Instance)
}

// instance writes the event and data lines of one instance's change.
func (w *eventWriter) instance(action registry.ActionType, app, id, region string, in *registry.Instance) {
	w.buf = append(w.buf, "event: "...)
	w.buf = append(w.buf, action...)
	w.buf = append(w.buf, "\ndata: "...)
	if action == registry.ActionDeleted || in == nil {
		key, _ := json.Marshal(struct {
			App        string `json:"app"`
			InstanceID string `json:"instanceId"`
			Region     string `json:"region,omitempty"`
		}{app, id, region})
		w.buf = append(w.buf, key...)
	} else {
		w.buf = wire.AppendInstanceBodyJSON(w.buf, registry.InstanceView{Instance: in})
	}
	w.buf = append(w.buf, "\n\n"...)
}

// remote writes one region's changes after the reader's cursor: the
// events of one view version together, the last of them with the id that
// moves the region's cursor past that version.
func (w *eventWriter) remote(rc regionChanges) {
	cur := &w.rw.cursors[rc.index]
	for i := 0; i < len(rc.changes); {
		version := rc.changes[i].Version
		j := i
		for j < len(rc.changes) && rc.changes[j].Version == version {
			j++
		}
		var shown []*wire.CopyChange
		for k := i; k < j; k++ {
			if ch := &rc.changes[k]; w.app == "" || strings.EqualFold(ch.Instance.App, w.app) {
				shown = append(shown, ch)
			}
		}
		cur.version = version
		for k, ch := range shown {
			if k == len(shown)-1 {
				w.writeID()
			}
			w.instance(ch.Instance.ActionType, strings.ToUpper(ch.Instance.App), ch.Instance.ID(), cur.region, ch.Instance.Instance)
		}
		i = j
	}
	cur.version = max(cur.version, rc.head)
}

// remoteCatchUp writes every region's changes since the reader's cursors,
// or a resync when some are no longer kept.
func (w *eventWriter) remoteCatchUp(rr RemoteRegions, h *watchHub) {
	views, _ := rr.Resolve(w.rw.names)
	var all []regionChanges
	for _, v := range views {
		rc := w.rw.cursorOf(v.Region)
		if rc < 0 {
			continue
		}
		cs, ok := v.ChangesAfter(w.rw.cursors[rc].version)
		if !ok {
			h.sseResync.Add(1)
			w.rw.toHeads(views)
			w.resync("remote region " + v.Region + "'s changes after this reader's cursor are not kept here")
			return
		}
		all = append(all, regionChanges{index: rc, changes: cs, head: v.Version})
	}
	for _, rc := range all {
		w.remote(rc)
	}
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

// regionWatch is what remote regions a watch stream carries and the
// reader's cursor in each (the view version it has seen).
type regionWatch struct {
	names   string // the regions, comma-separated, for Resolve
	cursors []regionCursor
	views   []*wire.CopyView // as resolved when the stream opened
}

type regionCursor struct {
	region  string
	version uint64
}

// regionChanges are one region's changes owed to a reader (remoteCatchUp).
type regionChanges struct {
	index   int // into regionWatch.cursors
	changes []wire.CopyChange
	head    uint64 // the view's version
}

func (rw *regionWatch) cursorOf(region string) int {
	for i, rc := range rw.cursors {
		if rc.region == region {
			return i
		}
	}
	return -1
}

// toHeads puts every cursor at its region's version in views (as
// Resolve(rw.names) returns them): from now on.
func (rw *regionWatch) toHeads(views []*wire.CopyView) {
	for _, v := range views {
		if i := rw.cursorOf(v.Region); i >= 0 {
			rw.cursors[i].version = v.Version
		}
	}
}

// resume sets the cursors from a resumed id's regions (remoteCatchUp then
// writes what they are owed), or reports false when a region cannot
// resume: the id is not of this node's run, lacks the region, or the
// region's changes after the cursor are not kept.
func (rw *regionWatch) resume(at map[string]uint64, thisRun bool) bool {
	if !thisRun {
		return false
	}
	for i, v := range rw.views {
		version, ok := at[v.Region]
		if !ok {
			return false
		}
		if _, ok := v.ChangesAfter(version); !ok {
			return false
		}
		rw.cursors[i].version = version
	}
	return true
}

// regionWatchOf reads a stream's regions= as GET /apps reads it: nil when
// it names none of this node's remote regions (or the reader is a peer or
// a server, which get local data only); a named region without data is
// in X-Muster-Regions-Missing, or a 403 with muster.regions.require-all.
func (s *watches) regionWatchOf(c echo.Context) (*regionWatch, error) {
	rr := s.remote.regions
	param, ok := queryValue(c.Request().URL.RawQuery, "regions")
	if !ok || strings.TrimSpace(param) == "" || rr == nil || !rr.Enabled() || isReplication(c) || isServer(c) {
		return nil, nil
	}
	views, missing := rr.Resolve(param)
	if len(missing) > 0 {
		if rr.RequireAll() {
			return nil, echo.NewHTTPError(http.StatusForbidden,
				"remote region(s) "+strings.Join(missing, ",")+" have no data on this node yet (muster.regions.require-all)")
		}
		c.Response().Header().Set(HeaderRegionsMissing, strings.Join(missing, ","))
	}
	if len(views) == 0 {
		return nil, nil
	}
	rw := &regionWatch{views: views}
	names := make([]string, len(views))
	for i, v := range views {
		names[i] = v.Region
		rw.cursors = append(rw.cursors, regionCursor{region: v.Region})
	}
	rw.names = strings.Join(names, ",")
	return rw, nil
}

// parseStreamID reads an index or Last-Event-ID: "42", or with remote
// regions "42;b=7;c=3;@=<run>" (run: the token of the node run that wrote
// it).
func parseStreamID(raw string) (local uint64, remote map[string]uint64, run string, err error) {
	bad := func() (uint64, map[string]uint64, string, error) {
		return 0, nil, "", httpkit.BadRequest("index must be an event id (a version number, or with regions= one like 42;b=7;@=…), got %q", truncate(raw))
	}
	parts := strings.Split(raw, ";")
	if local, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return bad()
	}
	for _, p := range parts[1:] {
		name, v, ok := strings.Cut(p, "=")
		if ok && name == "@" && v != "" {
			run = v
			continue
		}
		n, perr := strconv.ParseUint(v, 10, 64)
		if !ok || name == "" || perr != nil {
			return bad()
		}
		if remote == nil {
			remote = map[string]uint64{}
		}
		remote[name] = n
	}
	return local, remote, run, nil
}

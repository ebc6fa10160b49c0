package eureka

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/edge"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
)

func isReplication(c echo.Context) bool {
	v := c.Request().Header[replication.HeaderReplication]
	return len(v) > 0 && v[0] == "true"
}

// originOf is who a write comes from, as the registry sees it: a peer when
// the request carries the replication header, a client otherwise.
func originOf(c echo.Context) registry.Origin {
	if isReplication(c) {
		return registry.OriginPeer
	}
	return registry.OriginClient
}

func appAndID(c echo.Context) (app, id string, err error) {
	if app, err = httpkit.PathParam(c, "app"); err != nil {
		return "", "", err
	}
	if id, err = httpkit.PathParam(c, "id"); err != nil {
		return "", "", err
	}
	return app, id, nil
}

// queryValue finds key in a raw query string without parsing the whole
// query into a map: the heartbeat runs this on every request and must not
// allocate for the usual, unescaped values.
func queryValue(raw, key string) (string, bool) {
	for raw != "" {
		var pair string
		if i := strings.IndexByte(raw, '&'); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, ""
		}
		k, v, _ := strings.Cut(pair, "=")
		if k != key {
			continue
		}
		if strings.IndexByte(v, '%') >= 0 || strings.IndexByte(v, '+') >= 0 {
			if u, err := url.QueryUnescape(v); err == nil {
				return u, true
			}
		}
		return v, true
	}
	return "", false
}

// lastDirtyParam reads the optional lastDirtyTimestamp query parameter. A
// value that is not a number is a 400 (Eureka throws a 500, bug 13).
func lastDirtyParam(c echo.Context) (int64, error) {
	v, ok := queryValue(c.Request().URL.RawQuery, "lastDirtyTimestamp")
	if !ok || v == "" || v == "null" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, httpkit.BadRequest("lastDirtyTimestamp %s is not a number of milliseconds", registry.QuotePrefix(v))
	}
	return ms, nil
}

// statusParam reads a status query parameter; ok is false when absent.
func statusParam(c echo.Context, name string) (registry.Status, bool, error) {
	v, ok := queryValue(c.Request().URL.RawQuery, name)
	if !ok || v == "" {
		return "", false, nil
	}
	st, err := registry.ParseStatus(v)
	if err != nil {
		return "", false, httpkit.BadRequest("%s: %v", name, err)
	}
	return st, true, nil
}

// readsAllowed gates registry reads while the node syncs (403, so clients
// ask another server). A peer's syncUp fetch (marked with the replication
// header) gets 503 instead while the node is not open or still refuses
// reads after start-up (it opened without the registry: no peer had it,
// no snapshot): the peer must not take an empty or half-filled registry
// for one that has data, and copies from a node that has it or treats
// this one as starting too.
func (s *API) readsAllowed(c echo.Context) error {
	if isReplication(c) {
		if !s.cfg.Ready() || !s.cfg.ReadsAllowed() {
			return errPeerSyncing
		}
		return nil
	}
	if !s.cfg.ReadsAllowed() {
		return errReadsRefused
	}
	return nil
}

// wantsJSON is Eureka's format choice: JSON when Accept mentions json,
// XML otherwise, including when Accept is absent or */*
// (ApplicationsResource#getContainers).
func wantsJSON(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "json")
}

func formatOf(c echo.Context) payloadFormat {
	if wantsJSON(c) {
		return formatJSON
	}
	return formatXML
}

// headerEurekaAccept is the header a Eureka client sets to compact
// (eureka.clientDataAccept) to be sent the compact form of registry
// documents (EurekaAccept.HTTP_X_EUREKA_ACCEPT).
const headerEurekaAccept = "X-Eureka-Accept"

// wantsCompact is the Java server's reading of X-Eureka-Accept
// (EurekaAccept.fromString): compact in any case means the compact form,
// anything else, or nothing, the full one. The answer says it in its
// Vary, so that a cache between clients and servers never hands a full
// client a compact document (which has no metadata).
func wantsCompact(c echo.Context) bool {
	c.Response().Header().Add(echo.HeaderVary, headerEurekaAccept)
	return strings.EqualFold(c.Request().Header.Get(headerEurekaAccept), "compact")
}

func contentType(f payloadFormat) string {
	if f == formatJSON {
		return echo.MIMEApplicationJSON
	}
	return echo.MIMEApplicationXML
}

// writePayload sends an encoded payload, part after part.
func writePayload(c echo.Context, f payloadFormat, gz bool, body payload) error {
	h := c.Response().Header()
	if gz {
		h.Set(echo.HeaderContentEncoding, "gzip")
		h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	}
	h.Set(echo.HeaderContentType, contentType(f))
	h.Set(echo.HeaderContentLength, strconv.Itoa(body.size))
	w := c.Response()
	w.WriteHeader(http.StatusOK)
	for _, part := range body.parts {
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	return nil
}

// bodyBuffers are reused for request bodies: the decoders copy what they
// keep, so a buffer can serve the next request.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads the request body into a pooled buffer; call release when
// done with the bytes.
func readBody(c echo.Context) (body []byte, release func(), err error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		if buf.Cap() <= 1<<20 { // do not keep the odd huge batch buffer
			bodyBuffers.Put(buf)
		}
	}
	// Nothing is reserved from a declared Content-Length beyond a first
	// 4 KiB: the buffer grows with the bytes that arrive, so a client that
	// declares 16 MB and sends one byte holds next to nothing.
	if n := c.Request().ContentLength; n > 0 {
		buf.Grow(int(min(n, 4<<10)) + 1)
	}
	if _, err := buf.ReadFrom(c.Request().Body); err != nil {
		release()
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, nil, edge.ErrBodyTooLarge(maxBytes.Limit)
		}
		if errors.Is(err, edge.ErrBodyReadTimeout) {
			return nil, nil, edge.ErrBodyReadTimeout
		}
		return nil, nil, httpkit.BadRequest("reading request body: %v", err)
	}
	return buf.Bytes(), release, nil
}

// decodeInstanceBody reads a register body as JSON or XML, by Content-Type
// or, when that says neither, by its first character.
func decodeInstanceBody(c echo.Context) (*registry.Instance, error) {
	body, release, err := readBody(c)
	if err != nil {
		return nil, err
	}
	defer release()
	ct := strings.ToLower(c.Request().Header.Get(echo.HeaderContentType))
	switch {
	case strings.Contains(ct, "json"):
		return wire.DecodeInstanceJSON(body)
	case strings.Contains(ct, "xml"):
		return wire.DecodeInstanceXML(body)
	case ct != "" && !strings.HasPrefix(ct, "text/plain") && !strings.HasPrefix(ct, "application/octet-stream"):
		return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType,
			"Content-Type "+ct+" is not supported: send application/json or application/xml")
	}
	trimmed := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	switch {
	case strings.HasPrefix(trimmed, "{"):
		return wire.DecodeInstanceJSON(body)
	case strings.HasPrefix(trimmed, "<"):
		return wire.DecodeInstanceXML(body)
	}
	return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType, "request body is neither JSON nor XML")
}

// clientWrites are the writes of clients and, with the replication
// header, of Java peers: each one operation applied to the registry.
type clientWrites struct {
	reg Registry
	// leaving hears of a client's own cancel: the reader that sends it is
	// going away (reads.go).
	leaving func(echo.Context)
}

// register is POST /apps/{app}: 204 on success, as the Java client demands.
func (w clientWrites) register(c echo.Context) error {
	app, err := httpkit.PathParam(c, "app")
	if err != nil {
		return err
	}
	in, err := decodeInstanceBody(c)
	if err != nil {
		return err
	}
	if in.App != "" && !strings.EqualFold(in.App, app) {
		return httpkit.BadRequest("mismatched appName: the path says %s but the body says %s",
			registry.QuotePrefix(strings.ToUpper(app)), registry.QuotePrefix(in.App))
	}
	op := registry.RegisterOp(in).From(originOf(c))
	if u := httpkit.UserOf(c); u != nil {
		// Who registers counts for the per-user cap on persistent
		// instances; the guard let only the write role (or admin) here.
		op.Owner = u.Name
	}
	if _, err := w.reg.Apply(op); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// heartbeat is PUT /apps/{app}/{id}: 200, 404 ("register again"), or 409
// with our copy when a peer's data is older. The query string is optional
// (eureka-js-client sends none) and a body is ignored (Jersey 3 sends {}).
func (w clientWrites) heartbeat(c echo.Context) error {
	app, id, err := appAndID(c)
	if err != nil {
		return refuseHeartbeat(err)
	}
	op := registry.RenewOp(app, id).From(originOf(c))
	if op.LastDirtyTimestamp, err = lastDirtyParam(c); err != nil {
		return refuseHeartbeat(err)
	}
	if st, ok, err := statusParam(c, "overriddenstatus"); err != nil {
		return refuseHeartbeat(err)
	} else if ok {
		op.OverriddenStatus = st
	}
	in, err := w.reg.Apply(op)
	if errors.Is(err, registry.ErrStaleDirtyTimestamp) {
		return writeInstance(c, http.StatusConflict, registry.InstanceView{Instance: in})
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// refuseHeartbeat turns a heartbeat Muster cannot read (a bad escape in
// the path, a lastDirtyTimestamp or overriddenstatus it cannot parse) into
// the 404 that tells a client to register again, keeping the reason. A 400
// would be worse than useless here: Spring's WebClient transport counts any
// status it does not expect on a heartbeat as a success, so the client
// would go on sending it while its lease ran out; the Java server answers
// 500 (a NumberFormatException), which clients retry on another server and
// never recover from. A register carries everything again, and a heartbeat
// that follows it without the bad parameter renews the lease
// (docs/eureka-errors.md).
func refuseHeartbeat(err error) error {
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusBadRequest {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprint(he.Message)+"; register again")
	}
	return err
}

func (w clientWrites) cancel(c echo.Context) error {
	app, id, err := appAndID(c)
	if err != nil {
		return err
	}
	if _, err := w.reg.Apply(registry.CancelOp(app, id).From(originOf(c))); err != nil {
		return err
	}
	if w.leaving != nil {
		w.leaving(c)
	}
	return c.NoContent(http.StatusOK)
}

// statusRequest is what both status endpoints read: the instance, the
// status in the value parameter (or, when absent, fallback; "" means the
// parameter is required), and lastDirtyTimestamp.
type statusRequest struct {
	app, id string
	status  registry.Status
	dirty   int64
}

func readStatusRequest(c echo.Context, fallback registry.Status) (statusRequest, error) {
	var sr statusRequest
	var err error
	if sr.app, sr.id, err = appAndID(c); err != nil {
		return sr, err
	}
	st, ok, err := statusParam(c, "value")
	switch {
	case err != nil:
		return sr, err
	case ok:
		sr.status = st
	case fallback != "":
		sr.status = fallback
	default:
		return sr, httpkit.BadRequest("missing query parameter value (UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN)")
	}
	sr.dirty, err = lastDirtyParam(c)
	return sr, err
}

// updateStatus is PUT /apps/{app}/{id}/status?value=X.
func (w clientWrites) updateStatus(c echo.Context) error {
	sr, err := readStatusRequest(c, "")
	if err != nil {
		return err
	}
	if _, err := w.reg.Apply(registry.StatusOp(sr.app, sr.id, sr.status).Dirty(sr.dirty).From(originOf(c))); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// deleteStatusOverride is DELETE /apps/{app}/{id}/status[?value=Y]; the
// status becomes Y, UNKNOWN by default, as in Eureka.
func (w clientWrites) deleteStatusOverride(c echo.Context) error {
	sr, err := readStatusRequest(c, registry.StatusUnknown)
	if err != nil {
		return err
	}
	if _, err := w.reg.Apply(registry.DeleteOverrideOp(sr.app, sr.id, sr.status).Dirty(sr.dirty).From(originOf(c))); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// updateMetadata is PUT /apps/{app}/{id}/metadata?key=value&…
func (w clientWrites) updateMetadata(c echo.Context) error {
	app, id, err := appAndID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return httpkit.BadRequest("bad query string: %v", err)
	}
	if len(q) == 0 {
		return httpkit.BadRequest("no metadata given: pass entries as query parameters, e.g. ?version=2")
	}
	updates := make(map[string]string, len(q))
	for k, vs := range q {
		if k == "" {
			return httpkit.BadRequest("empty metadata key")
		}
		updates[k] = vs[0]
	}
	if _, err := w.reg.Apply(registry.MetadataOp(app, id, updates).From(originOf(c))); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// getApps is GET /apps: the whole registry, encoded once per version.
func (s *API) getApps(c echo.Context) error {
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	rs, err := s.holds.holdScope(c)
	if err != nil {
		return err
	}
	snap := s.reg.Snapshot()
	setIndex(c, snap.Version+rs.versions)
	// A payload served for snap holds every change up to snap.Version at
	// least (payloadCache.get), so that is the version the reader read.
	s.noteAll(c, snap.Version)
	if len(rs.views) > 0 {
		return s.remote.getAppsMerged(c, snap, rs)
	}
	f, gz, compact := formatOf(c), httpkit.AcceptsGzip(c), wantsCompact(c)
	body := s.payloads.get(payloadKey{kind: payloadFull, format: f, gzip: gz, compact: compact}, snap, func() payload {
		defer s.pieces.sweep(snap)
		return s.pieces.document(docKind{compact: compact}, snap.Apps, "1", snap.Hashcode, f, gz)
	})
	return writePayload(c, f, gz, body)
}

// getDelta is GET /apps/delta: the changes of the last few minutes and the
// hashcode of the full registry, both from one snapshot.
func (s *API) getDelta(c echo.Context) error {
	if s.cfg.DisableDelta {
		return echo.NewHTTPError(http.StatusForbidden, "delta is disabled on this server (eureka.server.disable-delta)")
	}
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	rs, err := s.holds.holdScope(c)
	if err != nil {
		return err
	}
	snap := s.reg.Snapshot()
	setIndex(c, snap.Version+rs.versions)
	if len(rs.views) > 0 {
		s.noteAll(c, snap.Version)
		return s.remote.getDeltaMerged(c, snap, rs)
	}
	f, gz, compact := formatOf(c), httpkit.AcceptsGzip(c), wantsCompact(c)
	body := s.payloads.get(payloadKey{kind: payloadDelta, format: f, gzip: gz, compact: compact}, snap, func() payload {
		p := s.pieces.document(docKind{delta: true, compact: compact}, snap.Delta, strconv.FormatUint(snap.DeltaVersion, 10), snap.Hashcode, f, gz)
		p.version = snap.Version
		return p
	})
	// A delta may be served one build behind its snapshot (payloadCache):
	// the reader read the version the body was built at.
	s.noteAll(c, body.version)
	return writePayload(c, f, gz, body)
}

func (s *API) getApp(c echo.Context) error {
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	name, err := httpkit.PathParam(c, "app")
	if err != nil {
		return err
	}
	if err := s.holds.holdApp(c, name); err != nil {
		return err
	}
	// The index and the body come from one snapshot: the index is the
	// version of exactly the app the body shows (servedAppIndex), never the
	// watch hub's, which follows the change stream a little behind and
	// would hand a client an index older than what it read.
	snap := s.reg.Snapshot()
	app, ok := snap.App(name)
	if !ok {
		// Index and body from one read of the remote views.
		remote, index, ok := s.remote.remoteApp(c, name)
		setIndex(c, index)
		if ok {
			return writePayload(c, formatOf(c), false, appDocumentOf(remote, formatOf(c), wantsCompact(c)))
		}
		return echo.NewHTTPError(http.StatusNotFound, "no application "+registry.QuotePrefix(strings.ToUpper(name)))
	}
	setIndex(c, app.Version)
	s.noteApp(c, app.Name, snap.Version)
	f, compact := formatOf(c), wantsCompact(c)
	body := s.payloads.get(payloadKey{kind: payloadApp, name: app.Name, format: f, compact: compact}, snap, func() payload {
		return s.pieces.appDocument(app, f, compact)
	})
	return writePayload(c, f, false, body)
}

func (s *API) getVIP(c echo.Context) error  { return s.vipLookup(c, payloadVIP) }
func (s *API) getSVIP(c echo.Context) error { return s.vipLookup(c, payloadSVIP) }

// vipLookup is GET /vips/{vip} and /svips/{svip}: 200 with the matching
// instances, an empty list when nothing matches.
func (s *API) vipLookup(c echo.Context, kind payloadKind) error {
	if err := s.readsAllowed(c); err != nil {
		return err
	}
	name, err := httpkit.PathParam(c, "vip")
	if err != nil {
		return err
	}
	rs, err := s.holds.holdScope(c)
	if err != nil {
		return err
	}
	snap := s.reg.Snapshot()
	setIndex(c, snap.Version+rs.versions)
	if len(rs.views) > 0 {
		merged, _ := rs.mergedApps(snap)
		apps := vipOf(merged, name, kind == payloadSVIP)
		s.noteApps(c, apps, snap.Version)
		f, compact := formatOf(c), wantsCompact(c)
		return writePayload(c, f, false, encodeDocument(apps, "1", registry.HashcodeOf(apps), f, false, compact))
	}
	apps := snap.VIP(name, kind == payloadSVIP)
	s.noteApps(c, apps, snap.Version)
	f, compact := formatOf(c), wantsCompact(c)
	build := func() payload { return s.pieces.vipDocument(snap, apps, f, compact) }
	if len(apps) == 0 {
		// Not cached: otherwise random names would fill the cache.
		return writePayload(c, f, false, build())
	}
	return writePayload(c, f, false, s.payloads.get(payloadKey{kind: kind, name: name, format: f, compact: compact}, snap, build))
}

// getAppInstance is GET /apps/{app}/{id}; it is not gated, as in Eureka.
func (s *API) getAppInstance(c echo.Context) error {
	app, id, err := appAndID(c)
	if err != nil {
		return err
	}
	iv, ok := s.reg.Instance(app, id)
	if !ok {
		iv, ok = s.remote.remoteInstance(c, app, id)
	}
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no instance "+registry.QuotePrefix(id)+" in "+registry.QuotePrefix(strings.ToUpper(app)))
	}
	return writeInstance(c, http.StatusOK, iv)
}

func (s *API) getInstanceByID(c echo.Context) error {
	id, err := httpkit.PathParam(c, "id")
	if err != nil {
		return err
	}
	iv, ok := s.reg.InstanceByID(id)
	if !ok {
		iv, ok = s.remote.remoteInstance(c, "", id)
	}
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no instance "+registry.QuotePrefix(id))
	}
	return writeInstance(c, http.StatusOK, iv)
}

func writeInstance(c echo.Context, code int, iv registry.InstanceView) error {
	if wantsJSON(c) {
		return c.Blob(code, echo.MIMEApplicationJSON, wire.AppendInstanceJSON(nil, iv))
	}
	return c.Blob(code, echo.MIMEApplicationXML, wire.AppendInstanceXML(nil, iv))
}

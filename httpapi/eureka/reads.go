package eureka

import (
	"net"
	"net/http"
	"net/textproto"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
)

// The Eureka identity headers (EurekaIdentityHeaderFilter), canonical, so
// that reading them on every read is a map index, not a canonicalisation.
var (
	headerIdentityName    = textproto.CanonicalMIMEHeaderKey("DiscoveryIdentity-Name")
	headerIdentityVersion = textproto.CanonicalMIMEHeaderKey("DiscoveryIdentity-Version")
	headerIdentityID      = textproto.CanonicalMIMEHeaderKey("DiscoveryIdentity-Id")
)

func firstHeader(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// readerOf is who reads: the identity headers if sent, else the
// authenticated user, else the User-Agent; and the remote IP. Muster has
// no trusted-proxy setting, so X-Forwarded-For is not read: a client
// could name any address in it.
func readerOf(c echo.Context) drain.Reader {
	req := c.Request()
	h := req.Header
	r := drain.Reader{IdentityName: firstHeader(h, headerIdentityName)}
	if r.IdentityName != "" {
		r.IdentityVersion, r.IdentityID = firstHeader(h, headerIdentityVersion), firstHeader(h, headerIdentityID)
	} else if u := httpkit.UserOf(c); u != nil {
		r.User = u.Name
	} else {
		r.Agent = firstHeader(h, "User-Agent")
	}
	r.Address = req.RemoteAddr
	if host, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		r.Address = host
	}
	return r
}

// forgetReader drops the reader that sends a client's cancel from the
// drain's reader table: an app that stops cancels its registration from
// the Eureka client it reads with (same identity, same address), and will
// not read again. Kept, it would hold up every drain for the reader window
// after it left: in a rolling restart, each drain but the first would wait
// out its whole wait for the pod stopped before it.
func (s *API) forgetReader(c echo.Context) {
	if s.readers == nil || isReplication(c) {
		return
	}
	s.readers.Forget(readerOf(c))
}

// noteAll records a client's read of every app (a full fetch, a delta) at
// version; a peer's reads (syncUp) are not a reader's.
func (s *API) noteAll(c echo.Context, version uint64) {
	if s.readers == nil || isReplication(c) {
		return
	}
	s.readers.NoteAll(readerOf(c), version, s.now())
}

// noteApp records a client's read of app at version.
func (s *API) noteApp(c echo.Context, app string, version uint64) {
	if s.readers == nil || isReplication(c) {
		return
	}
	s.readers.NoteApp(readerOf(c), app, version, s.now())
}

// noteApps records a client's read of the apps of views at version.
func (s *API) noteApps(c echo.Context, views []registry.AppView, version uint64) {
	if s.readers == nil || isReplication(c) || len(views) == 0 {
		return
	}
	r, now := readerOf(c), s.now()
	for _, v := range views {
		s.readers.NoteApp(r, v.Name, version, now)
	}
}

// noteStream records what a watch stream delivered: every change up to
// version, of app or ("") of every app. Called after each write the reader
// took, keep-alives included, so an idle open stream stays a reader.
func (s *API) noteStream(c echo.Context, app string, version uint64) {
	if s.readers == nil || isReplication(c) {
		return
	}
	if app == "" {
		s.readers.NoteAll(readerOf(c), version, s.now())
		return
	}
	// The stream's app is the client's word: only one that exists is noted,
	// so made-up names cannot grow the reader's record.
	if view, ok := s.reg.Snapshot().App(app); ok {
		s.readers.NoteApp(readerOf(c), view.Name, version, s.now())
	}
}

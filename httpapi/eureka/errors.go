package eureka

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
)

// The server's error handler writes every error; these are the API's own,
// and what it tells the handler about the routes it owns.

var errReadsRefused = echo.NewHTTPError(http.StatusForbidden,
	"registry not open for traffic yet (syncing with peers); try another server")

var errPeerSyncing = echo.NewHTTPError(http.StatusServiceUnavailable,
	"this node is still copying the registry itself; copy from another peer")

// IsPeerSyncing reports whether err is the 503 a peer's syncUp fetch gets
// while this node is starting itself: expected traffic while nodes start
// together (the peer retries), not a failure to log as one.
func IsPeerSyncing(err error) bool { return errors.Is(err, errPeerSyncing) }

// ErrorHeader carries an error's reason on the Eureka client routes, whose
// error answers have an empty body (docs/eureka-errors.md).
const ErrorHeader = "X-Muster-Error"

// IsClientRoute reports whether an echo route pattern is one of the
// Eureka REST routes clients call (apps, instances, vips, svips, status),
// under any of the bases. Peer replication, the watch stream, the console
// and the admin routes keep their plain-text error bodies.
func IsClientRoute(route string) bool {
	for _, base := range []string{"/eureka/v2/", "/eureka/", "/v2/"} {
		if rest, ok := strings.CutPrefix(route, base); ok {
			return rest == "apps" || rest == "status" ||
				strings.HasPrefix(rest, "apps/") || strings.HasPrefix(rest, "instances/") ||
				strings.HasPrefix(rest, "vips/") || strings.HasPrefix(rest, "svips/")
		}
	}
	return false
}

// HeaderSafe makes a message fit for one header line: control characters
// (a client value quoted in it could hold any) become spaces.
func HeaderSafe(msg string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}

// StatusFor maps an error to an HTTP status: echo's and the body limit's
// own, the codecs' (400), and the registry's from its table
// (registry.StatusCode, which replication's receiver uses too).
func StatusFor(err error) int {
	var he *echo.HTTPError
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he.Code
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, wire.ErrMalformed),
		errors.Is(err, replication.ErrMalformedBatch),
		errors.Is(err, replication.ErrBadRequest):
		return http.StatusBadRequest
	}
	if code, ok := registry.StatusCode(err); ok {
		return code
	}
	return http.StatusInternalServerError
}

// WriteError answers a request with err as a short plain-text body and
// returns the status: Eureka answers client mistakes with 400 and a
// one-line reason, and Muster does the same for everything Eureka turns
// into a 500 (bug 13). The server's error handler writes every error
// with it, the console's and the operator routes' too.
func WriteError(c echo.Context, err error) int {
	code := StatusFor(err)
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg = fmt.Sprint(he.Message)
	}
	if len(msg) > maxErrorBody {
		// A backstop: messages quote client values through
		// registry.QuotePrefix, but none may echo a whole body.
		msg = strings.ToValidUTF8(msg[:maxErrorBody], "") + "…"
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return code
	}
	if IsClientRoute(c.Path()) {
		// The Java client reads any non-HTML body of an answer as an
		// InstanceInfo, whatever the status: a text body on a heartbeat
		// 404 makes it count a transport error and never register again
		// (issue 22). So every error on the routes Eureka clients decode
		// is what the Java server sends, an empty answer, and the reason
		// travels in a header. Its Content-Type is the one the client
		// asked for (JSON when Accept mentions json, XML otherwise):
		// Spring's WebClient fails to read even an empty body of a type it
		// has no decoder for, and takes a heartbeat 404 in application/xml
		// for a transport error, so it never registers again.
		c.Response().Header().Set(ErrorHeader, HeaderSafe(msg))
		ct := echo.MIMEApplicationXML
		if strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "json") {
			ct = echo.MIMEApplicationJSON
		}
		c.Response().Header().Set(echo.HeaderContentType, ct)
		c.Response().WriteHeader(code)
		return code
	}
	_ = c.String(code, msg+"\n")
	return code
}

// maxErrorBody caps the text of an error answer.
const maxErrorBody = 1024

package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/eureka"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
)

// statusFor maps an error to an HTTP status: echo's and the body limit's
// own, the codecs' (400), and the registry's from its table
// (registry.StatusCode, which replication's receiver uses too).
func statusFor(err error) int {
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

// handleError writes every error as a short plain-text body. Eureka answers
// client mistakes with 400 and a one-line reason; Muster does the same for
// everything Eureka turns into a 500 (bug 13).
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := statusFor(err)
	if code == http.StatusRequestEntityTooLarge {
		s.limits.CountBodyTooLarge()
	}
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg = fmt.Sprint(he.Message)
	}
	switch {
	case eureka.IsPeerSyncing(err):
		// Nodes started together answer each other's syncUp so for a few
		// seconds: the peer says so at info and retries.
		s.log.Debug().Int("status", code).Str("method", c.Request().Method).Str("path", c.Request().URL.Path).
			Msg("peer's syncUp answered 503: this node is not ready yet (still starting itself); the peer retries")
	case code >= 500:
		s.log.Error().Err(err).Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Msg("request failed")
	default:
		s.log.Debug().Err(err).Int("status", code).Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Msg("request refused")
	}
	if len(msg) > maxErrorBody {
		// A backstop: messages quote client values through
		// registry.QuotePrefix, but none may echo a whole body.
		msg = strings.ToValidUTF8(msg[:maxErrorBody], "") + "…"
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	if eureka.IsClientRoute(c.Path()) {
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
		c.Response().Header().Set(eureka.ErrorHeader, eureka.HeaderSafe(msg))
		ct := echo.MIMEApplicationXML
		if strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "json") {
			ct = echo.MIMEApplicationJSON
		}
		c.Response().Header().Set(echo.HeaderContentType, ct)
		c.Response().WriteHeader(code)
		return
	}
	_ = c.String(code, msg+"\n")
}

// maxErrorBody caps the text of an error answer.
const maxErrorBody = 1024

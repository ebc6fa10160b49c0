package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/httpapi/eureka"
)

// handleError answers every error through eureka.WriteError (a short
// plain-text body; on the Eureka client routes an empty one with the
// reason in a header) and logs it.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := eureka.WriteError(c, err)
	if code == http.StatusRequestEntityTooLarge {
		s.limits.CountBodyTooLarge()
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
}

package eureka

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
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

package httpkit

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/registry"
)

// contextUser is the echo context key under which the server's
// authentication leaves the authenticated user.
const contextUser = "muster.user"

// SetUser records the request's authenticated user.
func SetUser(c echo.Context, u *auth.User) { c.Set(contextUser, u) }

// UserOf is the request's authenticated user, nil when none.
func UserOf(c echo.Context) *auth.User {
	u, _ := c.Get(contextUser).(*auth.User)
	return u
}

// BadRequest is a 400 with a one-line reason.
func BadRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// AcceptsGzip reports whether the client asked for gzip by name:
// Accept-Encoding lists gzip (or x-gzip) with a weight above zero. An
// answer nobody asked to be compressed is never compressed: Spring's
// WebClient transport does not decompress what it did not ask for, and
// "gzip;q=0" is a client saying it cannot read it. A bare "*" is not taken
// as asking either (the Java server, too, looks for the word gzip).
func AcceptsGzip(c echo.Context) bool {
	return acceptsGzip(c.Request().Header.Values(echo.HeaderAcceptEncoding))
}

func acceptsGzip(headers []string) bool {
	for _, h := range headers {
		for rest := h; rest != ""; {
			var item string
			item, rest, _ = strings.Cut(rest, ",")
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" {
				continue
			}
			if weight(params) > 0 {
				return true
			}
		}
	}
	return false
}

// weight is the q parameter of one Accept-Encoding item (1 when absent or
// unreadable, as RFC 9110 has it).
func weight(params string) float64 {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 1
		}
		return q
	}
	return 1
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// WriteMaybeGzip sends body, gzipped when the client accepts it and it is
// worth it (1 KiB and more).
func WriteMaybeGzip(c echo.Context, code int, contentType string, body []byte) error {
	if len(body) < 1024 || !AcceptsGzip(c) {
		return c.Blob(code, contentType, body)
	}
	var b bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&b)
	_, _ = zw.Write(body)
	_ = zw.Close()
	gzipWriters.Put(zw)
	c.Response().Header().Set(echo.HeaderContentEncoding, "gzip")
	return c.Blob(code, contentType, b.Bytes())
}

// FormatUptime writes an uptime as Eureka's dashboard does: "[N day(s) ]HH:mm".
func FormatUptime(d time.Duration) string {
	days := int(d / (24 * time.Hour))
	d -= time.Duration(days) * 24 * time.Hour
	hm := fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
	switch days {
	case 0:
		return hm
	case 1:
		return "1 day " + hm
	}
	return fmt.Sprintf("%d days %s", days, hm)
}

// PathParam returns a path parameter, unescaped. Echo matches on the raw
// path when the request has one (an escape that decoding would lose, such
// as %2F) and on the decoded path otherwise, so only the first needs
// unescaping; unescaping the second again would turn an id holding "%41"
// into "A".
func PathParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" || strings.IndexByte(v, '%') < 0 {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", BadRequest("bad escape in %s %s", name, registry.QuotePrefix(v))
	}
	return u, nil
}

// TrimSlash drops a request path's trailing slash: clients ask for
// /eureka/apps/ (Spring, fargo) as often as /eureka/apps.
func TrimSlash(r *http.Request) {
	if p := r.URL.Path; len(p) > 1 && p[len(p)-1] == '/' {
		r.URL.Path = strings.TrimRight(p, "/")
		if r.URL.Path == "" {
			r.URL.Path = "/"
		}
		if r.URL.RawPath != "" {
			r.URL.RawPath = strings.TrimRight(r.URL.RawPath, "/")
		}
	}
}

package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/registry"
)

// ActionsPolicy says who may use the console's actions on a node
// without authentication (muster.dashboard.actions-without-auth). With
// authentication on, only admin users may, whatever this says.
type ActionsPolicy string

// The policies.
const (
	// ActionsLoopback allows actions from loopback clients only: an operator
	// on the node itself (or through an SSH tunnel). The default.
	ActionsLoopback ActionsPolicy = "loopback"
	// ActionsAnyone allows them to any client, as the open Eureka API does.
	ActionsAnyone ActionsPolicy = "any"
	// ActionsNobody hides them.
	ActionsNobody ActionsPolicy = "none"
)

// ActionsPolicies lists the policies, as a user writes them.
var ActionsPolicies = []ActionsPolicy{ActionsLoopback, ActionsAnyone, ActionsNobody}

// Valid reports whether p is one of the policies ("" means loopback).
func (p ActionsPolicy) Valid() bool {
	switch p {
	case "", ActionsLoopback, ActionsAnyone, ActionsNobody:
		return true
	}
	return false
}

// consoleAction is what a console button does.
type consoleAction string

const (
	actionOutOfService   consoleAction = "out-of-service"
	actionUp             consoleAction = "up"
	actionRemoveOverride consoleAction = "remove-override"
	actionCancel         consoleAction = "cancel"
	actionDrain          consoleAction = "drain"
	actionUndrain        consoleAction = "undrain"
)

func (a consoleAction) describe() string {
	switch a {
	case actionOutOfService:
		return "take it OUT_OF_SERVICE (status override; clients stop sending it traffic)"
	case actionUp:
		return "put it back UP (status override UP)"
	case actionRemoveOverride:
		return "remove its status override (its status becomes UNKNOWN until its next registration, as in Eureka)"
	case actionCancel:
		return "cancel it (remove it from the registry; it comes back when it registers again)"
	case actionDrain:
		return "drain it (served OUT_OF_SERVICE on every node unless an override says otherwise; the receipt then shows which of its readers have read the change)"
	case actionUndrain:
		return "undrain it (served with its own status again)"
	}
	return ""
}

func parseConsoleAction(s string) (consoleAction, error) {
	switch a := consoleAction(s); a {
	case actionOutOfService, actionUp, actionRemoveOverride, actionCancel, actionDrain, actionUndrain:
		return a, nil
	}
	return "", httpkit.BadRequest("action: want out-of-service, up, remove-override, cancel, drain or undrain")
}

// applyConsoleAction applies an action as the matching Eureka request from
// a client would be: the same operation, through the same Apply, so it is
// replicated exactly as the API's.
func (s *Console) applyConsoleAction(ctx context.Context, a consoleAction, app, id string) error {
	var op registry.Op
	switch a {
	case actionDrain, actionUndrain:
		if s.cfg.Drains == nil {
			return httpkit.BadRequest("drains are not served by this node")
		}
		err := s.cfg.Drains.Drain(ctx, app, id)
		if a == actionUndrain {
			err = s.cfg.Drains.Undrain(ctx, app, id)
		}
		if err != nil {
			return echo.NewHTTPError(http.StatusNotFound, err.Error())
		}
		return nil
	case actionOutOfService:
		op = registry.StatusOp(app, id, registry.StatusOutOfService)
	case actionUp:
		op = registry.StatusOp(app, id, registry.StatusUp)
	case actionRemoveOverride:
		op = registry.DeleteOverrideOp(app, id, registry.StatusUnknown)
	case actionCancel:
		op = registry.CancelOp(app, id)
	default:
		return httpkit.BadRequest("unknown action")
	}
	_, err := s.reg.Apply(op)
	return err
}

// actionsAllowed tells whether the caller may use the console's actions,
// and if not, why.
func (s *Console) actionsAllowed(c echo.Context) (bool, string) {
	if s.cfg.AuthEnabled {
		u := httpkit.UserOf(c)
		if u != nil && u.IsAdmin() {
			return true, ""
		}
		return false, "actions are for admin users"
	}
	switch s.cfg.Actions {
	case ActionsAnyone:
		return true, ""
	case ActionsNobody:
		return false, "actions are disabled (muster.dashboard.actions-without-auth=none)"
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true, ""
	}
	return false, "without authentication, actions are allowed from loopback clients only (muster.dashboard.actions-without-auth)"
}

// CSRF protection: a console session cookie (random, HttpOnly,
// SameSite=Strict) and a token in every action form that is an HMAC of the
// cookie and the authenticated user's name under a key that never leaves
// the process. Another site can neither read the cookie nor compute the
// token; a token taken from one user's page is useless with another
// user's credentials. Origin and Sec-Fetch-Site, when the browser sends
// them, must also name this site.
const consoleCookie = "muster_console"

type csrfKeys struct {
	once sync.Once
	key  []byte
}

func (k *csrfKeys) get() []byte {
	k.once.Do(func() {
		k.key = make([]byte, 32)
		if _, err := rand.Read(k.key); err != nil {
			panic(fmt.Sprintf("httpapi: no randomness for the console's CSRF key: %v", err))
		}
	})
	return k.key
}

// consoleSession returns the session cookie's value, setting a new cookie
// when the request has none.
func (s *Console) consoleSession(c echo.Context) string {
	if ck, err := c.Cookie(consoleCookie); err == nil && len(ck.Value) == 64 {
		if _, err := hex.DecodeString(ck.Value); err == nil {
			return ck.Value
		}
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	c.SetCookie(&http.Cookie{Name: consoleCookie, Value: v, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Request().TLS != nil})
	return v
}

func (s *Console) csrfToken(session string, u *auth.User) string {
	m := hmac.New(sha256.New, s.csrf.get())
	m.Write([]byte(session))
	m.Write([]byte{0})
	if u != nil {
		m.Write([]byte(u.Name))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF refuses (403) a POST that does not come from the console's
// own form.
func (s *Console) checkCSRF(c echo.Context) error {
	req := c.Request()
	if site := req.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return echo.NewHTTPError(http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: "+site+")")
	}
	if origin := req.Header.Get(echo.HeaderOrigin); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, req.Host) {
			return echo.NewHTTPError(http.StatusForbidden, "cross-origin request refused")
		}
	}
	ck, err := c.Cookie(consoleCookie)
	if err != nil || ck.Value == "" {
		return echo.NewHTTPError(http.StatusForbidden, "missing console session cookie: open the page again and retry")
	}
	want := s.csrfToken(ck.Value, httpkit.UserOf(c))
	got := c.FormValue("csrf")
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return echo.NewHTTPError(http.StatusForbidden, "missing or wrong CSRF token: open the page again and retry")
	}
	return nil
}

// flashSignature signs the "done" message of a redirect after an action.
func (s *Console) flashSignature(action, app, id string) string {
	m := hmac.New(sha256.New, s.csrf.get())
	m.Write([]byte("flash\x00" + action + "\x00" + app + "\x00" + id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

func (s *Console) flashSigned(action, app, id, sig string) bool {
	want := s.flashSignature(action, app, id)
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// limitBody caps a request body when the server gives no middleware of
// its own: reading beyond limit fails, and the action answers 413.
func limitBody(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, limit)
			return next(c)
		}
	}
}

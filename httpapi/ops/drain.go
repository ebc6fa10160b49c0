package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/registry"
)

// DrainEndpoints serve /admin/drain (docs/traffic.md): drain an instance,
// read its receipt, list the drains, undrain. They need the admin role
// when authentication is on, as every /admin route does.
type DrainEndpoints struct {
	Drainer *drain.Drainer
}

// DrainList is GET /admin/drain's body.
type DrainList struct {
	Drains []drain.Receipt `json:"drains"`
}

// ParseWait reads ?wait=: a Go duration (30s, 1m) or plain seconds (30),
// from 0 to max.
func ParseWait(raw string, max time.Duration) (time.Duration, error) {
	if raw == "" {
		return 0, nil
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(raw, 64); err == nil {
		if secs < 0 || secs > max.Seconds() {
			return 0, fmt.Errorf("wait %q must be from 0 to %s", raw, max)
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(raw); err != nil {
		return 0, fmt.Errorf("wait %q is neither a duration (30s, 1m) nor seconds (30)", raw)
	}
	if d < 0 || d > max {
		return 0, fmt.Errorf("wait %q must be from 0 to %s (muster.drain.max-wait-ms)", raw, max)
	}
	return d, nil
}

func drainTarget(c echo.Context) (app, id string, err error) {
	app, id = c.Param("app"), c.Param("id")
	if app == "" || id == "" || len(app) > 256 || len(id) > 256 || strings.ContainsAny(app+id, "\x00\r\n") {
		return "", "", echo.NewHTTPError(http.StatusBadRequest, "want /admin/drain/{app}/{instanceId}")
	}
	return app, id, nil
}

// receiptCode is 200 for a complete receipt, 202 while readers are
// pending, 409 for a drain that ended (cancelled, undrained) during its wait.
func receiptCode(rc drain.Receipt) int {
	switch {
	case rc.Ended != "":
		return http.StatusConflict // the drain ended under the wait
	case rc.Complete:
		return http.StatusOK
	}
	return http.StatusAccepted
}

func notFound(app, id string, what string) error {
	return echo.NewHTTPError(http.StatusNotFound, "no "+what+" "+registry.QuotePrefix(id)+" in "+registry.QuotePrefix(strings.ToUpper(app)))
}

// Drain is POST /admin/drain/{app}/{instanceId}[?wait=].
func (e DrainEndpoints) Drain(c echo.Context) error {
	app, id, err := drainTarget(c)
	if err != nil {
		return err
	}
	wait, err := ParseWait(c.QueryParam("wait"), e.Drainer.MaxWait())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	rc, err := e.Drainer.Drain(c.Request().Context(), app, id, wait)
	if errors.Is(err, registry.ErrInstanceNotFound) {
		return notFound(app, id, "instance")
	}
	if err != nil {
		return err
	}
	return c.JSON(receiptCode(rc), rc)
}

// Receipt is GET /admin/drain/{app}/{instanceId}.
func (e DrainEndpoints) Receipt(c echo.Context) error {
	app, id, err := drainTarget(c)
	if err != nil {
		return err
	}
	rc, err := e.Drainer.Receipt(c.Request().Context(), app, id)
	if errors.Is(err, drain.ErrNotDrained) {
		return notFound(app, id, "drained instance")
	}
	if err != nil {
		return err
	}
	return c.JSON(receiptCode(rc), rc)
}

// List is GET /admin/drain.
func (e DrainEndpoints) List(c echo.Context) error {
	return c.JSON(http.StatusOK, DrainList{Drains: e.Drainer.List(c.Request().Context())})
}

// Undrain is DELETE /admin/drain/{app}/{instanceId}.
func (e DrainEndpoints) Undrain(c echo.Context) error {
	app, id, err := drainTarget(c)
	if err != nil {
		return err
	}
	rc, err := e.Drainer.Undrain(c.Request().Context(), app, id)
	if errors.Is(err, drain.ErrNotDrained) {
		return notFound(app, id, "drained instance")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rc)
}

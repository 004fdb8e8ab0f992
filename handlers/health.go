package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Healthz answers 200 while the process is up. It checks nothing else, so an
// orchestrator restarts the process only when the process itself is stuck.
func Healthz() echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.String(http.StatusOK, "ok")
	}
}

// Readier reports whether the service can do its work.
type Readier interface {
	Ready(ctx context.Context) error
}

// Readyz answers 200 when the database is reachable and its migrations are
// current, 503 with the reason otherwise.
func Readyz(r Readier) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
		defer cancel()
		if err := r.Ready(ctx); err != nil {
			return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error())
		}
		return c.String(http.StatusOK, "ready")
	}
}

package web

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/handlers"
)

// incidentRoutes mounts the incident pages (issue 27): the error groups of
// several tasks that share an error class and a template, shown and
// replayed together.
func incidentRoutes(e *echo.Echo, cfg Config, reads handlers.MaskedReads, fresh echo.MiddlewareFunc) {
}

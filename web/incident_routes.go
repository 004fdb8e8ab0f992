package web

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/reads"
)

// incidentRoutes mounts the incident pages (issue 27): the error groups of
// several tasks that share an error class and a template, shown and
// replayed together. Both read through the masking store, from the
// replica when there is one (fresh says how fresh): an incident is read
// like the groups it is made of.
func incidentRoutes(e *echo.Echo, cfg Config, reads *reads.Masked, fresh echo.MiddlewareFunc) {
	e.GET("/incidents/:id", handlers.IncidentPage(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/api/v1/incidents", handlers.APIIncidents(reads))
}

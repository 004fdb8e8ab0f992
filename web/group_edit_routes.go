package web

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/handlers"
)

// groupEditRoutes mounts an operator's changes to error groups (issue 27):
// merging groups that are one failure, and splitting a group's template
// where it joined two. They are POSTs, so the access rules require the
// operator role and a CSRF token (or a bearer token).
func groupEditRoutes(e *echo.Echo, cfg Config, store handlers.MaskedReads) {
}

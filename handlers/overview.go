package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/views"
)

// Overview renders the console's front page.
func Overview(_ any, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		meta := views.PageMeta{Title: "Overview", Active: "overview", Version: version}
		return Render(c, http.StatusOK, views.Layout(meta, views.Overview()))
	}
}

package web

import (
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/handlers"
)

// routes mounts every route of the console. It is the one place to read to
// know what the server answers.
func routes(e *echo.Echo, cfg Config) error {
	store := cfg.Store

	e.GET("/healthz", handlers.Healthz())
	e.GET("/readyz", handlers.Readyz(store))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))

	e.GET("/", handlers.Overview(store, cfg.Version))
	return nil
}

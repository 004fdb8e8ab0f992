package web

import (
	"time"

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
	e.GET(handlers.OverviewRefreshURL, handlers.OverviewFragment(store))
	e.GET("/jobs", handlers.Jobs(store, time.Now, cfg.Version))
	e.GET("/jobs/:id", handlers.JobDetail(store, time.Now, cfg.Version))
	e.GET("/workers", handlers.Workers(store, cfg.Version))
	e.GET("/api/v1/jobs/:id", handlers.APIJob(store))
	e.POST("/api/v1/jobs", handlers.APIEnqueueJob(store))
	e.POST("/api/v1/jobs/batch", handlers.APIEnqueueBatch(store))

	// Dead letters and error groups (read side; replay and discard come with
	// the replay feature). Static paths win over :id in echo's router.
	e.GET("/dead-letters", handlers.DeadLetters(store, time.Now, cfg.Version))
	e.GET("/dead-letters/export.csv", handlers.ExportDeadLetters(store, cfg.Logger, time.Now, handlers.ExportCSV))
	e.GET("/dead-letters/export.json", handlers.ExportDeadLetters(store, cfg.Logger, time.Now, handlers.ExportJSON))
	e.GET("/dead-letters/:id", handlers.DeadLetter(store, cfg.LogsURLTemplate, cfg.Version))
	e.GET("/groups", handlers.Groups(store, time.Now, cfg.Version))
	e.GET("/api/v1/dead-letters", handlers.APIDeadLetters(store, time.Now))
	e.GET("/api/v1/dead-letters/:id", handlers.APIDeadLetter(store))
	e.GET("/api/v1/groups", handlers.APIGroups(store, time.Now))
	return nil
}

package web

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
)

// liveJobRoutes mounts the actions on live jobs (issue 14): run now, kill
// and cancel on a job's page and in the API, run now and kill in bulk from
// the list. They are POSTs, so the access rules require the operator role
// and a CSRF token (or a bearer token); the handlers and replay.JobService
// check the role again.
func liveJobRoutes(e *echo.Echo, cfg Config, store handlers.JobReader, jobs replay.JobStore, tasks handlers.TaskNamer) {
	svc := replay.NewJobService(jobs, cfg.Logger, cfg.Now)
	for path, a := range map[string]dlq.JobAction{"run-now": dlq.JobRunNow, "kill": dlq.JobKill, "cancel": dlq.JobCancel} {
		e.POST("/jobs/:id/"+path, handlers.JobActionHandler(store, svc, a, cfg.Now, cfg.Version))
		e.POST("/api/v1/jobs/:id/"+path, handlers.APIJobAction(svc, a))
	}
	e.POST("/jobs/bulk", handlers.JobsBulkConfirmPage(svc, cfg.Version))
	e.POST("/jobs/bulk/confirm", handlers.JobsBulkConfirm(svc, cfg.Version))
	e.POST("/api/v1/jobs/run-now", handlers.APIJobsBulk(svc, dlq.JobRunNow))
	e.POST("/api/v1/jobs/kill", handlers.APIJobsBulk(svc, dlq.JobKill))
	// "Enqueue a job" by hand, audited; producers use POST /api/v1/jobs.
	e.GET("/jobs/new", handlers.EnqueuePage(tasks, cfg.Version))
	e.POST("/jobs/new", handlers.EnqueueJob(tasks, svc, cfg.Version))
}

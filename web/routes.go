package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/web/auth"
)

// routes mounts every route of the console. It is the one place to read to
// know what the server answers.
//
// Access is default-deny (web/auth/access.go): only routes registered through
// public below answer anonymous requests. Every other route needs someone
// signed in (session, API token or SSO proxy); GETs need the viewer role,
// every other method the operator role and a CSRF token (or a bearer
// token), and /admin the admin role — whichever group, if any, a route is
// added to.
func routes(e *echo.Echo, cfg Config, sec *auth.Security, st stores) error {
	// Pages, the API and exports read through the masking store: sensitive
	// argument values, and what error text quotes of them, are hidden unless
	// an operator reveals them (audited).
	store := st.masked(sec.Masker())
	// The heavy reads go to the read replica when there is one (fresh lets
	// their pages say how fresh they are); see readStore for what stays.
	reads, fresh := readStore(cfg, sec.Masker(), store)
	now := cfg.Auth.Now
	// Every page's banners, kept for cfg.BannerWindow; a change this
	// console answers is shown at the next page.
	banners := handlers.NewBanners(cfg.BannerWindow, cfg.Now)
	e.Use(banners.CountChanges)

	public := sec.Public(e)
	public.GET("/healthz", handlers.Healthz())
	public.GET("/readyz", handlers.Readyz(st))
	public.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})),
		auth.MetricsGuard(cfg.Auth.MetricsToken))
	public.GET("/login", handlers.LoginForm(cfg.Version, cfg.Auth.AuthHeader != ""))
	public.POST("/login", handlers.Login(sec.SignIn(), sec.Sessions(), cfg.Version))
	public.POST("/logout", handlers.Logout(sec.Sessions()))
	public.POST("/logout/everywhere", handlers.LogoutEverywhere(st.access, sec.Sessions(), now))
	public.Document(OpenAPIPath, openAPI())
	// Browsers ask for /favicon.ico whatever the page links; the icon is an SVG.
	public.GET("/favicon.ico", func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, "/static/favicon.svg")
	})

	e.GET("/", handlers.Overview(reads, st.sources, cfg.Demo, cfg.Version), fresh)
	e.GET(handlers.OverviewRefreshURL, handlers.OverviewFragment(reads, st.sources, cfg.Demo))
	if cfg.Demo != nil { // `redrive dev` only; an operator's POST, audited
		e.POST(handlers.DemoDeployFixURL, handlers.DeployDemoFix(cfg.Demo, now))
	}
	e.GET("/jobs", handlers.Jobs(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/jobs/:id", handlers.JobDetail(store, cfg.Now, cfg.Version, cfg.LogsURLTemplate))
	e.GET("/workers", handlers.Workers(reads, cfg.Version), fresh)
	// Per-task runs and timings, from the summaries the workers write.
	e.GET("/tasks", handlers.Tasks(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/tasks/:task", handlers.TaskPage(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/api/v1/tasks", handlers.APITasks(reads, cfg.Now), fresh)
	e.GET("/api/v1/tasks/:task", handlers.APITask(reads, cfg.Now), fresh)
	e.GET("/api/v1/jobs/:id", handlers.APIJob(store))
	e.POST("/api/v1/jobs", handlers.APIEnqueueJob(st.queue))
	e.POST("/api/v1/jobs/batch", handlers.APIEnqueueBatch(st.queue))
	e.POST("/api/v1/letters", handlers.APIIngestLetters(st.sources, cfg.Now)) // letters other systems send
	e.POST(auth.ReportOutcomePath, handlers.APIReportOutcome(st.operations))  // and how their replays went
	e.POST(auth.TakeReplaysPath, handlers.APITakeReplays(st.operations))      // replays a Celery app's workers publish
	e.GET("/api/v1/sources", handlers.APISources(st.sources))
	liveJobRoutes(e, cfg, store, st.operations, st.queue) // run now, kill, cancel, enqueue (job_routes.go)

	// Dead letters and error groups, read side. Static paths win over :id in
	// echo's router.
	// One letter page, read through the masking store: shown by GET, and
	// again by the actions below when they re-render it with a problem.
	letterPage := handlers.LetterPage{Letters: store, Audit: store, Actions: cfg.Replay, TestRuns: store,
		LogsTemplate: cfg.LogsURLTemplate, Version: cfg.Version}
	letter := handlers.DeadLetter(letterPage)
	e.GET("/dead-letters", handlers.DeadLetters(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/dead-letters/export.csv", handlers.ExportDeadLetters(reads, cfg.Logger, cfg.Now, handlers.ExportCSV))
	e.GET("/dead-letters/export.json", handlers.ExportDeadLetters(reads, cfg.Logger, cfg.Now, handlers.ExportJSON))
	e.GET(handlers.NewerURL, handlers.DeadLettersNewer(reads, cfg.Now))
	e.GET("/dead-letters/:id", letter)
	e.POST("/dead-letters/:id/reveal", handlers.RevealArgs(st.letters, now, letter))
	e.GET("/groups", handlers.Groups(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/groups/:fingerprint", handlers.GroupPage(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/api/v1/dead-letters", handlers.APIDeadLetters(reads, cfg.Now), fresh)
	e.GET("/api/v1/dead-letters/:id", handlers.APIDeadLetter(store))
	e.POST("/api/v1/dead-letters/:id/reveal", handlers.RevealArgs(st.letters, now, handlers.APIRevealedArgs(store)))
	e.GET("/api/v1/groups", handlers.APIGroups(reads, cfg.Now), fresh)
	incidentRoutes(e, cfg, reads, fresh)      // incident_routes.go
	groupEditRoutes(e, cfg, store, st.groups) // merge and split (group_edit_routes.go)

	// Actions on dead letters, bulk operations, the audit trail.
	// Every POST changes something or leads to a change: the access rules
	// above require the operator role and a CSRF token (forms carry _csrf
	// and a one-time key); replay.Service checks the role again. Pages read
	// letters and the audit trail through the masking store.
	e.POST("/dead-letters/:id/replay", handlers.ReplayLetter(letterPage))
	e.POST("/dead-letters/:id/discard", handlers.DiscardLetter(letterPage))
	e.POST("/dead-letters/:id/restore", handlers.RestoreLetter(letterPage))
	e.POST("/dead-letters/:id/test-run", handlers.TestRunLetter(letterPage)) // one test job; the letter stays pending
	e.GET("/dead-letters/:id/test-runs", handlers.LetterTestRuns(store))     // the page's live list of them
	e.GET("/dead-letters/bulk", handlers.BulkConfirmPage(cfg.Replay, sec.Masker(), cfg.Now, cfg.Version))
	e.POST("/dead-letters/bulk", handlers.BulkConfirmPage(cfg.Replay, sec.Masker(), cfg.Now, cfg.Version))
	e.POST("/dead-letters/bulk/confirm", handlers.BulkConfirm(cfg.Replay, sec.Masker(), cfg.Now, cfg.Version))
	e.Use(handlers.OperationsBanner(st.operations, banners)) // bulk operations in flight, on every page
	e.GET("/operations", handlers.Operations(store, cfg.Version))
	e.GET("/operations/:id", handlers.OperationPage(store, cfg.Version))
	e.GET("/operations/:id/progress", handlers.OperationProgressFragment(store))
	e.POST("/operations/:id/cancel", handlers.CancelOperation(store, cfg.Replay, cfg.Version))
	e.POST("/operations/:id/release", handlers.ReleaseOperation(store, cfg.Replay, cfg.Version))
	e.POST("/operations/:id/resume", handlers.ResumeOperation(store, cfg.Replay, cfg.Version))
	e.POST("/operations/:id/stop-following", handlers.StopFollowingOperation(store, cfg.Replay, cfg.Version))
	e.GET("/audit", handlers.Audit(reads, cfg.Now, cfg.Version), fresh)
	e.GET("/audit/export.csv", handlers.ExportAudit(reads, cfg.Logger, cfg.Now, handlers.ExportCSV))
	e.GET("/audit/export.json", handlers.ExportAudit(reads, cfg.Logger, cfg.Now, handlers.ExportJSON))
	e.GET("/audit/:id", handlers.AuditEntryPage(store, cfg.Version))
	e.POST("/api/v1/dead-letters/:id/replay", handlers.APIReplay(cfg.Replay))
	e.POST("/api/v1/dead-letters/:id/discard", handlers.APIDiscard(cfg.Replay))
	e.POST("/api/v1/dead-letters/:id/restore", handlers.APIRestore(cfg.Replay))
	e.POST("/api/v1/dead-letters/:id/test-runs", handlers.APITestRun(cfg.Replay))
	e.GET("/api/v1/dead-letters/:id/test-runs", handlers.APITestRuns(store))
	e.POST("/api/v1/dead-letters/replay", handlers.APIBulk(cfg.Replay, dlq.OpReplay, sec.Masker(), cfg.Now))
	e.POST("/api/v1/dead-letters/discard", handlers.APIBulk(cfg.Replay, dlq.OpDiscard, sec.Masker(), cfg.Now))
	e.GET("/api/v1/operations", handlers.APIOperations(store))
	e.GET("/api/v1/operations/:id", handlers.APIOperation(store))
	e.POST("/api/v1/operations/:id/cancel", handlers.APIChangeOperation(cfg.Replay.Cancel))
	e.POST("/api/v1/operations/:id/release", handlers.APIChangeOperation(cfg.Replay.ReleaseCanary))
	e.POST("/api/v1/operations/:id/resume", handlers.APIChangeOperation(cfg.Replay.Resume))
	e.POST("/api/v1/operations/:id/stop-following", handlers.APIChangeOperation(cfg.Replay.StopFollowing))
	e.GET("/api/v1/audit", handlers.APIAudit(reads, cfg.Now), fresh)

	// --- Pauses (issue 14): every page's banner, the pause pages, the API.
	// Pausing and resuming need the operator role, as every POST does.
	e.Use(handlers.PauseBanner(st.queue, cfg.Now, banners))
	e.GET("/pauses", handlers.PausesPage(st.queue, cfg.Now, cfg.Version))
	e.GET("/pauses/new", handlers.NewPausePage(st.queue, cfg.Now, cfg.Version))
	e.POST("/pauses", handlers.PauseForm(st.queue, cfg.Now, cfg.Version))
	e.POST("/pauses/:id/resume", handlers.ResumeForm(st.queue, cfg.Now, cfg.Version))
	e.GET("/api/v1/pauses", handlers.APIPauses(st.queue))
	e.POST("/api/v1/pauses", handlers.APIPause(st.queue, cfg.Now))
	e.DELETE("/api/v1/pauses/:id", handlers.APIResume(st.queue, cfg.Now))
	e.POST("/api/v1/pauses/:id/resume", handlers.APIResume(st.queue, cfg.Now))
	// --- end of pause routes.

	// --- Schedules (issue 32): the periodic jobs workers register.
	// Disabling and enabling need the operator role, as every POST does,
	// and a reason; both are audited.
	e.GET("/schedules", handlers.SchedulesPage(store, cfg.Now, cfg.Version))
	e.POST("/schedules/:name/disable", handlers.ScheduleForm(st.queue, store, cfg.Now, cfg.Version, false))
	e.POST("/schedules/:name/enable", handlers.ScheduleForm(st.queue, store, cfg.Now, cfg.Version, true))
	e.GET("/api/v1/schedules", handlers.APISchedules(store))
	e.POST("/api/v1/schedules/:name/disable", handlers.APIChangeSchedule(st.queue, store, cfg.Now, false))
	e.POST("/api/v1/schedules/:name/enable", handlers.APIChangeSchedule(st.queue, store, cfg.Now, true))
	// --- end of schedule routes.
	// --- Retention of settled letters (issue 32): the next purge, seen
	// coming on the overview and the letter list, and the purges held for
	// growing groups, which an operator confirms (audited).
	e.Use(handlers.RetentionNotice(st.operations, cfg.RetainLetters, cfg.Now, banners))
	e.POST("/retention/holds/:group/confirm", handlers.ConfirmPurgeForm(st.operations, cfg.Now))
	e.GET("/api/v1/retention", handlers.APIRetention(st.operations, cfg.RetainLetters, cfg.Now))
	e.POST("/api/v1/retention/holds/:group/confirm", handlers.APIConfirmPurge(st.operations, cfg.Now))
	// --- Throttles (issue 32): the banner under the pauses', the forms,
	// the API; listed on the pauses page.
	e.Use(handlers.ThrottleBanner(st.queue, cfg.Now, banners))
	e.GET("/throttles/new", handlers.NewThrottlePage(st.queue, cfg.Now, cfg.Version))
	e.POST("/throttles", handlers.ThrottleForm(st.queue, st.queue, cfg.Now, cfg.Version))
	e.GET("/throttles/:id", handlers.ChangeThrottlePage(st.queue, cfg.Now, cfg.Version))
	e.POST("/throttles/:id", handlers.ThrottleForm(st.queue, st.queue, cfg.Now, cfg.Version))
	e.POST("/throttles/:id/lift", handlers.LiftForm(st.queue, st.queue, cfg.Now, cfg.Version))
	e.GET("/api/v1/throttles", handlers.APIThrottles(st.queue))
	e.POST("/api/v1/throttles", handlers.APIThrottle(st.queue, cfg.Now))
	e.PATCH("/api/v1/throttles/:id", handlers.APIChangeThrottle(st.queue, cfg.Now))
	e.DELETE("/api/v1/throttles/:id", handlers.APILift(st.queue, cfg.Now))
	e.POST("/api/v1/throttles/:id/lift", handlers.APILift(st.queue, cfg.Now))
	// --- end of throttle routes.

	// Users and API tokens: admins only.
	admin := e.Group("/admin", auth.RequireRole(dlq.RoleAdmin))
	admin.GET("", handlers.AdminRedirect())
	admin.GET("/users", handlers.Admin(st.access, cfg.Version))
	admin.POST("/users", handlers.AdminAddUser(st.access, now, cfg.Version))
	for _, op := range []string{"password", "disable", "enable", "role", "signout"} {
		admin.POST("/users/:name/"+op, handlers.AdminChangeUser(st.access, now, op, cfg.Version))
	}
	admin.POST("/tokens", handlers.AdminCreateToken(st.access, now, cfg.Version))
	admin.POST("/tokens/:id/revoke", handlers.AdminRevokeToken(st.access, now))
	admin.GET("/notifications", handlers.AdminNotifications(st.outbox, cfg.NotifyEndpoints, cfg.Version))
	admin.GET("/sources", handlers.AdminSources(st.sources, cfg.Version))
	return nil
}

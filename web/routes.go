package web

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

// routes mounts every route of the console. It is the one place to read to
// know what the server answers.
//
// Access is default-deny (auth_access.go): only routes registered through
// public below answer anonymous requests. Every other route needs someone
// signed in (session, API token or SSO proxy); GETs need the viewer role,
// every other method the operator role and a CSRF token (or a bearer
// token), and /admin the admin role — whichever group, if any, a route is
// added to.
func routes(e *echo.Echo, cfg Config, sec *security) error {
	// Pages, the API and exports read through the masking store: sensitive
	// argument values are hidden unless an operator reveals them (audited).
	store := handlers.MaskedReads{Store: cfg.Store, Masker: sec.masker}
	now := cfg.Auth.Now

	public := publicRoutes{e: e, acl: sec.acl}
	public.GET("/healthz", handlers.Healthz())
	public.GET("/readyz", handlers.Readyz(store))
	public.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})),
		metricsGuard(cfg.Auth.MetricsToken))
	public.GET("/login", handlers.LoginForm(cfg.Version, cfg.Auth.AuthHeader != ""))
	public.POST("/login", handlers.Login(sec.signIn, sec.sessions, cfg.Version))
	public.POST("/logout", handlers.Logout(sec.sessions))

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
	letter := handlers.DeadLetter(store, cfg.LogsURLTemplate, cfg.Version)
	e.GET("/dead-letters", handlers.DeadLetters(store, time.Now, cfg.Version))
	e.GET("/dead-letters/export.csv", handlers.ExportDeadLetters(store, cfg.Logger, time.Now, handlers.ExportCSV))
	e.GET("/dead-letters/export.json", handlers.ExportDeadLetters(store, cfg.Logger, time.Now, handlers.ExportJSON))
	e.GET("/dead-letters/:id", letter)
	e.POST("/dead-letters/:id/reveal", handlers.RevealArgs(cfg.Store, now, letter))
	e.GET("/groups", handlers.Groups(store, time.Now, cfg.Version))
	e.GET("/api/v1/dead-letters", handlers.APIDeadLetters(store, time.Now))
	e.GET("/api/v1/dead-letters/:id", handlers.APIDeadLetter(store))
	e.POST("/api/v1/dead-letters/:id/reveal", handlers.RevealArgs(cfg.Store, now, handlers.APIRevealedArgs(store)))
	e.GET("/api/v1/groups", handlers.APIGroups(store, time.Now))

	// Users and API tokens: admins only.
	admin := e.Group("/admin", requireRole(dlq.RoleAdmin))
	admin.GET("", handlers.AdminRedirect())
	admin.GET("/users", handlers.Admin(cfg.Store, cfg.Version))
	admin.POST("/users", handlers.AdminAddUser(cfg.Store, now, cfg.Version))
	for _, op := range []string{"password", "disable", "enable", "role"} {
		admin.POST("/users/:name/"+op, handlers.AdminChangeUser(cfg.Store, now, op, cfg.Version))
	}
	admin.POST("/tokens", handlers.AdminCreateToken(cfg.Store, now, cfg.Version))
	admin.POST("/tokens/:id/revoke", handlers.AdminRevokeToken(cfg.Store, now))
	return nil
}

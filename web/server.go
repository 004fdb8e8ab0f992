// Package web assembles the console's HTTP server: echo, the middleware in
// order, every route (routes.go), static files and the one error handler.
// Who is asking and what they may do is the auth package's business.
package web

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/static"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/web/auth"
)

// BannerWindow is how long `redrive serve` keeps what every page's banners
// read (handlers.Banners): on the 2-core machine each of those round trips
// is CPU, a fifth of a letter's page.
const BannerWindow = time.Second

// Config holds the server's dependencies and settings.
type Config struct {
	// DB is the primary, from postgres.Open: every room of the store the
	// console reads and changes is opened on it.
	DB     *sqlx.DB
	Logger *slog.Logger
	// Version is the build shown in the header and in /metrics.
	Version string
	// Registry collects the console's metrics for /metrics; a fresh one is
	// made when nil (tests build many servers in one process).
	Registry *prometheus.Registry
	// BodyLimit caps request bodies (echo's size syntax); default "8M".
	BodyLimit string
	// LogsURLTemplate links each attempt on a dead letter's page to its logs
	// or traces: {job_id}, {task}, {from} and {to} (RFC3339, a minute either
	// side of the attempt) are replaced, URL-escaped. Empty: no links.
	LogsURLTemplate string
	// Replay carries out actions on dead letters. Default: a service on
	// DB that does not wake a runner (operations then start on the
	// runner's next poll).
	Replay *replay.Service
	// Auth configures sign-in, sessions, tokens, the SSO proxy and masking
	// (web/auth). Every route but health, metrics, sign-in and static
	// files needs someone signed in.
	Auth auth.Config
	// Replica, when set, serves the console's heavy reads (lists, search,
	// groups, the overview, exports, the jobs and workers pages) from a
	// streaming replica, falling back to the primary while it lags or is down
	// (read_replica.go). Its Run must be running.
	Replica *postgres.Replica
	// Now is the clock the pages and actions read ("last 24 hours", audit
	// times); default time.Now. Auth.Now defaults to it.
	Now func() time.Time
	// NotifyEndpoints are the webhooks notifications go to, redacted, for
	// the admin page (notify.Endpoint.Redacted).
	NotifyEndpoints []string
	// RetainLetters is the console's scheduled retention of settled
	// letters (REDRIVE_RETAIN_LETTERS), which the overview and the letter
	// list forecast; zero: none.
	RetainLetters time.Duration
	// BannerWindow keeps what every page's banners read (operations in
	// flight, open pauses and throttles, the next purge) that long
	// (BannerWindow for `redrive serve`); zero: every page reads
	// them. A change the console itself answers shows at the next page.
	BannerWindow time.Duration
	// Demo is the demo incident's simulated outage, set by `redrive dev`
	// only: the overview tells its story and offers "Deploy the fix".
	Demo handlers.DemoOutage
}

// DemoOutage and DemoOutageState are the demo incident as the console
// sees it (handlers), named here for the binary that wires it in.
type (
	DemoOutage      = handlers.DemoOutage
	DemoOutageState = handlers.DemoOutageState
)

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("web: DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	c.Version = cmp.Or(c.Version, "dev")
	c.BodyLimit = cmp.Or(c.BodyLimit, "8M")
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Auth.Now == nil {
		c.Auth.Now = c.Now
	}
	return c.Auth.Validate()
}

// NewServer returns the console's HTTP handler with every route mounted.
func NewServer(cfg Config) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Logger, cfg.Version, cfg.Now)
	st := openStores(cfg.DB)
	if cfg.Replay == nil {
		cfg.Replay = replay.NewService(replay.Config{Store: st.operations, Workers: st.queue, Logger: cfg.Logger})
	}
	sec := auth.New(st.access, cfg.Auth, cfg.Logger)
	e.IPExtractor = sec.Trust().IPExtractor()
	metrics, err := newHTTPMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	if err := cfg.Registry.Register(newDomainCollector(st.letters, cfg.Logger)); err != nil {
		return nil, fmt.Errorf("register domain metrics: %w", err)
	}
	if err := cfg.Registry.Register(newSourceCollector(st.sources, cfg.Logger)); err != nil {
		return nil, fmt.Errorf("register source metrics: %w", err)
	}
	if err := cfg.Registry.Register(newAuditHeadCollector(st.audit, cfg.Logger)); err != nil {
		return nil, fmt.Errorf("register audit head metric: %w", err)
	}
	if cfg.Replica != nil {
		if err := cfg.Registry.Register(newReplicaCollector(cfg.Replica)); err != nil {
			return nil, fmt.Errorf("register read replica metrics: %w", err)
		}
	}
	if err := cfg.Registry.Register(newPauseCollector(st.queue, cfg.Logger)); err != nil {
		return nil, fmt.Errorf("register pause metrics: %w", err)
	}
	e.Use(
		requestID(sec.Trust()),
		requestLogger(cfg.Logger),
		middleware.RecoverWithConfig(middleware.RecoverConfig{
			// The stack goes to the log through the error handler, never to the client.
			DisablePrintStack: true,
		}),
		securityHeaders(),
		hsts(sec.Trust()),
		middleware.BodyLimit(cfg.BodyLimit),
		metrics.middleware,
		refuseUnstorableInput(),
		// Who is asking, then may they, then did the request come from our
		// own pages: in that order, after routing, so c.Path() is known.
		sec.Authenticate,
		sec.Authorize,
		sec.CSRF,
	)

	assets, err := fs.Sub(static.FS, ".")
	if err != nil {
		return nil, err
	}
	e.StaticFS("/static", assets)

	if err := routes(e, cfg, sec, st); err != nil {
		return nil, err
	}
	return headAsGet(e), nil
}

// securityHeaders sets a strict Content-Security-Policy: no inline script or
// style, nothing from other origins, no framing. HSTS is hsts's job: echo
// would believe any client's X-Forwarded-Proto.
func securityHeaders() echo.MiddlewareFunc {
	return middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection:         "0",
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		ReferrerPolicy:        "same-origin",
		ContentSecurityPolicy: "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'",
	})
}

func requestLogger(logger *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRequestID: true, LogRoutePath: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			logger.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method), slog.String("uri", v.URI), slog.String("route", v.RoutePath),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency), slog.String("request_id", v.RequestID))
			return nil
		},
	})
}

// headAsGet answers HEAD like GET (load balancers and uptime checks probe
// /healthz with HEAD): echo routes HEAD only where asked to. The GET runs
// on a copy of the request, because net/http decides from its own request,
// the original, to hold back the body of a response to HEAD; rewriting that
// one sent the body, which a kept-alive connection reads as the start of
// the next response. Everything a GET may not do, a HEAD may not either.
//
// It keeps the echo server's other methods (Routes, for the tests that
// check the routes against the API's document).
func headAsGet(e *echo.Echo) http.Handler { return headServer{e} }

type headServer struct{ *echo.Echo }

func (s headServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		r = r.WithContext(r.Context()) // a shallow copy
		r.Method = http.MethodGet
	}
	s.Echo.ServeHTTP(w, r)
}

package cli

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/web"
)

func runServe(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("serve", "Run the console.", e.stderr)
	register(fs, databaseOptions, consoleOptions, []string{"migrate", "migrate-database-url"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	logger, err := newLogger(f, e.stderr)
	if err != nil {
		return err
	}
	auth, err := authConfig(f, false)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	if f.boolean("migrate") {
		if _, err := migrate(ctx, db, f.str("migrate-database-url"), logger); err != nil {
			return err
		}
	}
	store := dlq.NewStore(db)
	if err := adviseFirstAdmin(ctx, store, logger); err != nil {
		return err
	}
	c, err := NewConsole(ctx, ConsoleConfig{Store: store, Logger: logger, Registry: newMetricsRegistry(), Auth: auth,
		LogsURLTemplate: f.str("logs-url-template")})
	if err != nil {
		return err
	}
	return c.Serve(ctx, f.str("addr"), func(url string) { logger.Info("console listening", "url", url) })
}

// ConsoleConfig is what NewConsole needs.
type ConsoleConfig struct {
	Store  *dlq.Store
	Logger *slog.Logger
	// Version shown in the header and /metrics; default Version().
	Version string
	// Registry collects the console's metrics; nil: a fresh one.
	Registry        *prometheus.Registry
	Auth            web.AuthConfig
	LogsURLTemplate string
	// RunnerPollInterval is how often the bulk-operation runner looks for
	// work it was not woken for; zero: the runner's default.
	RunnerPollInterval time.Duration
}

// Console is the console as `redrive serve` builds it: the HTTP handler,
// and the bulk-operation runner, the audit head's log line and the search
// rebuild that run beside it. `serve`, `dev` and the browser tests build it
// here, so they test what runs.
type Console struct {
	// Handler is the console's HTTP handler.
	Handler http.Handler
	runner  *replay.Runner
	rebuild func(context.Context)
	cfg     ConsoleConfig
}

// NewConsole stores the mask settings and builds the console.
func NewConsole(ctx context.Context, cfg ConsoleConfig) (*Console, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = Version()
	}
	rebuild, err := applyMaskPolicy(ctx, cfg.Store, cfg.Auth, cfg.Logger)
	if err != nil {
		return nil, err
	}
	runner := replay.NewRunner(replay.RunnerConfig{Store: cfg.Store, Logger: cfg.Logger, PollInterval: cfg.RunnerPollInterval})
	handler, err := web.NewServer(web.Config{
		Store: cfg.Store, Logger: cfg.Logger, Version: cfg.Version, Registry: cfg.Registry,
		LogsURLTemplate: cfg.LogsURLTemplate, Auth: cfg.Auth,
		Replay: replay.NewService(replay.Config{Store: cfg.Store, Logger: cfg.Logger, Wake: runner.Wake}),
	})
	if err != nil {
		return nil, err
	}
	return &Console{Handler: handler, runner: runner, rebuild: rebuild, cfg: cfg}, nil
}

// Run runs what works beside the HTTP handler until ctx ends: the
// bulk-operation runner, the audit head's log line and the search rebuild.
func (c *Console) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.runner.Run(gctx) })
	// The audit head in the log: a copy of where the chain ends, out of
	// reach of whoever could cut it short in the database.
	g.Go(func() error {
		return web.LogAuditHead(gctx, web.AuditHeadLogConfig{Source: c.cfg.Store, Logger: c.cfg.Logger})
	})
	g.Go(func() error { c.rebuild(gctx); return nil })
	return g.Wait()
}

// Serve serves the console on addr and runs it (Run) until ctx ends.
func (c *Console) Serve(ctx context.Context, addr string, ready func(url string)) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(gctx) })
	g.Go(func() error {
		return web.Serve(gctx, web.ServeConfig{
			Addr: addr, Handler: c.Handler, Logger: c.cfg.Logger, Ready: ready,
			// Exports stream large files; the write timeout bounds them, generously.
			WriteTimeout: 10 * time.Minute,
		})
	})
	return g.Wait()
}

// newMetricsRegistry returns a registry with the Go runtime and process
// collectors; never the global default registry.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

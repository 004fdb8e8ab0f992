package cli

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

func runWorker(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("worker", "Run jobs from the queue. Only the demo tasks are built in (--demo-tasks);\napplications register their own handlers with the worker package.", e.stderr)
	register(fs, databaseOptions, workerOptions)
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	if !f.boolean("demo-tasks") {
		return usagef("no tasks to run: this binary has only the demo tasks (--demo-tasks); " +
			"an application runs its own handlers by embedding the worker package (see docs/deployment.md, Your own tasks)")
	}
	logger, err := newLogger(f, e.stderr)
	if err != nil {
		return err
	}
	databaseURL := f.str("database-url")
	db, err := openDB(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := demo.EnsureSchema(ctx, db); err != nil {
		return err
	}
	reg := worker.NewRegistry()
	demo.Register(reg, db)
	metrics := newMetricsRegistry()
	g, gctx := errgroup.WithContext(ctx)
	if addr := f.str("metrics-addr"); addr != "" {
		g.Go(func() error { return serveMetrics(gctx, addr, metrics, logger) })
	}
	listen, err := listenDSN(ctx, f.str("listen-database-url"), db, databaseURL, logger)
	if err != nil {
		return err
	}
	cfg := workerConfig(f, logger, listen)
	cfg.Registry = reg
	// The job outcomes and durations join the Go and process collectors
	// on --metrics-addr: they exist only in this process.
	cfg.Metrics = metrics
	g.Go(func() error { return RunWorker(gctx, db, cfg) })
	return g.Wait()
}

// RunWorker runs a worker on the queue in db with cfg until ctx ends, as
// `redrive worker` and `redrive dev` do; the worker's process tests run
// theirs here.
func RunWorker(ctx context.Context, db *sqlx.DB, cfg worker.Config) error {
	wk, err := worker.New(queue.New(db, groups.New(db)), cfg)
	if err != nil {
		return err
	}
	return wk.Run(ctx)
}

// listenDSN chooses the worker's LISTEN connection: listenURL, else
// databaseURL unless db goes through a transaction pooler, where LISTEN
// cannot work (the pooler hands the listening session to other clients).
// Then it returns "" and the worker polls.
func listenDSN(ctx context.Context, listenURL string, db *sqlx.DB, databaseURL string, logger *slog.Logger) (string, error) {
	if listenURL != "" {
		return listenURL, nil
	}
	pooled, err := postgres.BehindTransactionPooler(ctx, db)
	if err != nil {
		return "", err
	}
	if pooled {
		logger.Warn("DATABASE_URL goes through a transaction pooler, where LISTEN cannot work: the worker polls for new jobs; " +
			"set REDRIVE_LISTEN_DATABASE_URL to a direct connection to Postgres to wake it at once")
		return "", nil
	}
	return databaseURL, nil
}

// workerConfig is the worker's configuration from its options, less the
// registry of tasks and of metrics, which the caller owns.
func workerConfig(f flags, logger *slog.Logger, dsn string) worker.Config {
	var queues []string
	for q := range strings.SplitSeq(f.str("queues"), ",") {
		if q = strings.TrimSpace(q); q != "" {
			queues = append(queues, q)
		}
	}
	return worker.Config{
		Queues:          queues,
		Concurrency:     f.integer("concurrency"),
		LeaseDuration:   f.duration("lease"),
		DefaultTimeout:  f.duration("job-timeout"),
		MaxTimeout:      f.duration("job-timeout"),
		ShutdownGrace:   f.duration("shutdown-grace"),
		RetryPolicy:     worker.RetryPolicy{Base: f.duration("retry-base"), Cap: f.duration("retry-cap")},
		RetainSucceeded: f.duration("retain-succeeded"),
		Logger:          logger,
		Version:         Version(),
		ListenDSN:       dsn,
	}
}

// serveMetrics serves a worker's /metrics until ctx ends.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return web.Serve(ctx, web.ServeConfig{Addr: addr, Handler: mux, Logger: logger, DrainTimeout: 5 * time.Second,
		Ready: func(url string) { logger.Info("worker metrics listening", "url", url+"/metrics") }})
}

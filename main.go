// Command redrive is the dead-letter operations console, its worker and the
// tools around them, in one binary:
//
//	redrive dev       local Postgres, demo tasks and traffic, console and worker in one process
//	redrive serve     the console
//	redrive worker    run jobs
//	redrive migrate   apply database migrations
//	redrive enqueue   enqueue one job
//	redrive seed      bulk synthetic dead letters, for benchmarks
//	redrive user      add, change, disable and list console users
//	redrive token     create, revoke and list API tokens
//	redrive audit     verify the audit trail's hash chain
//	redrive purge     delete settled dead letters past a retention age
//	redrive search    rebuild the search text after the mask settings change
//
// Configuration comes from flags, each of which defaults to an environment
// variable (DATABASE_URL, REDRIVE_ADDR, ...), the twelve-factor way.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/localpg"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// version is the build, set with -ldflags "-X main.version=v1.2.3"; when
// unset it comes from the VCS revision Go stamps into the binary.
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "redrive:", err)
		}
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	var ue *usageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &ue) || errors.Is(err, errNoCommand) {
		return 2
	}
	return 1
}

// usageError is a mistake on the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

var errNoCommand = errors.New("no command given")

const usage = `redrive — dead-letter operations console and worker

Usage: redrive <command> [flags]

Commands:
  dev       everything in one process for a first look: a private Postgres
            (unless DATABASE_URL is set), migrations, demo tasks, demo traffic,
            the console and a worker
  serve     run the console
  worker    run jobs
  migrate   apply database migrations
  enqueue   enqueue one job
  seed      insert synthetic dead letters in bulk (benchmarks, demos)
  user      manage console users: add, passwd, role, disable, enable, list
  token     manage API tokens: create, revoke, list
  audit     verify the audit trail's hash chain (audit verify)
  purge     delete replayed and discarded letters older than a retention age
  search    rebuild the masked search text (search rebuild)

Run 'redrive <command> -h' for the flags of each.
`

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return errNoCommand
		}
		return nil
	}
	cmds := map[string]func(context.Context, []string, func(string) string, io.Writer, io.Writer) error{
		"dev": runDev, "serve": runServe, "worker": runWorker, "migrate": runMigrate,
		"enqueue": runEnqueue, "seed": runSeed, "user": runUser, "token": runToken,
		"audit": runAudit, "purge": runPurge, "search": runSearch,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usagef("unknown command %q", args[0])
	}
	return cmd(ctx, args[1:], getenv, stdout, stderr)
}

// common holds the flags every command shares.
type common struct {
	databaseURL string
	logLevel    string
	logFormat   string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", "", "Postgres connection URL (env DATABASE_URL)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (env REDRIVE_LOG_LEVEL)")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json (env REDRIVE_LOG_FORMAT)")
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format must be text or json, not %q", c.logFormat)
	}
}

// open connects to the database named by --database-url.
func (c *common) open(ctx context.Context) (*sqlx.DB, error) {
	if c.databaseURL == "" {
		return nil, errors.New("no database: set DATABASE_URL or --database-url (or use `redrive dev`, which starts its own)")
	}
	return dlq.Open(ctx, c.databaseURL)
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("redrive "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: redrive %s [flags]\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// envVars names the environment variable behind each flag. A variable sets
// its flag before the command line is parsed, so flags win over the
// environment and a malformed value is reported like a malformed flag.
var envVars = map[string]string{
	"database-url": "DATABASE_URL", "log-level": "REDRIVE_LOG_LEVEL", "log-format": "REDRIVE_LOG_FORMAT",
	"addr": "REDRIVE_ADDR", "migrate": "REDRIVE_MIGRATE",
	"queues": "REDRIVE_QUEUES", "concurrency": "REDRIVE_CONCURRENCY", "demo-tasks": "REDRIVE_DEMO_TASKS",
	"shutdown-grace": "REDRIVE_SHUTDOWN_GRACE", "lease": "REDRIVE_LEASE", "job-timeout": "REDRIVE_JOB_TIMEOUT",
	"retry-base": "REDRIVE_RETRY_BASE", "retry-cap": "REDRIVE_RETRY_CAP", "data-dir": "REDRIVE_DATA_DIR",
	"metrics-addr": "REDRIVE_METRICS_ADDR", "logs-url-template": "REDRIVE_LOGS_URL_TEMPLATE",
	"session-keys": "REDRIVE_SESSION_KEYS", "session-lifetime": "REDRIVE_SESSION_LIFETIME",
	"session-idle": "REDRIVE_SESSION_IDLE", "trusted-proxies": "REDRIVE_TRUSTED_PROXIES",
	"auth-header": "REDRIVE_AUTH_HEADER", "proxy-roles": "REDRIVE_PROXY_ROLES",
	"proxy-default-role": "REDRIVE_PROXY_DEFAULT_ROLE", "metrics-token": "REDRIVE_METRICS_TOKEN",
	"mask-keys": "REDRIVE_MASK_KEYS", "mask-patterns": "REDRIVE_MASK_PATTERNS",
	"retain-succeeded":    "REDRIVE_RETAIN_SUCCEEDED",
	"listen-database-url": "REDRIVE_LISTEN_DATABASE_URL", "migrate-database-url": "REDRIVE_MIGRATE_DATABASE_URL",
}

// parse applies the environment, then the flags, and refuses stray arguments.
func parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envVars[f.Name]
		if name == "" || envErr != nil {
			return
		}
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				return s.Value[:7]
			}
		}
	}
	return "dev"
}

// --- serve ---------------------------------------------------------------

type serveFlags struct {
	addr            string
	migrate         bool
	logsURLTemplate string
	auth            authFlags
}

func (s *serveFlags) register(fs *flag.FlagSet, defaultAddr string) {
	fs.StringVar(&s.logsURLTemplate, "logs-url-template", "", "link each attempt to your logs or traces: {job_id}, {task}, {from}, {to} are filled in (env REDRIVE_LOGS_URL_TEMPLATE)")
	fs.StringVar(&s.addr, "addr", defaultAddr, "address to listen on (env REDRIVE_ADDR)")
	s.auth.register(fs)
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "Run the console.", stderr)
	var c common
	var s serveFlags
	c.register(fs)
	s.register(fs, ":8080")
	fs.BoolVar(&s.migrate, "migrate", false, "apply pending migrations before serving (env REDRIVE_MIGRATE)")
	migrateURL := migrateURLFlag(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	logger, err := c.logger(stderr)
	if err != nil {
		return err
	}
	auth, err := s.auth.config(false)
	if err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if s.migrate {
		if _, err := migrate(ctx, db, *migrateURL, logger); err != nil {
			return err
		}
	}
	store := dlq.NewStore(db)
	if err := adviseFirstAdmin(ctx, store, logger); err != nil {
		return err
	}
	return runConsole(ctx, console{flags: s, auth: auth, store: store, logger: logger, metrics: newMetricsRegistry()}, func(url string) {
		logger.Info("console listening", "url", url)
	})
}

// console is what runConsole needs.
type console struct {
	flags   serveFlags
	store   *dlq.Store
	logger  *slog.Logger
	metrics *prometheus.Registry
	auth    web.AuthConfig
}

// runConsole serves the console and runs the bulk-operation runner and the
// audit head's log line beside it until ctx ends.
func runConsole(ctx context.Context, c console, ready func(url string)) error {
	rebuild, err := applyMaskPolicy(ctx, c.store, c.auth, c.logger)
	if err != nil {
		return err
	}
	runner := replay.NewRunner(replay.RunnerConfig{Store: c.store, Logger: c.logger})
	handler, err := web.NewServer(web.Config{
		Store: c.store, Logger: c.logger, Version: buildVersion(), Registry: c.metrics,
		LogsURLTemplate: c.flags.logsURLTemplate, Auth: c.auth,
		Replay: replay.NewService(replay.Config{Store: c.store, Logger: c.logger, Wake: runner.Wake}),
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runner.Run(gctx) })
	// The audit head in the log: a copy of where the chain ends, out of
	// reach of whoever could cut it short in the database.
	g.Go(func() error { return web.LogAuditHead(gctx, web.AuditHeadLogConfig{Source: c.store, Logger: c.logger}) })
	g.Go(func() error { rebuild(gctx); return nil })
	g.Go(func() error {
		return web.Serve(gctx, web.ServeConfig{
			Addr: c.flags.addr, Handler: handler, Logger: c.logger, Ready: ready,
			// Exports stream large files; the write timeout bounds them, generously.
			WriteTimeout: 10 * time.Minute,
		})
	})
	return g.Wait()
}

// --- worker --------------------------------------------------------------

type workerFlags struct {
	queues      string
	concurrency int
	demoTasks   bool
	grace       time.Duration
	lease       time.Duration
	timeout     time.Duration
	retryBase   time.Duration
	retryCap    time.Duration
	metricsAddr string
	retain      time.Duration
	listenURL   string
}

func (w *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.queues, "queues", "default", "comma-separated queues to work (env REDRIVE_QUEUES)")
	fs.IntVar(&w.concurrency, "concurrency", worker.DefaultConcurrency, "jobs run at once (env REDRIVE_CONCURRENCY)")
	fs.BoolVar(&w.demoTasks, "demo-tasks", false, "register the demo.* tasks (env REDRIVE_DEMO_TASKS)")
	fs.DurationVar(&w.grace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long in-flight jobs may finish before they are cancelled and handed back (env REDRIVE_SHUTDOWN_GRACE)")
	fs.DurationVar(&w.lease, "lease", 30*time.Second, "how long a claimed job is held without a heartbeat before another worker may take it (env REDRIVE_LEASE)")
	fs.DurationVar(&w.timeout, "job-timeout", 5*time.Minute, "longest one attempt may run: the limit of jobs whose task and enqueue set none, and a cap on those that set a longer one (env REDRIVE_JOB_TIMEOUT)")
	fs.DurationVar(&w.retryBase, "retry-base", worker.DefaultRetryBase, "backoff before the first retry; doubles each attempt (env REDRIVE_RETRY_BASE)")
	fs.StringVar(&w.metricsAddr, "metrics-addr", "", "serve the worker's Prometheus metrics on this address, e.g. :9090 (env REDRIVE_METRICS_ADDR; empty: off)")
	fs.DurationVar(&w.retryCap, "retry-cap", worker.DefaultRetryCap, "longest backoff between attempts (env REDRIVE_RETRY_CAP)")
	fs.DurationVar(&w.retain, "retain-succeeded", worker.DefaultRetainSucceeded, "how long succeeded jobs are kept before the cleaner deletes them; negative: for ever (env REDRIVE_RETAIN_SUCCEEDED)")
	fs.StringVar(&w.listenURL, "listen-database-url", "", "a direct connection to Postgres for LISTEN, when DATABASE_URL goes through a transaction pooler (env REDRIVE_LISTEN_DATABASE_URL; default: DATABASE_URL unless it is pooled, else polling only)")
}

// listenDSN chooses the worker's LISTEN connection: --listen-database-url,
// else databaseURL unless db goes through a transaction pooler, where LISTEN
// cannot work (the pooler hands the listening session to other clients).
// Then it returns "" and the worker polls.
func (w *workerFlags) listenDSN(ctx context.Context, db *sqlx.DB, databaseURL string, logger *slog.Logger) (string, error) {
	if w.listenURL != "" {
		return w.listenURL, nil
	}
	pooled, err := dlq.BehindTransactionPooler(ctx, db)
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

func (w *workerFlags) config(logger *slog.Logger, dsn string, metrics prometheus.Registerer) worker.Config {
	var queues []string
	for q := range strings.SplitSeq(w.queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			queues = append(queues, q)
		}
	}
	return worker.Config{
		Queues:          queues,
		Concurrency:     w.concurrency,
		LeaseDuration:   w.lease,
		DefaultTimeout:  w.timeout,
		MaxTimeout:      w.timeout,
		ShutdownGrace:   w.grace,
		RetryPolicy:     worker.RetryPolicy{Base: w.retryBase, Cap: w.retryCap},
		RetainSucceeded: w.retain,
		Logger:          logger,
		Version:         buildVersion(),
		ListenDSN:       dsn,
	}
}

func runWorker(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker", "Run jobs from the queue. Only the demo tasks are built in (--demo-tasks);\napplications register their own handlers with the worker package.", stderr)
	var c common
	var w workerFlags
	c.register(fs)
	w.register(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	if !w.demoTasks {
		return usagef("no tasks to run: this binary has only the demo tasks (--demo-tasks); " +
			"an application runs its own handlers by embedding the worker package (see README)")
	}
	if !w.demoTasks {
		return usagef("no tasks to run: this binary has only the demo tasks (--demo-tasks); " +
			"an application runs its own handlers by embedding the worker package (see README)")
	}
	logger, err := c.logger(stderr)
	if err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := worker.NewRegistry()
	demo.Register(reg, db)
	metrics := newMetricsRegistry()
	g, gctx := errgroup.WithContext(ctx)
	if w.metricsAddr != "" {
		g.Go(func() error { return serveMetrics(gctx, w.metricsAddr, metrics, logger) })
	}
	listen, err := w.listenDSN(ctx, db, c.databaseURL, logger)
	if err != nil {
		return err
	}
	g.Go(func() error {
		return startWorker(gctx, dlq.NewStore(db), reg, w.config(logger, listen, metrics))
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

// serveMetrics serves a worker's /metrics until ctx ends.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return web.Serve(ctx, web.ServeConfig{Addr: addr, Handler: mux, Logger: logger, DrainTimeout: 5 * time.Second,
		Ready: func(url string) { logger.Info("worker metrics listening", "url", url+"/metrics") }})
}

func startWorker(ctx context.Context, store *dlq.Store, reg *worker.Registry, cfg worker.Config) error {
	cfg.Registry = reg
	wk, err := worker.New(store, cfg)
	if err != nil {
		return err
	}
	return wk.Run(ctx)
}

// --- dev -----------------------------------------------------------------

func runDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", "Everything in one process for a first look: a private Postgres cluster\n(unless DATABASE_URL is set), migrations, the demo tasks, a demo producer\nthat keeps a realistic mix of jobs flowing, a worker and the console.", stderr)
	var c common
	var s serveFlags
	var w workerFlags
	var dataDir string
	var rate float64
	c.register(fs)
	s.register(fs, "127.0.0.1:8080")
	w.register(fs)
	fs.StringVar(&dataDir, "data-dir", ".redrive", "where the private Postgres cluster keeps its data (env REDRIVE_DATA_DIR)")
	fs.Float64Var(&rate, "demo-rate", 5, "demo jobs enqueued per second")
	migrateURL := migrateURLFlag(fs)
	// Defaults that make a first look lively: all demo queues, quick retries.
	setDefaults(fs, map[string]string{
		"queues": "default,payments,emails", "retry-base": "500ms", "retry-cap": "10s", "shutdown-grace": "5s",
		// Retries of the demo traffic would bury the banner; dead letters still show.
		"log-level": "warn",
	})
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	logger, err := c.logger(stderr)
	if err != nil {
		return err
	}
	// Without REDRIVE_SESSION_KEYS, dev signs with a key of this process
	// only: a restart signs everyone out, which is fine on a laptop.
	auth, err := s.auth.config(true)
	if err != nil {
		return err
	}
	if c.databaseURL == "" {
		dir, err := filepath.Abs(filepath.Join(dataDir, "postgres"))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Starting a private PostgreSQL for %s ...\n", dir)
		cluster, err := localpg.Start(ctx, localpg.Config{Dir: dir, Port: 54329, Durable: true})
		if err != nil {
			return err
		}
		if why := cluster.Moved(); why != "" {
			fmt.Fprintf(stdout, "%s.\n", why)
		}
		fmt.Fprintf(stdout, "PostgreSQL data: %s\n", cluster.Dir())
		defer func() {
			if err := cluster.Stop(); err != nil {
				logger.Error("stop postgres", "err", err)
			}
		}()
		if err := ensureDatabase(ctx, cluster.DSN("postgres"), "redrive"); err != nil {
			return err
		}
		c.databaseURL = cluster.DSN("redrive")
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := migrate(ctx, db, *migrateURL, logger); err != nil {
		return err
	}
	listen, err := w.listenDSN(ctx, db, c.databaseURL, logger)
	if err != nil {
		return err
	}
	store := dlq.NewStore(db)
	reg := worker.NewRegistry()
	demo.Register(reg, db)
	// Register the demo tasks before the producer starts, so its first
	// enqueue does not race the worker's start-up.
	if err := store.RegisterTasks(ctx, reg.Tasks()); err != nil {
		return err
	}
	adminPassword, err := ensureDevAdmin(ctx, store)
	if err != nil {
		return err
	}

	// One registry: the console's /metrics shows the worker's outcomes too.
	metrics := newMetricsRegistry()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return runConsole(gctx, console{flags: s, auth: auth, store: store, logger: logger, metrics: metrics}, func(url string) {
			fmt.Fprintf(stdout, "\nRedrive is running: %s\n", url)
			fmt.Fprintf(stdout, "Sign in as %s with the password %s (dev only: a new one each start).\n", devAdmin, adminPassword)
			fmt.Fprintf(stdout, "Database: %s\n", c.databaseURL)
			fmt.Fprintf(stdout, "Demo traffic: %.1f jobs/s on queues %s; dead letters appear within a minute.\n", rate, w.queues)
			fmt.Fprintf(stdout, "Press Ctrl-C to stop.\n\n")
		})
	})
	g.Go(func() error { return startWorker(gctx, store, reg, w.config(logger, listen, metrics)) })
	producer, err := demo.NewProducer(demo.ProducerConfig{Store: store, Rate: rate, Logger: logger})
	if err != nil {
		return err
	}
	g.Go(func() error { return producer.Run(gctx) })
	return g.Wait()
}

// ensureDatabase creates database name on the server if it does not exist.
func ensureDatabase(ctx context.Context, adminDSN, name string) error {
	admin, err := dlq.Open(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer admin.Close()
	var exists bool
	if err := admin.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("check database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// --- migrate, enqueue, seed ------------------------------------------------

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "Apply pending database migrations. Safe to run from several processes at\nonce: an advisory lock lets one migrate while the others wait.", stderr)
	var c common
	c.register(fs)
	migrateURL := migrateURLFlag(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	logger, err := c.logger(stderr)
	if err != nil {
		return err
	}
	if *migrateURL != "" {
		c.databaseURL = *migrateURL
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := migrate(ctx, db, "", logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema at version %d\n", v)
	return nil
}

func migrateURLFlag(fs *flag.FlagSet) *string {
	return fs.String("migrate-database-url", "", "a direct connection to Postgres for migrations, when DATABASE_URL goes through a transaction pooler (env REDRIVE_MIGRATE_DATABASE_URL)")
}

// migrate applies pending migrations over migrateURL when set, else over db;
// behind a transaction pooler it refuses and says what to do.
func migrate(ctx context.Context, db *sqlx.DB, migrateURL string, logger *slog.Logger) (int64, error) {
	if migrateURL != "" {
		direct, err := dlq.Open(ctx, migrateURL)
		if err != nil {
			return 0, fmt.Errorf("REDRIVE_MIGRATE_DATABASE_URL: %w", err)
		}
		defer direct.Close()
		db = direct
	}
	v, err := dlq.Migrate(ctx, db, logger)
	if errors.Is(err, dlq.ErrTransactionPooler) {
		return 0, fmt.Errorf("%w; set REDRIVE_MIGRATE_DATABASE_URL (--migrate-database-url) to one, for example past PgBouncer to Postgres itself", err)
	}
	return v, err
}

func runEnqueue(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", "Enqueue one job and print it as JSON. With --key, enqueueing the same key\nagain returns the first job instead of a new one.", stderr)
	var c common
	var p dlq.EnqueueParams
	var argsJSON, kwargsJSON string
	c.register(fs)
	fs.StringVar(&p.Task, "task", "", "task name (required)")
	fs.StringVar(&p.Queue, "queue", dlq.DefaultQueue, "queue")
	fs.StringVar(&argsJSON, "args", "[]", "positional arguments, a JSON array")
	fs.StringVar(&kwargsJSON, "kwargs", "{}", "keyword arguments, a JSON object")
	fs.StringVar(&p.IdempotencyKey, "key", "", "the producer's idempotency key")
	fs.IntVar(&p.MaxAttempts, "max-attempts", dlq.DefaultMaxAttempts, "attempts before the job is dead-lettered")
	fs.DurationVar(&p.Timeout, "timeout", 0, "limit on one attempt of this job, instead of its task's (0: the task's; a worker's --job-timeout still caps it)")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	if p.Task == "" {
		fs.Usage()
		return usagef("--task is required")
	}
	p.Args, p.Kwargs = json.RawMessage(argsJSON), json.RawMessage(kwargsJSON)
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := dlq.NewStore(db).Enqueue(ctx, p)
	if err != nil {
		return err
	}
	if res.Existing {
		fmt.Fprintf(stderr, "key %q was used before: returning existing job %d\n", p.IdempotencyKey, res.Job.ID)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res.Job)
}

func runSeed(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("seed", "Insert realistic synthetic dead letters in bulk, for benchmarks and demos.", stderr)
	var c common
	var n int
	c.register(fs)
	fs.IntVar(&n, "dead-letters", 0, "how many dead letters to insert (required)")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	if n <= 0 {
		fs.Usage()
		return usagef("--dead-letters must be a positive number")
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	inserted, err := dlq.NewStore(db).SeedDeadLetters(ctx, n, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "inserted %d dead letters in %s\n", inserted, time.Since(start).Round(time.Millisecond))
	return nil
}

// setDefaults changes flag defaults for one command (shown in its -h too).
func setDefaults(fs *flag.FlagSet, defaults map[string]string) {
	for name, v := range defaults {
		if err := fs.Set(name, v); err != nil {
			panic(fmt.Sprintf("bad default for -%s: %v", name, err)) // a programming error
		}
		fs.Lookup(name).DefValue = v
	}
}

// --- users and API tokens ---------------------------------------------------

// The access-control side of the binary: the console's sign-in flags, the
// user and token commands, the dev admin.

// authFlags are the console's access-control settings.
type authFlags struct {
	sessionKeys      string
	sessionLifetime  time.Duration
	sessionIdle      time.Duration
	trustedProxies   string
	authHeader       string
	proxyRoles       string
	proxyDefaultRole string
	metricsToken     string
	maskKeys         string
	maskPatterns     string
}

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.sessionKeys, "session-keys", "", "comma-separated hex keys that sign session cookies; the first signs, all verify; make one with `openssl rand -hex 32` (env REDRIVE_SESSION_KEYS; required by serve)")
	fs.DurationVar(&a.sessionLifetime, "session-lifetime", web.DefaultSessionLifetime, "a session ends this long after sign-in (env REDRIVE_SESSION_LIFETIME)")
	fs.DurationVar(&a.sessionIdle, "session-idle", web.DefaultSessionIdle, "a session ends after this long without a request (env REDRIVE_SESSION_IDLE)")
	fs.StringVar(&a.trustedProxies, "trusted-proxies", "", "CIDRs of reverse proxies whose X-Forwarded-* and auth header are believed (env REDRIVE_TRUSTED_PROXIES)")
	fs.StringVar(&a.authHeader, "auth-header", "", "header in which a trusted proxy names the signed-in user, e.g. X-Forwarded-Email (env REDRIVE_AUTH_HEADER; empty: no SSO)")
	fs.StringVar(&a.proxyRoles, "proxy-roles", "", "roles of SSO users: alice@x.com=admin,bob@x.com=operator (env REDRIVE_PROXY_ROLES)")
	fs.StringVar(&a.proxyDefaultRole, "proxy-default-role", string(dlq.RoleViewer), "role of SSO users not in --proxy-roles (env REDRIVE_PROXY_DEFAULT_ROLE)")
	fs.StringVar(&a.metricsToken, "metrics-token", "", "when set, /metrics requires Authorization: Bearer with this value (env REDRIVE_METRICS_TOKEN)")
	fs.StringVar(&a.maskKeys, "mask-keys", strings.Join(dlq.DefaultMaskKeys, ","), "argument keys whose values are hidden: comma-separated, case-insensitive substrings (env REDRIVE_MASK_KEYS)")
	a.registerMaskPatterns(fs)
}

// errNoSessionKey explains how to get the key serve refuses to start without.
var errNoSessionKey = errors.New("no session key: set REDRIVE_SESSION_KEYS (or --session-keys) to a secret hex key " +
	"of at least 32 bytes, for example the output of `openssl rand -hex 32`; keep it secret, and the same on every console instance")

// config builds the web settings. Outside dev a session key is required:
// an ephemeral one would sign everyone out at each restart and break
// sessions across instances, silently.
func (a *authFlags) config(dev bool) (web.AuthConfig, error) {
	keys, err := web.ParseSessionKeys(a.sessionKeys)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--session-keys: %w", err)
	}
	if len(keys) == 0 && !dev {
		return web.AuthConfig{}, errNoSessionKey
	}
	proxies, err := web.ParseTrustedProxies(a.trustedProxies)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--trusted-proxies: %w", err)
	}
	roles, err := web.ParseProxyRoles(a.proxyRoles)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--proxy-roles: %w", err)
	}
	role := dlq.Role(a.proxyDefaultRole)
	if !role.Valid() {
		return web.AuthConfig{}, usagef("--proxy-default-role must be viewer, operator or admin, not %q", a.proxyDefaultRole)
	}
	if a.authHeader != "" && len(proxies) == 0 {
		return web.AuthConfig{}, usagef("--auth-header needs --trusted-proxies: the header is believed only from those addresses")
	}
	return web.AuthConfig{
		SessionKeys: keys, SessionLifetime: a.sessionLifetime, SessionIdle: a.sessionIdle,
		TrustedProxies: proxies, AuthHeader: a.authHeader, ProxyRoles: roles, ProxyDefaultRole: role,
		MetricsToken: a.metricsToken, MaskKeys: dlq.ParseMaskKeys(a.maskKeys), MaskPatterns: dlq.ParseMaskPatterns(a.maskPatterns),
	}, nil
}

// adviseFirstAdmin logs how to create the first admin when there is
// nobody to sign in as. serve never creates users by itself.
func adviseFirstAdmin(ctx context.Context, store *dlq.Store, logger *slog.Logger) error {
	n, err := store.CountUsers(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		logger.Warn("no users yet: nobody can sign in. Create the first admin with " +
			"`redrive user add NAME --role admin` (it asks for the password)")
	}
	return nil
}

// devAdmin is the demo admin redrive dev signs in as.
const devAdmin = "admin"

// ensureDevAdmin gives the dev admin a fresh random password (creating the
// user the first time) and returns it, to be printed: a fixed password
// would work on every dev database anyone ever left reachable.
func ensureDevAdmin(ctx context.Context, store *dlq.Store) (string, error) {
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		return "", err
	}
	password := strings.TrimPrefix(secret, dlq.TokenPrefix)[:16]
	hash, err := dlq.HashPassword(devAdmin, password, 0)
	if err != nil {
		return "", err
	}
	actor, now := dlq.Actor{Name: "redrive dev"}, time.Now()
	_, err = store.SetPassword(ctx, devAdmin, hash, dlq.UserChange{Actor: actor, Now: now})
	if errors.Is(err, dlq.ErrNotFound) {
		_, err = store.CreateUser(ctx, dlq.NewUser{Name: devAdmin, Role: dlq.RoleAdmin, PasswordHash: hash, Actor: actor, Now: now})
	}
	if err != nil {
		return "", fmt.Errorf("dev admin: %w", err)
	}
	return password, nil
}

// --- user ------------------------------------------------------------------

const userUsage = `Usage:
  redrive user add NAME [--role viewer|operator|admin]   add a user (asks for the password)
  redrive user passwd NAME                               set a new password; ends their sessions
  redrive user role NAME --role ROLE                     change a user's role
  redrive user disable NAME                              stop a user signing in; ends their sessions and tokens
  redrive user enable NAME                               let a disabled user sign in again
  redrive user list                                      list users

Passwords are read from the terminal without echo, or from the first line
of standard input when it is not a terminal; never from a flag, which
would leave them in shell history and the process list.`

func runUser(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return userCommand{in: os.Stdin, getenv: getenv, stdout: stdout, stderr: stderr}.run(ctx, args)
}

// userCommand is `redrive user`, with its standard input made explicit.
type userCommand struct {
	in     io.Reader
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

func (u userCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(u.stderr, userUsage)
		return usagef("redrive user needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("user "+sub, userUsage, u.stderr)
	var c common
	c.register(fs)
	role := fs.String("role", "", "viewer, operator or admin")
	var name string
	if sub != "list" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(u.stderr, userUsage)
			return usagef("name the user first: redrive user %s NAME", sub)
		}
		name, args = args[0], args[1:]
	}
	if err := parse(fs, args, u.getenv); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	store := dlq.NewStore(db)
	change := dlq.UserChange{Actor: cliActor(u.getenv), Now: time.Now()}
	switch sub {
	case "add":
		r := dlq.Role(*role)
		if r == "" {
			r = dlq.RoleViewer
		}
		if !r.Valid() {
			return usagef("--role must be viewer, operator or admin, not %q", *role)
		}
		hash, err := u.newPassword(name)
		if err != nil {
			return err
		}
		if _, err := store.CreateUser(ctx, dlq.NewUser{Name: name, Role: r, PasswordHash: hash, Actor: change.Actor, Now: change.Now}); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "added %s (%s)\n", name, r)
	case "passwd":
		hash, err := u.newPassword(name)
		if err != nil {
			return err
		}
		if _, err := store.SetPassword(ctx, name, hash, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "set a new password for %s; their sessions have ended\n", name)
	case "role":
		if _, err := store.SetRole(ctx, name, dlq.Role(*role), change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "%s is now %s\n", name, *role)
	case "disable":
		if _, err := store.DisableUser(ctx, name, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "disabled %s; their sessions and tokens stopped working\n", name)
	case "enable":
		if _, err := store.EnableUser(ctx, name, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "enabled %s\n", name)
	case "list":
		return listUsers(ctx, store, u.stdout)
	default:
		fmt.Fprintln(u.stderr, userUsage)
		return usagef("unknown user subcommand %q", sub)
	}
	return nil
}

// newPassword reads a new password for name and hashes it: twice, without
// echo, from a terminal; one line from anything else (a pipe, a file).
func (u userCommand) newPassword(name string) ([]byte, error) {
	var pw string
	if f, ok := u.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(u.stderr, "New password for %s: ", name)
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(u.stderr, "Again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(again) {
			return nil, errors.New("the passwords differ; nothing changed")
		}
		pw = string(first)
	} else {
		line, err := bufio.NewReader(u.in).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return nil, errors.New("no password on standard input: type it at a terminal, or pipe it in (one line)")
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	hash, err := dlq.HashPassword(name, pw, 0)
	if err != nil {
		return nil, err
	}
	return hash, nil
}

func listUsers(ctx context.Context, store *dlq.Store, w io.Writer) error {
	users, err := store.Users(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tCREATED")
	for _, u := range users {
		status := "active"
		if !u.Active() {
			status = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, status, u.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// cliActor names the person at the terminal in the audit trail.
func cliActor(getenv func(string) string) dlq.Actor {
	if who := getenv("USER"); who != "" {
		return dlq.Actor{Name: "cli:" + who}
	}
	return dlq.Actor{Name: "cli"}
}

// --- token -----------------------------------------------------------------

const tokenUsage = `Usage:
  redrive token create --user NAME [--name LABEL]   print a new API token, once
  redrive token revoke ID|LABEL                     revoke a token
  redrive token list                                list active tokens

A token acts with its user's role: send it as Authorization: Bearer TOKEN.
Only its SHA-256 hash is stored, so it cannot be shown again.`

func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, tokenUsage)
		return usagef("redrive token needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("token "+sub, tokenUsage, stderr)
	var c common
	c.register(fs)
	user := fs.String("user", "", "the user the token acts as (create)")
	label := fs.String("name", "", "a label to recognise the token by (create; default: user and time)")
	var ref string
	if sub == "revoke" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(stderr, tokenUsage)
			return usagef("name the token: redrive token revoke ID|LABEL")
		}
		ref, args = args[0], args[1:]
	}
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	store := dlq.NewStore(db)
	actor := cliActor(getenv)
	switch sub {
	case "create":
		if *user == "" {
			return usagef("--user is required")
		}
		secret, err := dlq.NewTokenSecret()
		if err != nil {
			return err
		}
		t, err := store.CreateToken(ctx, dlq.NewToken{UserName: *user, Label: *label, Hash: dlq.HashToken(secret), Actor: actor, Now: time.Now()})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Token %d %q for %s. It is shown only now: store it somewhere safe.\n", t.ID, t.Label, t.UserName)
		fmt.Fprintln(stdout, secret)
	case "revoke":
		t, err := store.RevokeToken(ctx, ref, actor, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked token %d %q of %s\n", t.ID, t.Label, t.UserName)
	case "list":
		tokens, err := store.Tokens(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tLABEL\tUSER\tCREATED\tLAST USED")
		for _, t := range tokens {
			last := "never"
			if t.LastUsedAt != nil {
				last = t.LastUsedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.UserName, t.CreatedAt.UTC().Format(time.RFC3339), last)
		}
		return tw.Flush()
	default:
		fmt.Fprintln(stderr, tokenUsage)
		return usagef("unknown token subcommand %q", sub)
	}
	return nil
}

// --- audit verify and purge --------------------------------------------------

func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "Usage: redrive audit verify [flags]")
		return usagef("the audit command has one subcommand: verify")
	}
	fs := newFlagSet("audit verify", "Walk the audit trail in order, recomputing each entry's hash, and report\n"+
		"the first entry that was altered or whose predecessor is missing; print the\n"+
		"head it verified as head ID:HASH. A chain cannot prove where it ends: keep\n"+
		"copies of the head outside the database (the console logs it every few\n"+
		"minutes, /metrics has redrive_audit_head_id) and check the trail against\n"+
		"one with --expect-head, which fails when that entry is gone or differs.", stderr)
	var c common
	var expectHead string
	c.register(fs)
	fs.StringVar(&expectHead, "expect-head", "", "a head recorded earlier, ID:HASH (or a bare ID): the trail must still hold it")
	if err := parse(fs, args[1:], getenv); err != nil {
		return err
	}
	var expect *dlq.AuditHead
	if expectHead != "" {
		h, err := dlq.ParseAuditHead(expectHead)
		if err != nil {
			fs.Usage()
			return usagef("--expect-head: %v", err)
		}
		expect = &h
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := dlq.NewStore(db).VerifyAuditChain(ctx, expect)
	if err != nil {
		return err
	}
	if v.Problem != nil {
		return fmt.Errorf("audit trail broken after %d good entries: %s", v.Entries, v.Problem.Problem)
	}
	fmt.Fprintf(stdout, "audit trail intact: %d entries, every hash and link checks out\n", v.Entries)
	if expect != nil {
		fmt.Fprintf(stdout, "it holds the expected head %s\n", expect)
	}
	if v.Head.ID == 0 {
		fmt.Fprintln(stdout, "head none: the trail is empty")
	} else {
		fmt.Fprintf(stdout, "head %s\n", v.Head)
	}
	return nil
}

func runPurge(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("purge", "Retention. --older-than deletes dead letters replayed or discarded longer ago\n"+
		"than that (pending letters are never deleted; each batch is audited).\n"+
		"--processed-events-older-than forgets the event ids worker.ProcessOnce\n"+
		"recorded: past that age a redelivered event would apply again, so keep it\n"+
		"far longer than any redelivery takes (weeks). At least one is required.", stderr)
	var c common
	var olderThan, eventsOlderThan, actor string
	c.register(fs)
	fs.StringVar(&olderThan, "older-than", "", "letters' retention age, e.g. 30d, 12w or 720h")
	fs.StringVar(&eventsOlderThan, "processed-events-older-than", "", "processed event ids' retention age, e.g. 90d")
	fs.StringVar(&actor, "actor", "cli", "who is purging, for the audit trail")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	if olderThan == "" && eventsOlderThan == "" {
		fs.Usage()
		return usagef("give --older-than, --processed-events-older-than or both")
	}
	var letterAge, eventAge time.Duration
	for _, a := range []struct {
		flag, value string
		age         *time.Duration
	}{{"older-than", olderThan, &letterAge}, {"processed-events-older-than", eventsOlderThan, &eventAge}} {
		if a.value == "" {
			continue
		}
		age, err := parseAge(a.value)
		if err != nil {
			fs.Usage()
			return usagef("--%s: %v", a.flag, err)
		}
		*a.age = age
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	store := dlq.NewStore(db)
	if letterAge > 0 {
		n, err := store.PurgeSettled(ctx, dlq.PurgeParams{
			OlderThan: letterAge, Now: time.Now(), Actor: dlq.Actor{Name: actor, UserAgent: "redrive purge"},
		})
		fmt.Fprintf(stdout, "purged %d settled dead letters older than %s\n", n, olderThan)
		if err != nil {
			return err
		}
	}
	if eventAge > 0 {
		n, err := store.PurgeProcessedEvents(ctx, eventAge, time.Now())
		fmt.Fprintf(stdout, "purged %d processed event ids older than %s\n", n, eventsOlderThan)
		if err != nil {
			return err
		}
	}
	return nil
}

// parseAge reads a retention age: Go durations plus days (d) and weeks (w).
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("required")
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive age like 30d, 12w or 720h", s)
		}
		return d, nil
	}
	var n int
	if _, err := fmt.Sscanf(s[:len(s)-1], "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != s[:len(s)-1] {
		return 0, fmt.Errorf("%q is not a positive age like 30d, 12w or 720h", s)
	}
	return time.Duration(n) * unit, nil
}

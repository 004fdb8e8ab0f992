package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/access"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// devDefaults make a first look lively: all demo queues, quick retries.
var devDefaults = map[string]string{
	"addr": "127.0.0.1:8080", "queues": "default,payments,emails,webhooks", "retry-base": "500ms", "retry-cap": "10s", "shutdown-grace": "5s",
	// Retries of the demo traffic would bury the banner; dead letters are
	// counted on the terminal (devLog) and each one is in the log file.
	"log-level": "warn",
}

// The demo incident: a while after dev starts, the simulated payments
// provider goes down; it recovers by itself after devIncidentFor, or
// sooner when someone deploys the fix from the overview.
const (
	devIncidentAfter = 2 * time.Minute
	devIncidentFor   = 5 * time.Minute
)

// devSignInFile, in --data-dir, holds the console's URL, user and password
// of the running dev, for whoever lost the banner.
const devSignInFile = "sign-in.txt"

func runDev(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("dev", "Everything in one process for a first look: a private Postgres cluster\n(unless DATABASE_URL is set), migrations, the demo tasks, a demo producer\nthat keeps a realistic mix of jobs flowing, a worker and the console.\nWith --reset, remove the private cluster instead, wherever it lives.", e.stderr)
	register(fs, databaseOptions, consoleOptions, workerOptions, []string{"data-dir", "demo-rate", "migrate-database-url", "reset"})
	setDefaults(fs, devDefaults)
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	dataDir, err := filepath.Abs(f.str("data-dir"))
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if f.boolean("reset") {
		return resetDev(dataDir, e.stdout)
	}
	// Without REDRIVE_SESSION_KEYS, dev signs with a key of this process
	// only: a restart signs everyone out, which is fine on a laptop.
	ac, err := authConfig(f, true)
	if err != nil {
		return err
	}
	log, err := openDevLog(f, dataDir, e.stderr)
	if err != nil {
		return err
	}
	defer log.Close()
	databaseURL, stopPostgres := f.str("database-url"), func() error { return nil }
	if databaseURL == "" {
		cluster, err := startDevPostgres(ctx, dataDir, devPostgresPort, e.stdout)
		if err != nil {
			return err
		}
		databaseURL = cluster.DSN("redrive")
		stopPostgres = func() error {
			fmt.Fprintln(e.stdout, "Stopping PostgreSQL ...")
			if err := cluster.Stop(); err != nil {
				return fmt.Errorf("stop postgres: %w", err)
			}
			return nil
		}
	}
	err = serveDev(ctx, f, ac, dataDir, databaseURL, log, e)
	err = errors.Join(err, stopPostgres())
	// Ctrl-C during start-up cancels what was starting: that is stopping too.
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		return err
	}
	fmt.Fprintln(e.stdout, "Redrive dev stopped.")
	return nil
}

// serveDev migrates the database at databaseURL, readies the demo, and runs
// the console, the worker and the demo producer until ctx ends.
func serveDev(ctx context.Context, f flags, ac auth.Config, dataDir, databaseURL string, log *devLog, e env) error {
	logger := log.Logger()
	db, err := openDB(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := migrate(ctx, db, f.str("migrate-database-url"), logger); err != nil {
		return err
	}
	if err := demo.EnsureSchema(ctx, db); err != nil {
		return err
	}
	listen, err := listenDSN(ctx, f.str("listen-database-url"), db, databaseURL, logger)
	if err != nil {
		return err
	}
	reg := worker.NewRegistry()
	demo.Register(reg, db)
	// Register the demo tasks before the producer starts, so its first
	// enqueue does not race the worker's start-up.
	if err := queue.New(db, groups.New(db)).RegisterTasks(ctx, reg.Tasks()); err != nil {
		return err
	}
	password, err := ensureDevAdmin(ctx, access.New(db))
	if err != nil {
		return err
	}
	outages := demo.NewOutages(db, audit.New(db))
	incident := time.Now().Add(devIncidentAfter)
	if err := outages.Schedule(ctx, demo.PaymentsProvider, incident, incident.Add(devIncidentFor)); err != nil {
		return err
	}
	// One registry: the console's /metrics also shows the dev worker's job
	// outcomes and durations, as worker/metrics.go promises.
	metrics := newMetricsRegistry()
	srcs, err := parseSources(f.str("sources"), databaseURL, f.str("replay-secrets"))
	if err != nil {
		return err
	}
	console, err := NewConsole(ctx, ConsoleConfig{DB: db, Logger: logger, Registry: metrics, Auth: ac, Sources: srcs, RetainLetters: f.duration("retain-letters"),
		LogsURLTemplate: f.str("logs-url-template"), Notify: notifyConfig(f), Reads: readConfig(f, databaseURL),
		Demo: NewDemoOutage(outages)})
	if err != nil {
		return err
	}
	producer, err := demo.NewProducer(demo.ProducerConfig{Store: queue.New(db, groups.New(db)), Rate: f.float("demo-rate"), Logger: logger})
	if err != nil {
		return err
	}
	cfg := workerConfig(f, logger, listen)
	cfg.Registry = reg
	cfg.Metrics = metrics
	banner := devBanner{password: password, databaseURL: databaseURL, rate: f.float("demo-rate"), queues: f.str("queues"),
		incident: incident, signIn: filepath.Join(dataDir, devSignInFile), log: log.path, grace: f.duration("shutdown-grace")}
	// Serve says the URL once it listens; the terminal's goroutine prints
	// the banner then, and keeps the terminal until ctx ends.
	urls := make(chan string, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return console.Serve(gctx, f.str("addr"), func(url string) { urls <- url }) })
	g.Go(func() error { return RunWorker(gctx, db, cfg) })
	g.Go(func() error { return producer.Run(gctx) })
	g.Go(func() error { return runDevTerminal(gctx, urls, banner, log, e.stdout) })
	return g.Wait()
}

// runDevTerminal is dev's side of the terminal: once the console listens
// it prints the banner and writes the sign-in file, then a line a minute
// counting new dead letters (which name where the sign-in is, should the
// banner have scrolled off), and, when ctx ends, what is stopping.
func runDevTerminal(ctx context.Context, urls <-chan string, b devBanner, log *devLog, w io.Writer) error {
	var url string
	select {
	case <-ctx.Done():
		return nil
	case url = <-urls:
	}
	b.url = url
	// The banner is printed even when the file cannot be written: it holds
	// the same, and dev is still usable.
	if err := writeSignIn(b.signIn, url, b.password); err != nil {
		log.Logger().Error("write the sign-in file", "err", err)
		b.signIn = ""
	}
	b.print(w)
	log.summarise(ctx, w, devSummaryEvery, b.hint())
	fmt.Fprintf(w, "Stopping the console, the demo producer and the worker (jobs still running have %s to finish) ...\n", b.grace)
	return nil
}

// devBanner is what dev says once the console listens.
type devBanner struct {
	url, password, databaseURL string
	rate                       float64
	queues                     string
	incident                   time.Time
	signIn, log                string // files; signIn is "" when it could not be written
	grace                      time.Duration
}

func (b devBanner) print(w io.Writer) {
	fmt.Fprintf(w, "\nRedrive is running: %s\n", b.url)
	fmt.Fprintf(w, "Sign in as %s with the password %s (dev only: a new one each start).\n", devAdmin, b.password)
	if b.signIn != "" {
		fmt.Fprintf(w, "The sign-in is also in %s.\n", b.signIn)
	}
	fmt.Fprintf(w, "Database: %s\n", b.databaseURL)
	fmt.Fprintf(w, "Demo traffic: %.1f jobs/s on queues %s; dead letters appear within a minute, counted here once a minute, each in %s.\n",
		b.rate, b.queues, b.log)
	fmt.Fprintf(w, "Demo incident: the %s goes down at %s for %.0f minutes; the overview has the button that deploys the fix.\n",
		demo.PaymentsProvider, b.incident.UTC().Format("15:04 UTC"), devIncidentFor.Minutes())
	fmt.Fprintf(w, "Press Ctrl-C to stop.\n\n")
}

// hint ends each count of dead letters: where to look at them.
func (b devBanner) hint() string {
	if b.signIn == "" {
		return "console " + b.url
	}
	return fmt.Sprintf("console %s, sign-in in %s", b.url, b.signIn)
}

// writeSignIn writes the console's URL, user and password to path, mode
// 0600: through a new file renamed into place, so that a file left with a
// wider mode is replaced, not reused.
func writeSignIn(path, url, password string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".sign-in-*") // mode 0600
	if err != nil {
		return fmt.Errorf("sign-in file: %w", err)
	}
	_, err = fmt.Fprintf(tmp, "url: %s\nuser: %s\npassword: %s\n", url, devAdmin, password)
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("sign-in file: %w", err)
	}
	return nil
}

// NewDemoOutage shows the demo incident's outage of the payments provider
// in the console (ConsoleConfig.Demo), and deploys its fix.
func NewDemoOutage(outages *demo.Outages) web.DemoOutage { return demoOutage{outages} }

type demoOutage struct{ outages *demo.Outages }

func (d demoOutage) Outage(ctx context.Context) (web.DemoOutageState, bool, error) {
	o, ok, err := d.outages.Read(ctx, demo.PaymentsProvider)
	return web.DemoOutageState{Dependency: o.Dependency, From: o.From, Until: o.Until,
		Down: o.Down(), Scheduled: o.Now.Before(o.From)}, ok, err
}

func (d demoOutage) DeployFix(ctx context.Context, a dlq.Actor, now time.Time) error {
	return d.outages.DeployFix(ctx, demo.PaymentsProvider, a, now)
}

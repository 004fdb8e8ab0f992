package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// devDefaults make a first look lively: all demo queues, quick retries.
var devDefaults = map[string]string{
	"addr": "127.0.0.1:8080", "queues": "default,payments,emails,webhooks", "retry-base": "500ms", "retry-cap": "10s", "shutdown-grace": "5s",
	// Retries of the demo traffic would bury the banner; dead letters still show.
	"log-level": "warn",
}

// The demo incident: a while after dev starts, the simulated payments
// provider goes down; it recovers by itself after devIncidentFor, or
// sooner when someone deploys the fix from the overview.
const (
	devIncidentAfter = 2 * time.Minute
	devIncidentFor   = 5 * time.Minute
)

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
		return resetDev(ctx, dataDir, e.stdout)
	}
	logger, err := newLogger(f, e.stderr)
	if err != nil {
		return err
	}
	// Without REDRIVE_SESSION_KEYS, dev signs with a key of this process
	// only: a restart signs everyone out, which is fine on a laptop.
	auth, err := authConfig(f, true)
	if err != nil {
		return err
	}
	databaseURL := f.str("database-url")
	if databaseURL == "" {
		cluster, err := startDevPostgres(ctx, dataDir, devPostgresPort, e.stdout)
		if err != nil {
			return err
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				logger.Error("stop postgres", "err", err)
			}
		}()
		databaseURL = cluster.DSN("redrive")
	}
	db, err := openDB(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := migrate(ctx, db, f.str("migrate-database-url"), logger); err != nil {
		return err
	}
	listen, err := listenDSN(ctx, f.str("listen-database-url"), db, databaseURL, logger)
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
	outages := demo.NewOutages(db, store)
	incident := time.Now().Add(devIncidentAfter)
	if err := outages.Schedule(ctx, demo.PaymentsProvider, incident, incident.Add(devIncidentFor)); err != nil {
		return err
	}
	// One registry: the console's /metrics also shows the dev worker's job
	// outcomes and durations, as worker/metrics.go promises.
	metrics := newMetricsRegistry()
	console, err := NewConsole(ctx, ConsoleConfig{Store: store, Logger: logger, Registry: metrics, Auth: auth,
		LogsURLTemplate: f.str("logs-url-template"), Notify: notifyConfig(f), Reads: readConfig(f, databaseURL),
		Demo: NewDemoOutage(outages)})
	if err != nil {
		return err
	}
	producer, err := demo.NewProducer(demo.ProducerConfig{Store: store, Rate: f.float("demo-rate"), Logger: logger})
	if err != nil {
		return err
	}
	cfg := workerConfig(f, logger, listen)
	cfg.Registry = reg
	cfg.Metrics = metrics
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return console.Serve(gctx, f.str("addr"), func(url string) {
			printDevBanner(e.stdout, url, adminPassword, databaseURL, f.float("demo-rate"), f.str("queues"), incident)
		})
	})
	g.Go(func() error { return RunWorker(gctx, store, cfg) })
	g.Go(func() error { return producer.Run(gctx) })
	return g.Wait()
}

func printDevBanner(w io.Writer, url, password, databaseURL string, rate float64, queues string, incident time.Time) {
	fmt.Fprintf(w, "\nRedrive is running: %s\n", url)
	fmt.Fprintf(w, "Sign in as %s with the password %s (dev only: a new one each start).\n", devAdmin, password)
	fmt.Fprintf(w, "Database: %s\n", databaseURL)
	fmt.Fprintf(w, "Demo traffic: %.1f jobs/s on queues %s; dead letters appear within a minute.\n", rate, queues)
	fmt.Fprintf(w, "Demo incident: the %s goes down at %s for %.0f minutes; the overview has the button that deploys the fix.\n",
		demo.PaymentsProvider, incident.UTC().Format("15:04 UTC"), devIncidentFor.Minutes())
	fmt.Fprintf(w, "Press Ctrl-C to stop.\n\n")
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

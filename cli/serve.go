package cli

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/replayhook"
	"github.com/redrive/redrive/riversource"
	"github.com/redrive/redrive/store/access"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/outbox"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/sources"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/auth"
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
	srcs, err := parseSources(f.str("sources"), f.str("database-url"), f.str("replay-secrets"))
	if err != nil {
		return err
	}
	if err := adviseFirstAdmin(ctx, access.New(db), logger); err != nil {
		return err
	}
	c, err := NewConsole(ctx, ConsoleConfig{DB: db, Logger: logger, Registry: newMetricsRegistry(), Auth: auth,
		LogsURLTemplate: f.str("logs-url-template"), Notify: notifyConfig(f), Reads: readConfig(f, f.str("database-url")),
		Sources: srcs, RetainLetters: f.duration("retain-letters")})
	if err != nil {
		return err
	}
	return c.Serve(ctx, f.str("addr"), func(url string) { logger.Info("console listening", "url", url) })
}

// ConsoleConfig is what NewConsole needs.
type ConsoleConfig struct {
	// DB is the primary, from postgres.Open.
	DB     *sqlx.DB
	Logger *slog.Logger
	// Version shown in the header and /metrics; default Version().
	Version string
	// Registry collects the console's metrics; nil: a fresh one.
	Registry        *prometheus.Registry
	Auth            auth.Config
	LogsURLTemplate string
	// RunnerPollInterval is how often the bulk-operation runner looks for
	// work it was not woken for; zero: the runner's default.
	RunnerPollInterval time.Duration
	// Notify says where notifications go; zero: nowhere.
	Notify NotifyConfig
	// Reads names a read replica; zero: every read goes to DB.
	Reads ReadConfig
	// Demo is the demo incident's outage (`redrive dev` only); nil: none.
	Demo web.DemoOutage
	// Sources are the other systems whose letters the console takes in
	// (--sources); Redrive's own queue is always one.
	Sources []SourceConfig
	// RetainLetters is --retain-letters: the age past which settled
	// letters are purged every hour; zero: never by the console.
	RetainLetters time.Duration
}

// NotifyConfig is the console's webhook notifications.
type NotifyConfig struct {
	// WebhookURLs is REDRIVE_NOTIFY_WEBHOOK_URLS (notify.ParseEndpoints).
	WebhookURLs string
	// NewGroupWindow is notify.Config.NewGroupWindow; zero: its default.
	NewGroupWindow time.Duration
	// NewGroupGather is notify.Config.NewGroupGather; zero: its default.
	NewGroupGather time.Duration
	// PublicURL is where the links point; default http://Addr.
	PublicURL string
	// Addr is where the console listens, for the default PublicURL.
	Addr string
}

// ReadConfig is the console's read replica.
type ReadConfig struct {
	// ReplicaURL connects to a streaming replica; empty: none.
	ReplicaURL string
	// PrimaryURL is DB's connection URL, against which the lag is told.
	PrimaryURL string
	// MaxLag is the lag beyond which reads go to the primary.
	MaxLag time.Duration
}

func notifyConfig(f flags) NotifyConfig {
	return NotifyConfig{WebhookURLs: f.str("notify-webhook-urls"), NewGroupWindow: f.duration("notify-new-group-window"),
		NewGroupGather: f.duration("notify-new-group-gather"),
		PublicURL:      f.str("public-url"), Addr: f.str("addr")}
}

func readConfig(f flags, primaryURL string) ReadConfig {
	return ReadConfig{ReplicaURL: f.str("read-database-url"), PrimaryURL: primaryURL, MaxLag: f.duration("read-max-lag")}
}

// publicURL is where links to the console point: PublicURL, or else the
// address it listens on.
func (n NotifyConfig) publicURL() string {
	if n.PublicURL != "" {
		return n.PublicURL
	}
	host := cmp.Or(n.Addr, "localhost:8080")
	if strings.HasPrefix(host, ":") {
		host = "localhost" + host
	}
	return "http://" + host
}

// notifier builds the webhook sender.
func (n NotifyConfig) notifier(db *sqlx.DB, masker mask.Policy, logger *slog.Logger) (*notify.Sender, []string, error) {
	eps, err := notify.ParseEndpoints(n.WebhookURLs)
	if err != nil {
		return nil, nil, usagef("--notify-webhook-urls: %v", err)
	}
	public := n.publicURL()
	if n.PublicURL == "" && len(eps) > 0 {
		logger.Warn("REDRIVE_PUBLIC_URL is not set: notifications link to " + public)
	}
	hostname, _ := os.Hostname()
	g := groups.New(db)
	sender, err := notify.New(notify.Config{Outbox: outbox.New(db), Groups: g, Operations: operations.New(db, g), Pauses: queue.New(db, g),
		Endpoints: eps, Masker: masker, PublicURL: public, Logger: logger,
		Holder: fmt.Sprintf("%s:%d:%x", hostname, os.Getpid(), rand.Uint32()), NewGroupWindow: n.NewGroupWindow, NewGroupGather: n.NewGroupGather})
	if err != nil {
		return nil, nil, err
	}
	redacted := make([]string, len(eps))
	for i, e := range eps {
		redacted[i] = e.Redacted()
	}
	return sender, redacted, nil
}

// Console is the console as `redrive serve` builds it: the HTTP handler,
// and the bulk-operation runner, the audit head's log line, the search
// upkeep, the notification sender and the read replica's watch that run
// beside it. `serve`, `dev` and the browser tests build it
// here, so they test what runs.
type Console struct {
	// Handler is the console's HTTP handler.
	Handler  http.Handler
	runner   *replay.Runner
	rebuild  func(context.Context)
	notifier *notify.Sender
	replica  *postgres.Replica
	// rivers import and retry the River sources' jobs; closeRivers closes
	// their connections.
	rivers      []*riversource.Source
	closeRivers func()
	cfg         ConsoleConfig
}

// NewConsole stores the mask settings and builds the console.
func NewConsole(ctx context.Context, cfg ConsoleConfig) (*Console, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = Version()
	}
	g := groups.New(cfg.DB)
	srcStore := sources.New(cfg.DB, g)
	configured := make([]dlq.Source, len(cfg.Sources))
	for i, s := range cfg.Sources {
		configured[i] = s.Source
	}
	if err := srcStore.Configure(ctx, configured); err != nil {
		return nil, err
	}
	rebuild, err := applyMaskPolicy(ctx, letters.New(cfg.DB), cfg.Auth, cfg.Logger)
	if err != nil {
		return nil, err
	}
	m, err := masker(cfg.Auth)
	if err != nil {
		return nil, err
	}
	notifier, endpoints, err := cfg.Notify.notifier(cfg.DB, m, cfg.Logger)
	if err != nil {
		return nil, err
	}
	var replica *postgres.Replica
	if cfg.Reads.ReplicaURL != "" {
		replica, err = postgres.OpenReplica(ctx, postgres.ReplicaConfig{ReplicaURL: cfg.Reads.ReplicaURL, PrimaryURL: cfg.Reads.PrimaryURL,
			Primary: cfg.DB, MaxLag: cfg.Reads.MaxLag, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("REDRIVE_READ_DATABASE_URL: %w", err)
		}
	}
	rivers, closeRivers, err := riverSources(ctx, cfg, srcStore)
	if err != nil {
		if replica != nil {
			replica.Close()
		}
		return nil, err
	}
	reach := map[string]dlq.ReplaySender{}
	for _, r := range rivers {
		reach[r.Name()] = r
	}
	for _, src := range cfg.Sources {
		if src.ReplayURL == nil {
			continue
		}
		hook, err := replayhook.New(replayhook.Config{Source: src.Name, URL: *src.ReplayURL, Secret: src.ReplaySecret,
			ConsoleURL: cfg.Notify.publicURL(), Letters: letters.New(cfg.DB)})
		if err != nil {
			closeRivers()
			if replica != nil {
				replica.Close()
			}
			return nil, err
		}
		reach[src.Name] = hook
	}
	ops := operations.New(cfg.DB, g).WithSources(reach)
	runner := replay.NewRunner(replay.RunnerConfig{Store: ops, Logger: cfg.Logger, PollInterval: cfg.RunnerPollInterval})
	handler, err := web.NewServer(web.Config{
		DB: cfg.DB, Logger: cfg.Logger, Version: cfg.Version, Registry: cfg.Registry, Replica: replica,
		LogsURLTemplate: cfg.LogsURLTemplate, Auth: cfg.Auth, NotifyEndpoints: endpoints, Demo: cfg.Demo,
		Replay:        replay.NewService(replay.Config{Store: ops, Workers: queue.New(cfg.DB, g), Logger: cfg.Logger, Wake: runner.Wake}),
		RetainLetters: cfg.RetainLetters,
		BannerWindow:  web.BannerWindow,
	})
	if err != nil {
		if replica != nil {
			replica.Close()
		}
		closeRivers()
		return nil, err
	}
	return &Console{Handler: handler, runner: runner, rebuild: rebuild, notifier: notifier, replica: replica,
		rivers: rivers, closeRivers: closeRivers, cfg: cfg}, nil
}

// Run runs what works beside the HTTP handler until ctx ends: the
// bulk-operation runner, the audit head's log line, the search upkeep, the
// notification sender, the read replica's watch and the River sources'
// importers; then it closes the replica's and River's connections.
func (c *Console) Run(ctx context.Context) error {
	if c.replica != nil {
		defer c.replica.Close()
	}
	defer c.closeRivers()
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range c.rivers {
		g.Go(func() error { return r.Run(gctx) })
	}
	g.Go(func() error { return c.runner.Run(gctx) })
	g.Go(func() error { return c.notifier.Run(gctx) })
	if c.replica != nil {
		g.Go(func() error { return c.replica.Run(gctx) })
	}
	// The audit head in the log: a copy of where the chain ends, out of
	// reach of whoever could cut it short in the database.
	g.Go(func() error {
		return web.LogAuditHead(gctx, web.AuditHeadLogConfig{Source: audit.New(c.cfg.DB), Logger: c.cfg.Logger})
	})
	g.Go(func() error { c.rebuild(gctx); return nil })
	retention := &replay.Retention{Store: operations.New(c.cfg.DB, groups.New(c.cfg.DB)), RetainFor: c.cfg.RetainLetters, Logger: c.cfg.Logger}
	g.Go(func() error { return retention.Run(gctx) })
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

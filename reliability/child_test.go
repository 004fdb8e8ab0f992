package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// childEnv makes the test binary run one worker instead of the tests, so a
// suite can kill it; the other REDRIVE_REL_* variables configure it.
const childEnv = "REDRIVE_RELIABILITY_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
	case "migrate":
		os.Exit(runMigrate())
	default:
		os.Exit(runChild())
	}
	os.Exit(storetest.Main(m))
}

// The tasks every child registers.
const (
	taskEffect       = "rel.effect"        // a ProcessOnce-guarded, versioned effect
	taskSleep        = "rel.sleep"         // sleeps kwargs.ms, stopping when cancelled
	taskPanic        = "rel.panic"         // panics
	taskOverrun      = "rel.overrun"       // outlives its 300 ms timeout, then stops when cancelled
	taskIgnoreCancel = "rel.ignore_cancel" // outlives its timeout and ignores cancellation
	taskKill         = "rel.kill"          // kills its own worker process at every pick-up
	taskNoop         = "rel.noop"
)

// seedTasks are the tasks of storetest.SeedDeadLetters' letters; children
// run them as no-ops, so that replayed letters have somewhere to go.
var seedTasks = []string{"billing.charge", "email.send", "reports.generate", "search.index", "webhooks.deliver",
	"images.resize", "orders.sync", "crm.push", "sms.send", "ledger.post", "exports.build", "inventory.reserve"}

func allTasks() []string {
	return append([]string{taskEffect, taskSleep, taskPanic, taskOverrun, taskIgnoreCancel, taskKill, taskNoop}, seedTasks...)
}

// effectTablesSQL makes the tables rel.effect writes: every delivery, every
// applied effect (no unique key, so a double application would show), every
// duplicate ProcessOnce suppressed, and the versioned state per account.
const effectTablesSQL = `
CREATE TABLE IF NOT EXISTS rel_deliveries (event text NOT NULL, worker text NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS rel_effects (event text NOT NULL, account int NOT NULL, version int NOT NULL);
CREATE TABLE IF NOT EXISTS rel_suppressed (event text NOT NULL);
CREATE TABLE IF NOT EXISTS rel_accounts (id int PRIMARY KEY, version int NOT NULL);`

type effectArgs struct {
	Event   string `json:"event"`
	Account int    `json:"account"`
	Version int    `json:"version"`
	MS      int    `json:"ms"`
}

// runChild runs a worker against REDRIVE_REL_DSN until SIGTERM.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db, err := openRetrying(ctx, os.Getenv("REDRIVE_REL_DSN"))
	if err != nil {
		logger.Error("child: open database", "err", err)
		return 2
	}
	defer db.Close()
	id := os.Getenv("REDRIVE_REL_ID")
	reg := worker.NewRegistry()
	registerChildTasks(reg, db, id)
	ms := func(name string, def int) time.Duration {
		n, err := strconv.Atoi(os.Getenv(name))
		if err != nil {
			n = def
		}
		return time.Duration(n) * time.Millisecond
	}
	conc, _ := strconv.Atoi(os.Getenv("REDRIVE_REL_CONCURRENCY"))
	var queues []string
	if q := os.Getenv("REDRIVE_REL_QUEUES"); q != "" {
		queues = strings.Split(q, ",")
	}
	lease := ms("REDRIVE_REL_LEASE_MS", 2000)
	w, err := worker.New(storetest.NewStores(db).Queue, worker.Config{
		Registry: reg, ID: id, Queues: queues, Concurrency: conc,
		LeaseDuration: lease, HeartbeatInterval: lease / 5,
		PollInterval: 50 * time.Millisecond, RescueInterval: 100 * time.Millisecond,
		// A few heartbeats: the suites' clusters are fresh, and the restart
		// suite needs the grace to outlast one heartbeat after each restart.
		RestartGrace:  3 * lease / 5,
		ShutdownGrace: ms("REDRIVE_REL_GRACE_MS", 2000), DefaultTimeout: 30 * time.Second,
		RetryPolicy: worker.RetryPolicy{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
		Logger:      logger, Version: "reliability", ListenDSN: os.Getenv("REDRIVE_REL_DSN"),
	})
	if err != nil {
		logger.Error("child: new worker", "err", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		logger.Error("child: run", "err", err)
		return 1
	}
	return 0
}

// runMigrate migrates REDRIVE_REL_DSN as `redrive migrate` does.
func runMigrate() int {
	ctx := context.Background()
	db, err := postgres.Open(ctx, os.Getenv("REDRIVE_REL_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		return 1
	}
	defer db.Close()
	if _, err := postgres.Migrate(ctx, db, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		return 1
	}
	return 0
}

// openRetrying opens the database, waiting out a restart in progress: a
// worker restarted by the driver may start while Postgres is down.
func openRetrying(ctx context.Context, dsn string) (*sqlx.DB, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := postgres.Open(ctx, dsn)
		if err == nil || time.Now().After(deadline) {
			return db, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func registerChildTasks(reg *worker.Registry, db *sqlx.DB, workerID string) {
	reg.Register(taskEffect, func(ctx context.Context, job *worker.Job) error {
		var a effectArgs
		if err := json.Unmarshal(job.Kwargs, &a); err != nil {
			return worker.Permanent(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO rel_deliveries (event, worker) VALUES ($1, $2)`, a.Event, workerID); err != nil {
			return fmt.Errorf("record delivery: %w", err)
		}
		applied, err := worker.ProcessOnce(ctx, db, "rel:"+a.Event, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rel_effects (event, account, version) VALUES ($1, $2, $3)`,
				a.Event, a.Account, a.Version); err != nil {
				return err
			}
			// The version guard: an older event delivered late never
			// overwrites a newer one.
			if _, err := tx.ExecContext(ctx, `INSERT INTO rel_accounts (id, version) VALUES ($1, $2)
				ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version WHERE rel_accounts.version < EXCLUDED.version`,
				a.Account, a.Version); err != nil {
				return err
			}
			// Work inside the transaction widens the window in which a
			// SIGKILL lands between the effect and the acknowledgement.
			return sleepCtx(ctx, time.Duration(a.MS)*time.Millisecond)
		})
		if err != nil {
			return err
		}
		if !applied {
			if _, err := db.ExecContext(ctx, `INSERT INTO rel_suppressed (event) VALUES ($1)`, a.Event); err != nil {
				return fmt.Errorf("record suppressed duplicate: %w", err)
			}
		}
		return nil
	}, worker.TaskOptions{})
	reg.Register(taskSleep, func(ctx context.Context, job *worker.Job) error {
		var a effectArgs
		if err := json.Unmarshal(job.Kwargs, &a); err != nil {
			return worker.Permanent(err)
		}
		return sleepCtx(ctx, time.Duration(a.MS)*time.Millisecond)
	}, worker.TaskOptions{Timeout: 10 * time.Minute})
	reg.Register(taskPanic, func(ctx context.Context, job *worker.Job) error {
		panic("poison: this task always panics")
	}, worker.TaskOptions{})
	reg.Register(taskOverrun, func(ctx context.Context, job *worker.Job) error {
		return sleepCtx(ctx, time.Minute)
	}, worker.TaskOptions{Timeout: 300 * time.Millisecond})
	reg.Register(taskIgnoreCancel, func(ctx context.Context, job *worker.Job) error {
		time.Sleep(time.Minute) // on purpose: a minute of work, deliberately deaf to ctx, that outlives its timeout
		return nil
	}, worker.TaskOptions{Timeout: 300 * time.Millisecond})
	reg.Register(taskKill, func(ctx context.Context, job *worker.Job) error {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		<-ctx.Done()
		return ctx.Err()
	}, worker.TaskOptions{})
	noop := func(ctx context.Context, job *worker.Job) error { return nil }
	reg.Register(taskNoop, noop, worker.TaskOptions{})
	for _, name := range seedTasks {
		reg.Register(name, noop, worker.TaskOptions{})
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sleep interrupted: %w", ctx.Err())
	}
}

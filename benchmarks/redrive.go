package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/worker"
)

// redriveEngine drives Redrive through worker.New, worker.Config,
// worker.Registry and the dlq store's enqueue functions: whatever engine
// the main module holds when the benchmark runs.
type redriveEngine struct{}

// The Redrive task names of the benchmark's jobs.
const (
	redriveNoop    = "bench.noop"
	redriveFail    = "bench.fail"
	redriveLatency = "bench.latency"
)

func (redriveEngine) Name() string { return "Redrive" }

func (redriveEngine) Migrate(ctx context.Context, dsn string) error {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := postgres.Migrate(ctx, db, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("migrate redrive: %w", err)
	}
	// Enqueue refuses tasks no worker has registered; register them now so
	// a template's copies can take jobs before any worker starts.
	if err := queue.New(db, groups.New(db)).RegisterTasks(ctx, []string{redriveNoop, redriveFail, redriveLatency}); err != nil {
		return fmt.Errorf("register benchmark tasks: %w", err)
	}
	return nil
}

func (redriveEngine) Enqueue(ctx context.Context, dsn string, kind jobKind, n, batch int) error {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	store := queue.New(db, groups.New(db))
	p := dlq.EnqueueParams{Task: redriveNoop}
	if kind == kindFail {
		p = dlq.EnqueueParams{Task: redriveFail, MaxAttempts: 1}
	}
	params := make([]dlq.EnqueueParams, 0, batch)
	for done := 0; done < n; done += len(params) {
		params = params[:0]
		for range min(batch, n-done) {
			params = append(params, p)
		}
		if _, err := store.EnqueueMany(ctx, params); err != nil {
			return fmt.Errorf("redrive enqueue: %w", err)
		}
	}
	return nil
}

// unfinishedRedriveSQL uses the (state, queue, id) index; finished jobs
// may be deleted by retention, so what counts is what is left to do.
const unfinishedRedriveSQL = `SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('available', 'retrying', 'running'))`

func (redriveEngine) Unfinished(ctx context.Context, db *pgxpool.Pool) (bool, error) {
	var any bool
	if err := db.QueryRow(ctx, unfinishedRedriveSQL).Scan(&any); err != nil {
		return false, fmt.Errorf("redrive unfinished jobs: %w", err)
	}
	return any, nil
}

// redriveRegistry holds the benchmark's handlers: a no-op, and a failure
// that no retry could fix; each logs logLines lines first, through
// worker.Logger, or when plain through a slog text logger of its own that
// writes them nowhere (what the lines cost without being kept).
func redriveRegistry(logLines int, plain bool) *worker.Registry {
	plainLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	logSome := func(ctx context.Context, job *worker.Job) {
		if logLines == 0 {
			return
		}
		log := worker.Logger(ctx)
		if plain {
			log = plainLog.With("job_id", job.ID, "task", job.Task, "queue", job.Queue, "attempt", job.Attempt)
		}
		for i := range logLines {
			log.Info("bench job working", "job", job.ID, "line", i)
		}
	}
	reg := worker.NewRegistry()
	reg.Register(redriveNoop, func(ctx context.Context, job *worker.Job) error {
		logSome(ctx, job)
		return nil
	}, worker.TaskOptions{})
	reg.Register(redriveFail, func(ctx context.Context, job *worker.Job) error {
		logSome(ctx, job)
		return worker.Permanent(errors.New(failMessage))
	}, worker.TaskOptions{})
	return reg
}

func (redriveEngine) Worker(ctx context.Context, dsn string, p Profile) (func(context.Context) error, func(), error) {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg := p.Redrive
	cfg.Registry = redriveRegistry(p.JobLogLines, p.JobLogPlain)
	w, err := worker.New(queue.New(db, groups.New(db)), cfg)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("redrive worker: %w", err)
	}
	return w.Run, func() { db.Close() }, nil
}

func (redriveEngine) Latency(ctx context.Context, dsn string, samples int, gap time.Duration) ([]time.Duration, error) {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	started := make(chan time.Time, 1)
	reg := worker.NewRegistry()
	reg.Register(redriveLatency, func(context.Context, *worker.Job) error {
		started <- time.Now()
		return nil
	}, worker.TaskOptions{})
	cfg := defaultProfile().Redrive
	cfg.Registry, cfg.ListenDSN = reg, dsn
	store := queue.New(db, groups.New(db))
	w, err := worker.New(store, cfg)
	if err != nil {
		return nil, fmt.Errorf("redrive worker: %w", err)
	}
	return latencyLoop(ctx, w.Run, samples, gap, started, func(ctx context.Context) error {
		_, err := store.Enqueue(ctx, dlq.EnqueueParams{Task: redriveLatency})
		return err
	})
}

// misjudgedRedriveSQL: the letters recorded as what they were.
const misjudgedRedriveSQL = `SELECT count(*) FROM dead_letters
	WHERE task = $1 AND reason = 'permanent' AND position($2 IN error_message) > 0`

func (redriveEngine) Misjudged(ctx context.Context, db *pgxpool.Pool, n int) (int64, error) {
	var right int64
	if err := db.QueryRow(ctx, misjudgedRedriveSQL, redriveFail, failMessage).Scan(&right); err != nil {
		return 0, fmt.Errorf("redrive misjudged letters: %w", err)
	}
	return int64(n) - right, nil
}

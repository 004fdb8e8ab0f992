package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverEngine drives River 0.51.2 through its public API: rivermigrate,
// InsertManyFast, a Client with one queue.
type riverEngine struct{}

// riverStopTimeout bounds a River client's graceful stop.
const riverStopTimeout = 30 * time.Second

type riverNoopArgs struct{}

func (riverNoopArgs) Kind() string { return "bench_noop" }

type riverFailArgs struct{}

func (riverFailArgs) Kind() string { return "bench_fail" }

type riverLatencyArgs struct{}

func (riverLatencyArgs) Kind() string { return "bench_latency" }

type riverNoopWorker struct {
	river.WorkerDefaults[riverNoopArgs]
}

func (*riverNoopWorker) Work(context.Context, *river.Job[riverNoopArgs]) error { return nil }

// riverFailWorker cancels its job: River's word for a permanent failure,
// like worker.Permanent.
type riverFailWorker struct {
	river.WorkerDefaults[riverFailArgs]
}

func (*riverFailWorker) Work(context.Context, *river.Job[riverFailArgs]) error {
	return river.JobCancel(fmt.Errorf("%s", failMessage))
}

type riverLatencyWorker struct {
	river.WorkerDefaults[riverLatencyArgs]
	started chan<- time.Time
}

func (w *riverLatencyWorker) Work(context.Context, *river.Job[riverLatencyArgs]) error {
	w.started <- time.Now()
	return nil
}

func (riverEngine) Name() string { return "River" }

// riverLogger keeps River's warnings and errors, on stderr.
func riverLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func riverPool(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("river pool: %w", err)
	}
	if conns > 0 {
		cfg.MaxConns = int32(conns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("river pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river pool: %w", err)
	}
	return pool, nil
}

func (riverEngine) Migrate(ctx context.Context, dsn string) error {
	pool, err := riverPool(ctx, dsn, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: riverLogger()})
	if err != nil {
		return fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("rivermigrate: %w", err)
	}
	return nil
}

func (riverEngine) Enqueue(ctx context.Context, dsn string, kind jobKind, n, batch int) error {
	pool, err := riverPool(ctx, dsn, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	// An insert-only client: no queues, no workers.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: riverLogger()})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	p := river.InsertManyParams{Args: riverNoopArgs{}}
	if kind == kindFail {
		p = river.InsertManyParams{Args: riverFailArgs{}, InsertOpts: &river.InsertOpts{MaxAttempts: 1}}
	}
	params := make([]river.InsertManyParams, 0, batch)
	for done := 0; done < n; done += len(params) {
		params = params[:0]
		for range min(batch, n-done) {
			params = append(params, p)
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("river enqueue: %w", err)
		}
	}
	return nil
}

// unfinishedRiverSQL: every state short of finalized.
const unfinishedRiverSQL = `SELECT EXISTS (SELECT 1 FROM river_job
	WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))`

func (riverEngine) Unfinished(ctx context.Context, db *pgxpool.Pool) (bool, error) {
	var any bool
	if err := db.QueryRow(ctx, unfinishedRiverSQL).Scan(&any); err != nil {
		return false, fmt.Errorf("river unfinished jobs: %w", err)
	}
	return any, nil
}

// riverClient builds a working client on pool with the given workers.
func riverClient(pool *pgxpool.Pool, workers *river.Workers, maxWorkers int) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  riverLogger(),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

// riverRun starts client and works until ctx ends, then stops it
// gracefully: River's Start takes a context whose end is a hard stop, so
// it gets one that outlives ctx.
func riverRun(client *river.Client[pgx.Tx]) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("river start: %w", err)
		}
		<-ctx.Done()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), riverStopTimeout)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			return fmt.Errorf("river stop: %w", err)
		}
		return nil
	}
}

func (riverEngine) Worker(ctx context.Context, dsn string, p Profile) (func(context.Context) error, func(), error) {
	pool, err := riverPool(ctx, dsn, p.RiverPoolConns)
	if err != nil {
		return nil, nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverNoopWorker{})
	river.AddWorker(workers, &riverFailWorker{})
	client, err := riverClient(pool, workers, p.RiverMaxWorkers)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return riverRun(client), pool.Close, nil
}

func (riverEngine) Latency(ctx context.Context, dsn string, samples int, gap time.Duration) ([]time.Duration, error) {
	p := defaultProfile()
	pool, err := riverPool(ctx, dsn, p.RiverPoolConns)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	started := make(chan time.Time, 1)
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverLatencyWorker{started: started})
	client, err := riverClient(pool, workers, p.RiverMaxWorkers)
	if err != nil {
		return nil, err
	}
	return latencyLoop(ctx, riverRun(client), samples, gap, started, func(ctx context.Context) error {
		_, err := client.Insert(ctx, riverLatencyArgs{}, nil)
		return err
	})
}

// misjudgedRiverSQL: the jobs recorded as what they were, cancelled with
// the handler's error.
const misjudgedRiverSQL = `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'cancelled'
	AND errors[array_upper(errors, 1)]->>'error' = 'JobCancelError: ' || $2`

func (riverEngine) Misjudged(ctx context.Context, db *pgxpool.Pool, n int) (int64, error) {
	var right int64
	if err := db.QueryRow(ctx, misjudgedRiverSQL, riverFailArgs{}.Kind(), failMessage).Scan(&right); err != nil {
		return 0, fmt.Errorf("river misjudged jobs: %w", err)
	}
	return int64(n) - right, nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"
)

// River UI v0.22.0 is the console River users run. The console step puts
// it beside Redrive's on the same cluster: River's tables hold as many
// discarded jobs as Redrive's hold letters, built from the letters Redrive
// seeded (same tasks, queues, arguments, messages and tracebacks, one River
// error per attempt), and its JSON API — what its single-page UI calls —
// is timed with the same client, one request at a time, alternating with
// Redrive's requests.

// riverUIVersion is printed in the table's labels.
const riverUIVersion = "River UI v0.22.0"

// riverUISampleSQL reads the letters River's jobs are copied from: a
// spread of ids, so the mix of tasks and messages is the seed's. The
// history is json (00101_letters.sql); River's converted jobs take it
// as jsonb.
const riverUISampleSQL = `SELECT task, queue, args, kwargs, error_class, error_message, traceback,
	history::jsonb AS history, attempts, max_attempts, enqueued_at, failed_at
FROM dead_letters WHERE id % 997 = 0 ORDER BY id LIMIT $1`

// riverUISampleSize letters are sampled; River's jobs cycle through them.
const riverUISampleSize = 2_000

// riverUIJobsSQL turns the sampled letters into River jobs, once per
// sample: the letter's arguments (kwargs merged in, as River has one args
// object), and an error per attempt of its history with the attempt's
// message and traceback, the final one's being the letter's.
const riverUIJobsSQL = `
CREATE TEMP TABLE bench_jobs AS
SELECT n, task AS kind, queue, greatest(attempts, 1) AS attempt, greatest(max_attempts, attempts, 1) AS max_attempts,
	jsonb_build_object('args', args) || coalesce(kwargs, '{}'::jsonb) AS args,
	ARRAY(SELECT jsonb_build_object('at', coalesce(e->>'at', failed_at::text), 'attempt', ord,
			'error', coalesce(e->>'class', error_class) || ': ' || coalesce(e->>'message', error_message),
			'trace', CASE WHEN ord = jsonb_array_length(history) THEN traceback ELSE coalesce(e->>'traceback', '') END)
		FROM jsonb_array_elements(history) WITH ORDINALITY AS h(e, ord)) AS errors
FROM bench_sample`

// riverUIFillSQL makes $1 discarded River jobs from the converted sample,
// oldest first as the seed's letters are, spread over the last 30 days.
// The sample's values are copied as they are (already compressed), so a
// million jobs take a minute or two, not the seed's minutes.
const riverUIFillSQL = `
INSERT INTO river_job (state, attempt, max_attempts, attempted_at, attempted_by, created_at, finalized_at,
	scheduled_at, priority, args, errors, kind, metadata, queue, tags)
SELECT 'discarded', j.attempt, j.max_attempts, t.at, ARRAY['worker-' || (g % 8)],
	t.at - interval '1 minute', t.at, t.at - interval '1 minute', 1, j.args, j.errors, j.kind, '{}'::jsonb, j.queue, '{}'
FROM generate_series(1, $1::bigint) g
JOIN bench_jobs j ON j.n = g % $2::bigint
CROSS JOIN LATERAL (SELECT now() - (($1::bigint - g) * interval '30 days' / $1::bigint) AS at) t`

// riverUIData builds River's database for the console step once, from the
// letters of letterDB, and reuses it in later rounds: River UI only reads
// it, so every round sees the same rows.
func (s *suite) riverUIData(ctx context.Context, letterDB *pgxpool.Pool) (string, error) {
	if s.riverUIDB != "" {
		return s.riverUIDB, nil
	}
	start := time.Now()
	name, err := s.c.createDB(ctx, "river_console", s.templates[riverEngine{}.Name()].base)
	if err != nil {
		return "", err
	}
	if err := fillRiverUI(ctx, s.c.dsn(name), letterDB, s.sizes.Letters); err != nil {
		_ = s.c.dropDB(context.WithoutCancel(ctx), name)
		return "", err
	}
	if err := s.c.vacuum(ctx, name); err != nil {
		return "", err
	}
	s.riverUIDB = name
	s.log.Info("River UI's jobs ready", "jobs", s.sizes.Letters, "took", time.Since(start).Round(time.Millisecond))
	return name, nil
}

func fillRiverUI(ctx context.Context, dsn string, letterDB *pgxpool.Pool, n int) error {
	rows, err := letterDB.Query(ctx, riverUISampleSQL, riverUISampleSize)
	if err != nil {
		return fmt.Errorf("sample letters for River: %w", err)
	}
	var sample [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return fmt.Errorf("sample letters for River: %w", err)
		}
		sample = append(sample, append([]any{int64(len(sample))}, vals...))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sample letters for River: %w", err)
	}
	if len(sample) == 0 {
		return errors.New("sample letters for River: no letters")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("fill River's jobs: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE bench_sample (n bigint, task text, queue text, args jsonb,
		kwargs jsonb, error_class text, error_message text, traceback text, history jsonb, attempts int,
		max_attempts int, enqueued_at timestamptz, failed_at timestamptz)`); err != nil {
		return fmt.Errorf("fill River's jobs: %w", err)
	}
	cols := []string{"n", "task", "queue", "args", "kwargs", "error_class", "error_message", "traceback",
		"history", "attempts", "max_attempts", "enqueued_at", "failed_at"}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_sample"}, cols, pgx.CopyFromRows(sample)); err != nil {
		return fmt.Errorf("fill River's jobs: sample: %w", err)
	}
	if _, err := conn.Exec(ctx, riverUIJobsSQL); err != nil {
		return fmt.Errorf("fill River's jobs: convert the sample: %w", err)
	}
	if _, err := conn.Exec(ctx, riverUIFillSQL, n, len(sample)); err != nil {
		return fmt.Errorf("fill River's jobs: %w", err)
	}
	return nil
}

// riverUIJob picks the job River UI's detail shows: one half way down, as
// detailLetter does.
func riverUIJob(ctx context.Context, db *pgxpool.Pool, jobs int) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `SELECT id FROM river_job ORDER BY id DESC LIMIT 1 OFFSET $1`, jobs/2).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("pick a River job: %w", err)
	}
	return id, nil
}

// serveRiverUI starts River UI on dsn in a child process (this binary,
// re-executed as `riverui`), like `redrive serve` a process of its own,
// and waits until its health check answers.
func (s *suite) serveRiverUI(ctx context.Context, dsn string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc, err := startProcess("River UI", s.self, []string{"riverui", "--dsn", dsn, "--addr", addr},
		nil, nil, io.Discard, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	srv := &server{proc: proc, base: "http://" + addr, client: benchClient()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := srv.get(ctx, "/api/health-checks/complete"); err == nil {
			return srv, nil
		} else if time.Now().After(deadline) {
			srv.close()
			return nil, fmt.Errorf("river ui not ready within 30s: %w", err)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			srv.close()
			return nil, err
		}
	}
}

// runRiverUI is the `riverui` child: River UI's handler as its
// documentation mounts it (an insert-only River client, NewEndpoints,
// NewHandler, Start), on an http.Server on addr, until SIGTERM.
func runRiverUI(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("riverui", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "River's database")
	addr := fs.String("addr", "", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pool, err := riverPool(ctx, *dsn, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	logger := riverLogger()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(client, nil), Logger: logger})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("river ui: %w", err)
	}
	return nil
}

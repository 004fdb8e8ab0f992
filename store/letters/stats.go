package letters

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

const statusCountsSQL = `
SELECT status, COALESCE(sum(n), 0)::bigint AS n FROM dead_letter_counts GROUP BY status`

// inflowSQL reads letters per UTC hour from $1 up to $2 from the totals
// that 00101_letters.sql keeps: one row per hour, whatever the number of
// fingerprints. Days are summed from these hours in Go.
const inflowSQL = `
SELECT hour AS bucket, n FROM dead_letter_inflow_totals
WHERE hour >= $1 AND hour < $2`

const topTasksSQL = `
SELECT task, sum(n)::bigint AS pending FROM dead_letter_counts
WHERE status = 'pending' GROUP BY task HAVING sum(n) > 0
ORDER BY 2 DESC, 1 LIMIT $1`

const workerStatusSQL = `
SELECT id, host, pid, version, queues, tasks, concurrency, in_flight, started_at, heartbeat_at,
	(extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS age_ms
FROM workers ORDER BY host, started_at, id`

// Overview reads the front page's numbers in one read-only, repeatable-read
// transaction, so the counts, charts and rankings agree with each other.
func (s *Store) Overview(ctx context.Context) (dlq.Overview, error) {
	var o dlq.Overview
	err := postgres.ReadOnly(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := tx.GetContext(ctx, &o.Now, `SELECT now()`); err != nil {
			return fmt.Errorf("clock: %w", err)
		}
		var err error
		if o.DeadLetters, err = statusCounts(ctx, tx); err != nil {
			return err
		}
		if o.Jobs, err = queue.JobCounts(ctx, tx, dlq.OverviewCountCap); err != nil {
			return err
		}
		if o.Hourly, o.Daily, err = inflow(ctx, tx, o.Now); err != nil {
			return err
		}
		if err := tx.SelectContext(ctx, &o.TopTasks, topTasksSQL, dlq.OverviewLimit); err != nil {
			return fmt.Errorf("top tasks: %w", err)
		}
		o.Workers, err = workerStatuses(ctx, tx)
		return err
	})
	if err != nil {
		return dlq.Overview{}, fmt.Errorf("overview: %w", err)
	}
	return o, nil
}

// WorkerStatuses lists registered workers with the age of their heartbeat.
func (s *Store) WorkerStatuses(ctx context.Context) ([]dlq.WorkerStatus, error) {
	ws, err := workerStatuses(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

func statusCounts(ctx context.Context, q sqlx.QueryerContext) (dlq.StatusCounts, error) {
	var rows []struct {
		Status dlq.Status `db:"status"`
		N      int64      `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, statusCountsSQL); err != nil {
		return dlq.StatusCounts{}, fmt.Errorf("dead-letter counts: %w", err)
	}
	var c dlq.StatusCounts
	for _, r := range rows {
		switch r.Status {
		case dlq.StatusPending:
			c.Pending = r.N
		case dlq.StatusReplayed:
			c.Replayed = r.N
		case dlq.StatusDiscarded:
			c.Discarded = r.N
		}
	}
	return c, nil
}

// inflow returns the letters per hour of the 24 hours and per UTC day of
// the 14 days that end with the ones holding now, oldest first.
func inflow(ctx context.Context, q sqlx.QueryerContext, now time.Time) (hourly, daily []dlq.InflowBucket, err error) {
	hourEnd := now.UTC().Truncate(time.Hour).Add(time.Hour)
	dayEnd := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	dayStart := dayEnd.Add(-14 * 24 * time.Hour)
	// The 14 days end no earlier and start no later than the 24 hours, so
	// one read of the days holds every hour both charts need.
	var got []dlq.InflowBucket
	if err := sqlx.SelectContext(ctx, q, &got, inflowSQL, dayStart, dayEnd); err != nil {
		return nil, nil, fmt.Errorf("inflow: %w", err)
	}
	hourly = dlq.Bucketize(got, hourEnd.Add(-24*time.Hour), hourEnd, time.Hour)
	daily = dlq.Bucketize(got, dayStart, dayEnd, 24*time.Hour)
	return hourly, daily, nil
}

func workerStatuses(ctx context.Context, q sqlx.QueryerContext) ([]dlq.WorkerStatus, error) {
	var ws []dlq.WorkerStatus
	if err := sqlx.SelectContext(ctx, q, &ws, workerStatusSQL); err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	for i := range ws {
		ws[i].HeartbeatAge = time.Duration(ws[i].AgeMS) * time.Millisecond
	}
	return ws, nil
}

const deadLetterCountsSQL = `
SELECT task, queue, status, n FROM dead_letter_counts ORDER BY task, queue, status`

// activeJobCountsSQL counts waiting and running jobs by queue and state.
// Waiting jobs sit in one range of jobs_state_queue_idx per state; running
// ones, which that index leaves out, in jobs_running_lease_idx.
const activeJobCountsSQL = `
SELECT queue, state, count(*) AS n, false AS capped FROM jobs
WHERE state IN ('available', 'retrying') GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*), false FROM jobs
WHERE state = 'running' GROUP BY queue, state
ORDER BY queue, state`

// MetricsSnapshot reads the domain gauges in one snapshot.
func (s *Store) MetricsSnapshot(ctx context.Context) (dlq.MetricsSnapshot, error) {
	var m dlq.MetricsSnapshot
	err := postgres.ReadOnly(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := tx.SelectContext(ctx, &m.DeadLetters, deadLetterCountsSQL); err != nil {
			return fmt.Errorf("dead-letter counts: %w", err)
		}
		if err := tx.SelectContext(ctx, &m.Jobs, activeJobCountsSQL); err != nil {
			return fmt.Errorf("job counts: %w", err)
		}
		var err error
		if m.Succeeded, err = queue.ReadSucceededKept(ctx, tx); err != nil {
			return err
		}
		m.Workers, err = workerStatuses(ctx, tx)
		return err
	})
	if err != nil {
		return dlq.MetricsSnapshot{}, fmt.Errorf("metrics snapshot: %w", err)
	}
	return m, nil
}

package dlq

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// cleanerLockKey names the advisory lock that lets one cleaner at a time
// delete, across every worker process on the database. It is taken per
// transaction (pg_try_advisory_xact_lock), never held across statements,
// so it works through a transaction-pooling PgBouncer.
const cleanerLockKey = 0x7265647269766501 // "redrive" + 1

// deleteSucceededSQL deletes the oldest cleanable jobs that finished before
// $1, at most $2, reading them from jobs_cleanable_idx in finished_at
// order (migration 00013): succeeded jobs that no letter links to.
// Replays (replay_of set) are kept for as long as their letter is, and
// dead jobs for as long as theirs; neither is in the index. SKIP LOCKED
// leaves alone a row something else holds.
const deleteSucceededSQL = `
DELETE FROM jobs WHERE id = ANY(ARRAY(
	SELECT id FROM jobs
	WHERE state = 'succeeded' AND replay_of IS NULL AND finished_at < $1
	ORDER BY finished_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
))`

// DeleteSucceeded deletes up to limit succeeded jobs that finished before
// cutoff, oldest first, in one transaction. It returns how many it
// deleted, and busy when another cleaner held the lock and nothing was
// done.
func (s *Store) DeleteSucceeded(ctx context.Context, cutoff time.Time, limit int) (deleted int, busy bool, err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: begin: %w", err)
	}
	defer tx.Rollback()
	var locked bool
	if err := tx.GetContext(ctx, &locked, `SELECT pg_try_advisory_xact_lock($1)`, int64(cleanerLockKey)); err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: lock: %w", err)
	}
	if !locked {
		return 0, true, nil
	}
	res, err := tx.ExecContext(ctx, deleteSucceededSQL, cutoff, limit)
	if err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: commit: %w", err)
	}
	return int(n), false, nil
}

// SucceededKept describes the succeeded jobs the cleaner may still delete.
type SucceededKept struct {
	// Estimate is Postgres's own count of them (pg_class.reltuples of
	// jobs_cleanable_idx, refreshed by autovacuum and ANALYZE): an exact
	// count would read millions of rows on every page view.
	Estimate int64
	// Oldest is when the oldest of them finished; zero when there is none.
	Oldest time.Time
}

const succeededKeptSQL = `
SELECT GREATEST(COALESCE((SELECT reltuples FROM pg_class WHERE relname = 'jobs_cleanable_idx'), 0), 0)::bigint AS estimate,
	(SELECT min(finished_at) FROM jobs WHERE state = 'succeeded' AND replay_of IS NULL) AS oldest`

// SucceededKept reads how many succeeded jobs are kept, roughly, and the
// oldest one's finishing time.
func (s *Store) SucceededKept(ctx context.Context) (SucceededKept, error) {
	return succeededKept(ctx, s.db)
}

func succeededKept(ctx context.Context, q sqlx.QueryerContext) (SucceededKept, error) {
	var row struct {
		Estimate int64        `db:"estimate"`
		Oldest   sql.NullTime `db:"oldest"`
	}
	if err := sqlx.GetContext(ctx, q, &row, succeededKeptSQL); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return SucceededKept{}, fmt.Errorf("succeeded jobs kept: %w", err)
	}
	return SucceededKept{Estimate: row.Estimate, Oldest: row.Oldest.Time}, nil
}

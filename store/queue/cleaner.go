package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
)

// cleanerLockKey names the advisory lock that lets one cleaner at a time
// delete, across every worker process on the database. It is taken per
// transaction (pg_try_advisory_xact_lock), never held across statements,
// so it works through a transaction-pooling PgBouncer.
const cleanerLockKey = 0x7265647269766501

// deleteSucceededSQL deletes at most $2 cleanable jobs that finished
// before $1: succeeded jobs that no letter links to, which is what
// jobs_succeeded_idx holds (00100_queue.sql). Replays (replay_of set) are
// kept for as long as their letter is, and dead jobs for as long as
// theirs; neither is in the index.
//
// The index is ordered for the console, by id within each (queue, task)
// pair, not by finished_at, so the delete walks each pair's range from its
// oldest id (in the index's own order, succeededIndexOrderASC), reading finished_at from the index (INCLUDE), up to $3, the
// first id created after the cutoff (succeededBoundSQL): a job created
// after it cannot have finished before it. Between the start of a range
// and the bound a walk reads, besides what it deletes, only the jobs
// created before the cutoff that finished after it (a job scheduled or
// backlogged for longer than the retention), until they too are old
// enough.
//
// The walk does not lock the rows it reads (FOR UPDATE would read the heap
// for every one); the DELETE re-checks each row on its newest version, so
// a job that changed since is left alone.
const deleteSucceededSQL = `
WITH RECURSIVE ` + succeededPairsCTE + `
DELETE FROM jobs
WHERE id = ANY(ARRAY(
	SELECT d.id FROM succeeded_pairs p
	CROSS JOIN LATERAL (
		SELECT j.id FROM jobs j
		WHERE j.state = 'succeeded' AND j.replay_of IS NULL AND j.queue = p.queue AND j.task = p.task
			AND j.id < $3 AND j.finished_at < $1
		` + succeededIndexOrderASC + ` LIMIT $2
	) d
	LIMIT $2
)) AND state = 'succeeded' AND replay_of IS NULL AND finished_at < $1`

// succeededBoundSQL finds the first job created at or after $1, by a
// binary search of the primary key (a few dozen probes): ids follow
// creation closely, as both come from the enqueuing statement. A job
// whose id is out of creation order by a moment is deleted by a later
// pass rather than this one; none is deleted before its time, as the
// delete checks finished_at itself. It is read before the delete, not
// inside it, so that the planner knows the range it bounds: as an
// unknown it once chose the primary key over jobs_succeeded_idx.
const succeededBoundSQL = `
WITH RECURSIVE bound(lo, hi) AS (
	SELECT coalesce(min(id), 0), coalesce(max(id), 0) + 1 FROM jobs
	UNION ALL
	SELECT CASE WHEN m.created_at < $1 THEN b.lo + (b.hi - b.lo) / 2 + 1 ELSE b.lo END,
		CASE WHEN m.created_at < $1 THEN b.hi ELSE b.lo + (b.hi - b.lo) / 2 END
	FROM bound b
	CROSS JOIN LATERAL (SELECT created_at FROM jobs WHERE id >= b.lo + (b.hi - b.lo) / 2 ORDER BY id LIMIT 1) m
	WHERE b.lo < b.hi
)
SELECT max(lo) FROM bound`

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
	var bound int64
	if err := tx.GetContext(ctx, &bound, succeededBoundSQL, cutoff); err != nil {
		return 0, false, fmt.Errorf("delete succeeded jobs: bound: %w", err)
	}
	res, err := tx.ExecContext(ctx, deleteSucceededSQL, cutoff, limit, bound)
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

const succeededKeptSQL = `
WITH RECURSIVE ` + succeededPairsCTE + `
SELECT GREATEST(COALESCE((SELECT reltuples FROM pg_class WHERE relname = 'jobs_succeeded_idx'), 0), 0)::bigint AS estimate,
	(SELECT min(o.finished_at) FROM succeeded_pairs p
	 CROSS JOIN LATERAL (
		SELECT j.finished_at FROM jobs j
		WHERE j.state = 'succeeded' AND j.replay_of IS NULL AND j.queue = p.queue AND j.task = p.task
		` + succeededIndexOrderASC + ` LIMIT 100
	 ) o) AS oldest`

// SucceededKept reads how many succeeded jobs are kept, roughly, and the
// oldest one's finishing time.
func (s *Store) SucceededKept(ctx context.Context) (dlq.SucceededKept, error) {
	return ReadSucceededKept(ctx, s.db)
}

// ReadSucceededKept reads how many succeeded jobs are kept, and the
// oldest, with q (a transaction of a snapshot, or the pool).
func ReadSucceededKept(ctx context.Context, q sqlx.QueryerContext) (dlq.SucceededKept, error) {
	var row struct {
		Estimate int64        `db:"estimate"`
		Oldest   sql.NullTime `db:"oldest"`
	}
	if err := sqlx.GetContext(ctx, q, &row, succeededKeptSQL); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return dlq.SucceededKept{}, fmt.Errorf("succeeded jobs kept: %w", err)
	}
	return dlq.SucceededKept{Estimate: row.Estimate, Oldest: row.Oldest.Time}, nil
}

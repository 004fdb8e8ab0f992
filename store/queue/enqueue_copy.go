package queue

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/store/postgres"
)

// copyMinBatch is the smallest batch enqueueByCopy takes. COPY costs two
// more round trips than the one INSERT (the reservation of ids, and the
// COPY's own start), which a handful of rows does not win back.
const copyMinBatch = 64

// reserveJobIDsSQL checks the batch's tasks, draws one id per job from the
// jobs' identity sequence, in order, and reads the transaction's clock, in
// one round trip. The ids are drawn before the rows exist because COPY
// returns none; nextval never hands out an id twice, so the reservation is
// safe beside any other writer, and a batch that fails leaves a gap, as a
// failed INSERT does.
const reserveJobIDsSQL = `
SELECT ARRAY(SELECT name FROM tasks WHERE name = ANY($1)),
	ARRAY(SELECT nextval(` + postgres.JobsSequenceSQL + `) FROM generate_series(1, $2)),
	now()`

// copyJobsSQL names the columns enqueueByCopy writes; the others take
// their defaults (created_at is now(), as run_at is when not given).
// copyPlainJobsSQL is the same for a batch in which no job sets run_at or
// a timeout: fewer values to encode and parse per row.
const (
	copyJobsSQL      = `COPY jobs (id, queue, task, args, kwargs, max_attempts, run_at, timeout_ms) FROM STDIN`
	copyPlainJobsSQL = `COPY jobs (id, queue, task, args, kwargs, max_attempts) FROM STDIN`
)

// copyTx returns q's transaction when q is one: lib/pq runs COPY only
// inside a transaction. It returns nil otherwise.
func copyTx(q sqlx.ExtContext) *sql.Tx {
	if tx, ok := q.(*sqlx.Tx); ok {
		return tx.Tx
	}
	return nil
}

// enqueueByCopy inserts a batch without idempotency keys with COPY, which
// Postgres writes several rows per heap page and WAL record at a time,
// and which parses no arrays and sorts nothing, unlike INSERT ... SELECT
// FROM unnest. Without keys there is no conflict to resolve, so nothing is
// lost by COPY having no ON CONFLICT, and the ids are known in advance
// (reserveJobIDsSQL), in input order. The statement-level trigger that
// notifies idle workers fires for COPY as for INSERT.
//
// A job without a run_at gets the transaction's now(), the very value the
// column's default gives it (and does give it when no job of the batch
// sets one). COPY works behind PgBouncer in
// transaction mode: it runs inside the caller's transaction, which keeps
// its server connection throughout.
func enqueueByCopy(ctx context.Context, tx *sql.Tx, b *batch) ([]int64, error) {
	var ids []int64
	var knownTasks []string
	var now time.Time
	err := tx.QueryRowContext(ctx, reserveJobIDsSQL, pq.Array(b.tasks), b.n).Scan(pq.Array(&knownTasks), pq.Array(&ids), &now)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: reserve ids: %w", postgres.Translate(err))
	}
	if t, ok := unknownTask(b.tasks, knownTasks); ok {
		return nil, unknownTaskError(ctx, tx, t)
	}
	if len(ids) != b.n {
		return nil, fmt.Errorf("enqueue batch: reserved %d ids for %d jobs", len(ids), b.n)
	}
	plain := b.plain()
	query := copyJobsSQL
	if plain {
		query = copyPlainJobsSQL
	}
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: copy: %w", postgres.Translate(err))
	}
	defer stmt.Close()
	rows := postgres.NewCopyRows(stmt)
	for i := range b.n {
		rows.Int(ids[i])
		rows.Text(b.queues[i])
		rows.Text(b.taskOf[i])
		rows.Text(b.args[i])
		rows.Text(b.kwargs[i])
		rows.Int(b.maxAttempts[i])
		if !plain {
			runAt := now
			if !b.runAts[i].IsZero() {
				runAt = b.runAts[i]
			}
			rows.Time(runAt)
			if b.timeouts[i] > 0 {
				rows.Int(b.timeouts[i])
			} else {
				rows.Null()
			}
		}
		if err := rows.EndRow(ctx); err != nil {
			return nil, fmt.Errorf("enqueue batch: copy: %w", postgres.Translate(err))
		}
	}
	if err := rows.Finish(ctx); err != nil {
		return nil, fmt.Errorf("enqueue batch: copy: %w", postgres.Translate(err))
	}
	return ids, nil
}

// plain reports whether no job of b sets run_at or a timeout: both columns
// can then be left to their defaults.
func (b *batch) plain() bool {
	for i := range b.n {
		if !b.runAts[i].IsZero() || b.timeouts[i] > 0 {
			return false
		}
	}
	return true
}

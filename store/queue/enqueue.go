package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

const insertJobSQL = `
INSERT INTO jobs (queue, task, args, kwargs, idempotency_key, max_attempts, run_at, replay_of, timeout_ms)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, COALESCE($7, now()), $8, NULLIF($9::bigint, 0))
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING ` + JobColumns

const jobByKeySQL = `SELECT ` + JobColumns + ` FROM jobs WHERE idempotency_key = $1`

const knownTasksSQL = `SELECT name FROM tasks WHERE name = ANY($1)`

// Enqueue inserts one job using q, which may be the producer's own
// transaction: the job then exists exactly when the producer's work commits.
// A second enqueue with the same idempotency key returns the first job with
// Existing set. A task no worker has ever registered is refused, so a typo
// cannot leave a job waiting forever.
func Enqueue(ctx context.Context, q sqlx.ExtContext, p dlq.EnqueueParams) (dlq.EnqueueResult, error) {
	p, err := p.Normalise()
	if err != nil {
		return dlq.EnqueueResult{}, err
	}
	if err := checkTasksKnown(ctx, q, []string{p.Task}); err != nil {
		return dlq.EnqueueResult{}, err
	}
	var runAt *time.Time
	if !p.RunAt.IsZero() {
		runAt = &p.RunAt
	}
	var job dlq.Job
	err = sqlx.GetContext(ctx, q, &job, insertJobSQL,
		p.Queue, p.Task, []byte(p.Args), []byte(p.Kwargs), p.IdempotencyKey, p.MaxAttempts, runAt, p.ReplayOf,
		p.Timeout.Milliseconds())
	if err == nil {
		return dlq.EnqueueResult{Job: job}, nil
	}
	if postgres.Translate(err) != dlq.ErrNotFound || p.IdempotencyKey == "" {
		return dlq.EnqueueResult{}, fmt.Errorf("enqueue %s: %w", p.Task, postgres.Translate(err))
	}
	// The key was taken: the insert did nothing and returned no row.
	if err := sqlx.GetContext(ctx, q, &job, jobByKeySQL, p.IdempotencyKey); err != nil {
		return dlq.EnqueueResult{}, fmt.Errorf("enqueue %s: find job by key: %w", p.Task, postgres.Translate(err))
	}
	return dlq.EnqueueResult{Job: job, Existing: true}, nil
}

func checkTasksKnown(ctx context.Context, q sqlx.QueryerContext, tasks []string) error {
	var known []string
	if err := sqlx.SelectContext(ctx, q, &known, knownTasksSQL, pq.Array(tasks)); err != nil {
		return fmt.Errorf("check tasks: %w", err)
	}
	if t, ok := unknownTask(tasks, known); ok {
		return unknownTaskError(ctx, q, t)
	}
	return nil
}

// unknownTask returns the first of tasks missing from known.
func unknownTask(tasks, known []string) (string, bool) {
	seen := make(map[string]bool, len(known))
	for _, k := range known {
		seen[k] = true
	}
	for _, t := range tasks {
		if !seen[t] {
			return t, true
		}
	}
	return "", false
}

const insertJobsSQL = `
INSERT INTO jobs (queue, task, args, kwargs, idempotency_key, max_attempts, run_at, timeout_ms)
SELECT queue, task, args, kwargs, NULLIF(key, ''), max_attempts, COALESCE(run_at, now()), NULLIF(timeout_ms, 0)
FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::jsonb[], $5::text[], $6::int[], $7::timestamptz[], $8::bigint[])
	WITH ORDINALITY AS t(queue, task, args, kwargs, key, max_attempts, run_at, timeout_ms, ord)
ORDER BY ord
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, COALESCE(idempotency_key, '')`

const jobIDsByKeysSQL = `SELECT id, idempotency_key FROM jobs WHERE idempotency_key = ANY($1)`

// EnqueueMany inserts up to MaxBatch jobs in one statement through q. Either
// every job is valid and all are enqueued, or nothing is and the error names
// the first bad one. It returns one job id per input, in input order; an
// input whose idempotency key was used before gets the earlier job's id.
//
// A batch of at least copyMinBatch jobs without idempotency keys, enqueued
// in a transaction (q is a *sqlx.Tx, as in Store.EnqueueMany), goes in
// with COPY instead; see enqueueByCopy.
func EnqueueMany(ctx context.Context, q sqlx.ExtContext, params []dlq.EnqueueParams) ([]int64, error) {
	b, err := newBatch(params)
	if err != nil {
		return nil, err
	}
	if tx := copyTx(q); tx != nil && b.keyless && b.n >= copyMinBatch {
		return enqueueByCopy(ctx, tx, b)
	}
	if err := checkTasksKnown(ctx, q, b.tasks); err != nil {
		return nil, err
	}
	rows, err := q.QueryxContext(ctx, insertJobsSQL, pq.Array(b.queues), pq.Array(b.taskOf), pq.Array(b.args),
		pq.Array(b.kwargs), pq.Array(b.keys), pq.Array(b.maxAttempts), pq.Array(b.runAtText()), pq.Array(b.timeouts))
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", postgres.Translate(err))
	}
	byKey := map[string]int64{}
	var inserted []int64
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("enqueue batch: %w", err)
		}
		if key != "" {
			byKey[key] = id
		} else {
			inserted = append(inserted, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", postgres.Translate(err))
	}
	rows.Close()
	if err := fillExistingKeys(ctx, q, b.keys, byKey); err != nil {
		return nil, err
	}
	// RETURNING follows insertion order, which follows ord, so keyless ids
	// line up with keyless inputs in order.
	ids := make([]int64, b.n)
	next := 0
	for i, k := range b.keys {
		if k != "" {
			ids[i] = byKey[k]
			continue
		}
		ids[i] = inserted[next]
		next++
	}
	return ids, nil
}

// batch is a validated EnqueueMany input, column by column.
type batch struct {
	n                                  int
	queues, taskOf, args, kwargs, keys []string
	maxAttempts, timeouts              []int64
	runAts                             []time.Time // zero: now
	tasks                              []string    // distinct
	keyless                            bool
}

// newBatch normalises and validates params, naming the first bad job.
func newBatch(params []dlq.EnqueueParams) (*batch, error) {
	if len(params) == 0 {
		return nil, &dlq.ValidationError{Fields: map[string]string{"jobs": "must not be empty"}}
	}
	if len(params) > dlq.MaxBatch {
		return nil, &dlq.ValidationError{Fields: map[string]string{"jobs": fmt.Sprintf("at most %d jobs per batch", dlq.MaxBatch)}}
	}
	n := len(params)
	b := &batch{n: n, queues: make([]string, n), taskOf: make([]string, n), args: make([]string, n),
		kwargs: make([]string, n), keys: make([]string, n), maxAttempts: make([]int64, n), timeouts: make([]int64, n),
		runAts: make([]time.Time, n), keyless: true}
	taskSet := map[string]bool{}
	for i, p := range params {
		p, err := p.Normalise()
		if err != nil {
			ve := err.(*dlq.ValidationError)
			fields := make(map[string]string, len(ve.Fields))
			for k, v := range ve.Fields {
				fields[fmt.Sprintf("jobs[%d].%s", i, k)] = v
			}
			return nil, &dlq.ValidationError{Fields: fields}
		}
		b.queues[i], b.taskOf[i], b.args[i], b.kwargs[i], b.keys[i] = p.Queue, p.Task, string(p.Args), string(p.Kwargs), p.IdempotencyKey
		b.maxAttempts[i], b.timeouts[i], b.runAts[i] = int64(p.MaxAttempts), p.Timeout.Milliseconds(), p.RunAt
		if p.IdempotencyKey != "" {
			b.keyless = false
		}
		if !taskSet[p.Task] {
			taskSet[p.Task] = true
			b.tasks = append(b.tasks, p.Task)
		}
	}
	return b, nil
}

// runAtText is run_at for unnest: NULL (now) or the time as text.
func (b *batch) runAtText() []*string {
	out := make([]*string, b.n)
	for i, t := range b.runAts {
		if !t.IsZero() {
			s := t.UTC().Format(time.RFC3339Nano)
			out[i] = &s
		}
	}
	return out
}

// fillExistingKeys looks up the jobs of keys that the batch insert skipped
// because they were used before.
func fillExistingKeys(ctx context.Context, q sqlx.QueryerContext, keys []string, byKey map[string]int64) error {
	var missing []string
	for _, k := range keys {
		if k != "" && byKey[k] == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := q.QueryxContext(ctx, jobIDsByKeysSQL, pq.Array(missing))
	if err != nil {
		return fmt.Errorf("enqueue batch: find existing keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return fmt.Errorf("enqueue batch: %w", err)
		}
		byKey[key] = id
	}
	return rows.Err()
}

// Enqueue inserts one job in its own transaction; see the package-level Enqueue.
func (s *Store) Enqueue(ctx context.Context, p dlq.EnqueueParams) (dlq.EnqueueResult, error) {
	return Enqueue(ctx, s.db, p)
}

// EnqueueMany inserts a batch all or nothing in one transaction.
func (s *Store) EnqueueMany(ctx context.Context, params []dlq.EnqueueParams) ([]int64, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: begin: %w", err)
	}
	defer tx.Rollback()
	ids, err := EnqueueMany(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("enqueue batch: commit: %w", err)
	}
	return ids, nil
}

// Job returns one job by id.
func (s *Store) Job(ctx context.Context, id int64) (dlq.Job, error) {
	var job dlq.Job
	err := s.db.GetContext(ctx, &job, `SELECT `+JobColumns+` FROM jobs WHERE id = $1`, id)
	if err != nil {
		return dlq.Job{}, fmt.Errorf("job %d: %w", id, postgres.Translate(err))
	}
	return job, nil
}

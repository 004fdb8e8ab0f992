package dlq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Limits on what a producer may enqueue; the schema enforces the same.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 5
	MaxMaxAttempts     = 100
	MaxBatch           = 10_000
	// MaxJobTimeout bounds the per-job timeout an enqueue may ask for.
	MaxJobTimeout = 24 * time.Hour
	// MaxRunAhead bounds how far ahead a job may be scheduled (run_at): a
	// job parked for years (9999-12-31) is a mistake kept for ever, and
	// later work belongs to a scheduler, as a pause's end is bounded.
	MaxRunAhead     = 365 * 24 * time.Hour
	maxPayloadBytes = 1 << 20 // args + kwargs of one job
)

// EnqueueParams describes a job to enqueue. Zero values take defaults.
type EnqueueParams struct {
	Task           string          `json:"task"`
	Queue          string          `json:"queue,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`   // a JSON array; default []
	Kwargs         json.RawMessage `json:"kwargs,omitempty"` // a JSON object; default {}
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"` // default 5
	RunAt          time.Time       `json:"run_at,omitzero"`        // default now
	// Timeout limits each attempt of this job, instead of its task's
	// timeout or the worker's default; a worker's cap (worker.Config
	// MaxTimeout, --job-timeout) still applies. 0: none of its own.
	Timeout time.Duration `json:"-"`
	// ReplayOf links a replayed job back to the dead letter it came from.
	ReplayOf *int64 `json:"-"`
}

// normalise fills defaults and validates, returning a *ValidationError that
// names each bad field. It never touches the database.
func (p EnqueueParams) normalise() (EnqueueParams, error) {
	problems := map[string]string{}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if len(bytes.TrimSpace(p.Args)) == 0 || string(bytes.TrimSpace(p.Args)) == "null" {
		p.Args = json.RawMessage(`[]`)
	}
	if len(bytes.TrimSpace(p.Kwargs)) == 0 || string(bytes.TrimSpace(p.Kwargs)) == "null" {
		p.Kwargs = json.RawMessage(`{}`)
	}
	switch {
	case p.Task == "":
		problems["task"] = "is required"
	case TaskNameProblem(p.Task) != "":
		problems["task"] = TaskNameProblem(p.Task)
	}
	if msg := QueueNameProblem(p.Queue); msg != "" {
		problems["queue"] = msg
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxMaxAttempts {
		problems["max_attempts"] = fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)
	}
	if msg := jsonShape(p.Args, '['); msg != "" {
		problems["args"] = msg
	}
	if msg := jsonShape(p.Kwargs, '{'); msg != "" {
		problems["kwargs"] = msg
	}
	if len(p.Args)+len(p.Kwargs) > maxPayloadBytes {
		problems["args"] = "args and kwargs together must be under 1 MiB"
	}
	if p.Timeout < 0 || p.Timeout > MaxJobTimeout || (p.Timeout > 0 && p.Timeout < time.Millisecond) {
		problems["timeout"] = fmt.Sprintf("must be between 1ms and %s", MaxJobTimeout)
	}
	if !p.RunAt.IsZero() && p.RunAt.After(time.Now().Add(MaxRunAhead)) {
		problems["run_at"] = fmt.Sprintf("must be at most %d days ahead, not %s; a job for later belongs to a scheduler that enqueues it nearer the time",
			MaxRunAhead/(24*time.Hour), p.RunAt.UTC().Format(time.RFC3339))
	}
	if len(p.IdempotencyKey) > 255 {
		problems["idempotency_key"] = "must be at most 255 bytes"
	}
	if len(problems) > 0 {
		return p, &ValidationError{Fields: problems}
	}
	return p, nil
}

// jsonShape returns "" when raw is valid JSON starting with open ('[' or '{'),
// otherwise a message saying what is wrong.
func jsonShape(raw json.RawMessage, open byte) string {
	want := "array"
	if open == '{' {
		want = "object"
	}
	if !json.Valid(raw) { // syntax only: jsonb keeps numbers float64 cannot (1e999)
		var v json.RawMessage
		return fmt.Sprintf("is not valid JSON: %v", json.Unmarshal(raw, &v))
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != open {
		return "must be a JSON " + want
	}
	return ""
}

// EnqueueResult is the job an enqueue produced, or found.
type EnqueueResult struct {
	Job Job
	// Existing is true when the idempotency key had been used before and
	// Job is that earlier job; nothing new was enqueued.
	Existing bool
}

const insertJobSQL = `
INSERT INTO jobs (queue, task, args, kwargs, idempotency_key, max_attempts, run_at, replay_of, timeout_ms)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, COALESCE($7, now()), $8, NULLIF($9::bigint, 0))
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING ` + jobColumns

const jobByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = $1`

const knownTasksSQL = `SELECT name FROM tasks WHERE name = ANY($1)`

// Enqueue inserts one job using q, which may be the producer's own
// transaction: the job then exists exactly when the producer's work commits.
// A second enqueue with the same idempotency key returns the first job with
// Existing set. A task no worker has ever registered is refused, so a typo
// cannot leave a job waiting forever.
func Enqueue(ctx context.Context, q sqlx.ExtContext, p EnqueueParams) (EnqueueResult, error) {
	p, err := p.normalise()
	if err != nil {
		return EnqueueResult{}, err
	}
	if err := checkTasksKnown(ctx, q, []string{p.Task}); err != nil {
		return EnqueueResult{}, err
	}
	var runAt *time.Time
	if !p.RunAt.IsZero() {
		runAt = &p.RunAt
	}
	var job Job
	err = sqlx.GetContext(ctx, q, &job, insertJobSQL,
		p.Queue, p.Task, []byte(p.Args), []byte(p.Kwargs), p.IdempotencyKey, p.MaxAttempts, runAt, p.ReplayOf,
		p.Timeout.Milliseconds())
	if err == nil {
		return EnqueueResult{Job: job}, nil
	}
	if translate(err) != ErrNotFound || p.IdempotencyKey == "" {
		return EnqueueResult{}, fmt.Errorf("enqueue %s: %w", p.Task, translate(err))
	}
	// The key was taken: the insert did nothing and returned no row.
	if err := sqlx.GetContext(ctx, q, &job, jobByKeySQL, p.IdempotencyKey); err != nil {
		return EnqueueResult{}, fmt.Errorf("enqueue %s: find job by key: %w", p.Task, translate(err))
	}
	return EnqueueResult{Job: job, Existing: true}, nil
}

func checkTasksKnown(ctx context.Context, q sqlx.QueryerContext, tasks []string) error {
	var known []string
	if err := sqlx.SelectContext(ctx, q, &known, knownTasksSQL, pq.Array(tasks)); err != nil {
		return fmt.Errorf("check tasks: %w", err)
	}
	return unknownTask(tasks, known)
}

// unknownTask refuses the first of tasks missing from known.
func unknownTask(tasks, known []string) error {
	seen := make(map[string]bool, len(known))
	for _, k := range known {
		seen[k] = true
	}
	for _, t := range tasks {
		if !seen[t] {
			return &ValidationError{Fields: map[string]string{
				"task": fmt.Sprintf("unknown task %q: no worker has registered it", t),
			}}
		}
	}
	return nil
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
func EnqueueMany(ctx context.Context, q sqlx.ExtContext, params []EnqueueParams) ([]int64, error) {
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
		return nil, fmt.Errorf("enqueue batch: %w", translate(err))
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
		return nil, fmt.Errorf("enqueue batch: %w", translate(err))
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
func newBatch(params []EnqueueParams) (*batch, error) {
	if len(params) == 0 {
		return nil, &ValidationError{Fields: map[string]string{"jobs": "must not be empty"}}
	}
	if len(params) > MaxBatch {
		return nil, &ValidationError{Fields: map[string]string{"jobs": fmt.Sprintf("at most %d jobs per batch", MaxBatch)}}
	}
	n := len(params)
	b := &batch{n: n, queues: make([]string, n), taskOf: make([]string, n), args: make([]string, n),
		kwargs: make([]string, n), keys: make([]string, n), maxAttempts: make([]int64, n), timeouts: make([]int64, n),
		runAts: make([]time.Time, n), keyless: true}
	taskSet := map[string]bool{}
	for i, p := range params {
		p, err := p.normalise()
		if err != nil {
			ve := err.(*ValidationError)
			fields := make(map[string]string, len(ve.Fields))
			for k, v := range ve.Fields {
				fields[fmt.Sprintf("jobs[%d].%s", i, k)] = v
			}
			return nil, &ValidationError{Fields: fields}
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
func (s *Store) Enqueue(ctx context.Context, p EnqueueParams) (EnqueueResult, error) {
	return Enqueue(ctx, s.db, p)
}

// EnqueueMany inserts a batch all or nothing in one transaction.
func (s *Store) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]int64, error) {
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
func (s *Store) Job(ctx context.Context, id int64) (Job, error) {
	var job Job
	err := s.db.GetContext(ctx, &job, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id)
	if err != nil {
		return Job{}, fmt.Errorf("job %d: %w", id, translate(err))
	}
	return job, nil
}

package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// The queries the worker runs against a claimed job. Each write is guarded
// by the lease (lease_owner, the claim's attempt and state in the WHERE
// clause): a worker whose lease expired and whose job was rescued, by
// another worker or by itself, cannot clobber the newer run's outcome; its
// write simply matches no row and reports ErrConflict.

// claimSQL takes up to $2 due jobs. SKIP LOCKED lets many workers claim at
// once without queueing behind each other's row locks, and the attempt is
// counted here, at claim time, so a job that kills its worker before any
// outcome is written still uses up its attempts.
const claimSQL = `
WITH next AS (
	SELECT id AS next_id FROM jobs
	WHERE state IN ('available', 'retrying') AND queue = ANY($1) AND run_at <= now()
	ORDER BY run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET state = 'running', attempt = j.attempt + 1, lease_owner = $3,
	lease_expires_at = now() + $4 * interval '1 millisecond', attempted_at = now()
FROM next WHERE j.id = next.next_id
RETURNING ` + jobColumns

// Claim leases up to limit due jobs from queues to worker for lease.
func (s *Store) Claim(ctx context.Context, worker string, queues []string, limit int, lease time.Duration) ([]Job, error) {
	var jobs []Job
	err := s.db.SelectContext(ctx, &jobs, claimSQL, pq.Array(queues), limit, worker, lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	return jobs, nil
}

// Lease names one claim of a job: the worker that claimed it and the
// attempt the claim started. Every write of an outcome, and every renewal,
// is guarded by the whole lease, not only the worker: a worker whose lease
// expired mid-run can claim the same job again after a rescue, and the
// stale run must then not write over the new one.
type Lease struct {
	Worker  string
	JobID   int64
	Attempt int
}

// LeaseOf is the lease a worker holds on a job it claimed.
func LeaseOf(worker string, j Job) Lease {
	return Lease{Worker: worker, JobID: j.ID, Attempt: j.Attempt}
}

const completeSQL = `
UPDATE jobs SET state = 'succeeded', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND attempt = $3 AND state = 'running'`

// Complete acknowledges a job that ran to success. ErrConflict means the
// worker had lost its lease; the job's fate belongs to whoever holds it now.
func (s *Store) Complete(ctx context.Context, l Lease) error {
	res, err := s.db.ExecContext(ctx, completeSQL, l.JobID, l.Worker, l.Attempt)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", l.JobID, err)
	}
	return expectOne(res, "complete job %d", l.JobID)
}

const retrySQL = `
UPDATE jobs SET state = 'retrying', run_at = now() + $3 * interval '1 millisecond',
	lease_owner = NULL, lease_expires_at = NULL, last_error = $4, errors = errors || $5::jsonb
WHERE id = $1 AND lease_owner = $2 AND attempt = $6 AND state = 'running'`

// Retry records a failed attempt and schedules the next one after delay.
func (s *Store) Retry(ctx context.Context, l Lease, delay time.Duration, a Attempt) error {
	a.Outcome = OutcomeRetry
	a.RetryInMS = delay.Milliseconds()
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return fmt.Errorf("retry job %d: %w", l.JobID, err)
	}
	res, err := s.db.ExecContext(ctx, retrySQL, l.JobID, l.Worker, delay.Milliseconds(), summary(a), entry, l.Attempt)
	if err != nil {
		return fmt.Errorf("retry job %d: %w", l.JobID, err)
	}
	return expectOne(res, "retry job %d", l.JobID)
}

// handBackSQL returns an interrupted job to the queue at once. The attempt
// it was claimed with is given back: a shutdown is not the job's failure.
// It notifies the queues the jobs return to, because the trigger only fires
// on INSERT and a worker idling on LISTEN would otherwise wait for its next
// poll to see the handed-back work.
const handBackSQL = `
WITH handed AS (
	UPDATE jobs SET state = CASE WHEN attempt > 1 THEN 'retrying' ELSE 'available' END,
		attempt = attempt - 1, run_at = now(),
		lease_owner = NULL, lease_expires_at = NULL, errors = errors || $3::jsonb
	WHERE id = $1 AND lease_owner = $2 AND attempt = $4 AND state = 'running'
	RETURNING queue
)
SELECT count(*) FROM (SELECT pg_notify('redrive_jobs', queue) FROM handed) notified`

// HandBack returns a job a stopping worker could not finish to the queue
// immediately, rather than leaving it until its lease expires. It reports
// false when the lease was no longer this worker's.
func (s *Store) HandBack(ctx context.Context, l Lease, a Attempt) (bool, error) {
	a.Outcome = OutcomeInterrupted
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return false, fmt.Errorf("hand back job %d: %w", l.JobID, err)
	}
	var n int64
	if err := s.db.GetContext(ctx, &n, handBackSQL, l.JobID, l.Worker, entry, l.Attempt); err != nil {
		return false, fmt.Errorf("hand back job %d: %w", l.JobID, err)
	}
	return n == 1, nil
}

// deadLetterSQL moves a job to dead and writes its letter in one statement,
// so the two can never disagree: either both happen or neither does.
const deadLetterSQL = `
WITH dead AS (
	UPDATE jobs SET state = 'dead', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
		last_error = $3, errors = errors || $4::jsonb
	WHERE id = $1 AND lease_owner = $2 AND attempt = $11 AND state = 'running'
	RETURNING id, queue, task, args, kwargs, idempotency_key, attempt, max_attempts, errors, created_at, replay_of
)
INSERT INTO dead_letters (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT id, queue, task, args, kwargs, idempotency_key, $5, $6, $7, attempt, max_attempts, errors, $8, $9, $10,
	created_at, replay_of
FROM dead
RETURNING id`

// DeadLetter records the final failed attempt, marks the job dead and writes
// its dead letter, all in one statement. It returns the letter's id.
func (s *Store) DeadLetter(ctx context.Context, l Lease, task string, reason Reason, a Attempt) (int64, error) {
	a.Outcome = OutcomeDead
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return 0, fmt.Errorf("dead-letter job %d: %w", l.JobID, err)
	}
	var id int64
	err = s.db.GetContext(ctx, &id, deadLetterSQL, l.JobID, l.Worker, summary(a), entry,
		a.Class, a.Message, a.Traceback, string(reason), Fingerprint(task, a.Class, a.Message), a.Version, l.Attempt)
	if err != nil {
		if translate(err) == ErrNotFound {
			return 0, fmt.Errorf("dead-letter job %d: lease lost: %w", l.JobID, ErrConflict)
		}
		return 0, fmt.Errorf("dead-letter job %d: %w", l.JobID, translate(err))
	}
	return id, nil
}

const extendLeasesSQL = `
UPDATE jobs j SET lease_expires_at = now() + $4 * interval '1 millisecond'
FROM unnest($1::bigint[], $2::int[]) AS held(id, attempt)
WHERE j.id = held.id AND j.attempt = held.attempt AND j.lease_owner = $3 AND j.state = 'running'
RETURNING j.id, j.attempt`

// ExtendLeases renews the leases a live worker holds (all of worker's) and
// returns those it renewed. A lease missing from the result is a claim this
// worker no longer owns (rescued after a stall, perhaps claimed again since
// as a new lease): the handler running under it should stop.
func (s *Store) ExtendLeases(ctx context.Context, worker string, held []Lease, lease time.Duration) ([]Lease, error) {
	ids := make([]int64, len(held))
	attempts := make([]int64, len(held))
	for i, l := range held {
		ids[i], attempts[i] = l.JobID, int64(l.Attempt)
	}
	var rows []struct {
		ID      int64 `db:"id"`
		Attempt int   `db:"attempt"`
	}
	if err := s.db.SelectContext(ctx, &rows, extendLeasesSQL, pq.Array(ids), pq.Array(attempts), worker, lease.Milliseconds()); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	renewed := make([]Lease, len(rows))
	for i, r := range rows {
		renewed[i] = Lease{Worker: worker, JobID: r.ID, Attempt: r.Attempt}
	}
	return renewed, nil
}

func expectOne(res interface{ RowsAffected() (int64, error) }, format string, args ...any) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf(format+": %w", append(args, err)...)
	}
	if n == 0 {
		return fmt.Errorf(format+": lease lost: %w", append(args, ErrConflict)...)
	}
	return nil
}

// summary is the one-line last_error kept on the job row.
func summary(a Attempt) string {
	return a.Class + ": " + a.Message
}

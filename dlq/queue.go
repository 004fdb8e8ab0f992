package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// The queries the worker runs against a claimed job. Each write is guarded
// by the lease (lease_owner and state in the WHERE clause): a worker whose
// lease expired and whose job was rescued by another worker cannot clobber
// the newer outcome; its write simply matches no row and reports ErrConflict.

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

const completeSQL = `
UPDATE jobs SET state = 'succeeded', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND state = 'running'`

// Complete acknowledges a job that ran to success. ErrConflict means the
// worker had lost its lease; the job's fate belongs to whoever holds it now.
func (s *Store) Complete(ctx context.Context, worker string, jobID int64) error {
	res, err := s.db.ExecContext(ctx, completeSQL, jobID, worker)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", jobID, err)
	}
	return expectOne(res, "complete job %d", jobID)
}

const retrySQL = `
UPDATE jobs SET state = 'retrying', run_at = now() + $3 * interval '1 millisecond',
	lease_owner = NULL, lease_expires_at = NULL, last_error = $4, errors = errors || $5::jsonb
WHERE id = $1 AND lease_owner = $2 AND state = 'running'`

// Retry records a failed attempt and schedules the next one after delay.
func (s *Store) Retry(ctx context.Context, worker string, jobID int64, delay time.Duration, a Attempt) error {
	a.Outcome = OutcomeRetry
	a.RetryInMS = delay.Milliseconds()
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return fmt.Errorf("retry job %d: %w", jobID, err)
	}
	res, err := s.db.ExecContext(ctx, retrySQL, jobID, worker, delay.Milliseconds(), summary(a), entry)
	if err != nil {
		return fmt.Errorf("retry job %d: %w", jobID, err)
	}
	return expectOne(res, "retry job %d", jobID)
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
	WHERE id = ANY($1) AND lease_owner = $2 AND state = 'running'
	RETURNING queue
)
SELECT count(*) FROM (SELECT pg_notify('redrive_jobs', queue) FROM handed) notified`

// HandBack returns jobs a stopping worker could not finish to the queue
// immediately, rather than leaving them until their leases expire.
func (s *Store) HandBack(ctx context.Context, worker string, jobIDs []int64, a Attempt) (int64, error) {
	a.Outcome = OutcomeInterrupted
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return 0, fmt.Errorf("hand back jobs: %w", err)
	}
	var n int64
	if err := s.db.GetContext(ctx, &n, handBackSQL, pq.Array(jobIDs), worker, entry); err != nil {
		return 0, fmt.Errorf("hand back jobs: %w", err)
	}
	return n, nil
}

// deadLetterSQL moves a job to dead and writes its letter in one statement,
// so the two can never disagree: either both happen or neither does.
const deadLetterSQL = `
WITH dead AS (
	UPDATE jobs SET state = 'dead', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
		last_error = $3, errors = errors || $4::jsonb
	WHERE id = $1 AND lease_owner = $2 AND state = 'running'
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
func (s *Store) DeadLetter(ctx context.Context, worker string, jobID int64, task string, reason Reason, a Attempt) (int64, error) {
	a.Outcome = OutcomeDead
	entry, err := json.Marshal([]Attempt{a})
	if err != nil {
		return 0, fmt.Errorf("dead-letter job %d: %w", jobID, err)
	}
	var id int64
	err = s.db.GetContext(ctx, &id, deadLetterSQL, jobID, worker, summary(a), entry,
		a.Class, a.Message, a.Traceback, string(reason), Fingerprint(task, a.Class, a.Message), a.Version)
	if err != nil {
		if translate(err) == ErrNotFound {
			return 0, fmt.Errorf("dead-letter job %d: lease lost: %w", jobID, ErrConflict)
		}
		return 0, fmt.Errorf("dead-letter job %d: %w", jobID, translate(err))
	}
	return id, nil
}

const extendLeasesSQL = `
UPDATE jobs SET lease_expires_at = now() + $3 * interval '1 millisecond'
WHERE id = ANY($1) AND lease_owner = $2 AND state = 'running'
RETURNING id`

// ExtendLeases renews the leases a live worker holds and returns the ids it
// renewed. An id missing from the result is a job this worker no longer
// owns (rescued by another worker after a stall): its handler should stop.
func (s *Store) ExtendLeases(ctx context.Context, worker string, jobIDs []int64, lease time.Duration) ([]int64, error) {
	renewed := make([]int64, 0, len(jobIDs))
	if err := s.db.SelectContext(ctx, &renewed, extendLeasesSQL, pq.Array(jobIDs), worker, lease.Milliseconds()); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
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

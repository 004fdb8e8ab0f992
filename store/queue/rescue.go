package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
)

// expiredSQL locks running jobs whose lease ran out. A lease that ran out
// while Postgres was down, or just after it came back, is left alone until
// the server has been up for $2: no worker could renew it meanwhile, and a
// live worker renews it at its next heartbeat; rescuing it first would
// run a healthy worker's job twice and record a crash that never happened. SKIP LOCKED lets every
// worker run the rescuer without two of them rescuing the same job. The
// vanished worker's row (left behind: it never unregistered) supplies the
// host and build version for the attempt, so a lease_expired dead letter
// still says which release kept crashing.
const expiredSQL = `
SELECT j.id, j.task, j.attempt, j.max_attempts, j.lease_owner, j.lease_expires_at,
	COALESCE(w.host, '') AS host, COALESCE(w.version, '') AS version,
	COALESCE(w.heartbeat_at >= j.lease_expires_at, false) AS worker_alive
FROM jobs j LEFT JOIN workers w ON w.id = j.lease_owner
WHERE j.state = 'running' AND j.lease_expires_at < now()
	AND (j.lease_expires_at >= pg_postmaster_start_time() + $2 * interval '1 millisecond'
		OR now() >= pg_postmaster_start_time() + $2 * interval '1 millisecond')
ORDER BY j.lease_expires_at
LIMIT $1
FOR UPDATE OF j SKIP LOCKED`

// requeueRescuedSQL sends rescued jobs that have attempts left back to the
// queue; each gets its own history entry and summary from the parallel
// arrays.
const requeueRescuedSQL = `
UPDATE jobs j SET state = 'retrying', run_at = now(), lease_owner = NULL, lease_expires_at = NULL,
	last_error = r.last_error, errors = j.errors || jsonb_build_array(r.entry)
FROM unnest($1::bigint[], $2::jsonb[], $3::text[]) AS r(id, entry, last_error)
WHERE j.id = r.id`

// deadLetterRescuedSQL dead-letters rescued jobs whose last attempt it was.
const deadLetterRescuedSQL = `
WITH dead AS (
	UPDATE jobs j SET state = 'dead', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
		last_error = r.last_error, errors = j.errors || jsonb_build_array(r.entry)
	FROM unnest($1::bigint[], $2::jsonb[], $3::text[], $4::text[], $5::text[])
		AS r(id, entry, fingerprint, last_error, message)
	WHERE j.id = r.id
	RETURNING j.id, j.queue, j.task, j.args, j.kwargs, j.idempotency_key, j.attempt, j.max_attempts,
		j.errors, j.created_at, j.replay_of, r.fingerprint, r.message, r.entry->>'version' AS version
)
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT id, queue, task, args, kwargs, idempotency_key, $6, message, '', attempt, max_attempts, errors,
	'lease_expired', coalesce((SELECT m.into_id FROM error_group_merges m WHERE m.from_id = fingerprint), fingerprint), COALESCE(version, ''), created_at, replay_of
FROM dead`

type expiredJob struct {
	ID             int64     `db:"id"`
	Task           string    `db:"task"`
	Attempt        int       `db:"attempt"`
	MaxAttempts    int       `db:"max_attempts"`
	LeaseOwner     string    `db:"lease_owner"`
	LeaseExpiresAt time.Time `db:"lease_expires_at"`
	Host           string    `db:"host"`
	Version        string    `db:"version"`
	// WorkerAlive: the lease's worker heartbeated after the lease ran out.
	WorkerAlive bool `db:"worker_alive"`
}

// RescueExpired finds up to limit running jobs whose worker stopped renewing
// the lease and, in one transaction, requeues those with attempts left and
// dead-letters (reason lease_expired) those that were on their last attempt.
//
// restartGrace is how long after a Postgres restart leases that lapsed
// around it are spared: at least the workers' heartbeat interval.
func (s *Store) RescueExpired(ctx context.Context, limit int, rescuer string, now time.Time, restartGrace time.Duration) (dlq.RescueResult, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return dlq.RescueResult{}, fmt.Errorf("rescue: begin: %w", err)
	}
	defer tx.Rollback()
	var expired []expiredJob
	if err := tx.SelectContext(ctx, &expired, expiredSQL, limit, restartGrace.Milliseconds()); err != nil {
		return dlq.RescueResult{}, fmt.Errorf("rescue: find expired leases: %w", err)
	}
	if len(expired) == 0 {
		return dlq.RescueResult{}, nil
	}
	var requeue, dead rescueBatch
	for _, j := range expired {
		message := dlq.LeaseExpiredMessage
		if j.WorkerAlive {
			message = dlq.LeaseLapsedMessage
		}
		a := dlq.Attempt{
			Attempt: j.Attempt, At: now, Worker: j.LeaseOwner, Host: j.Host, Version: j.Version, Class: dlq.LeaseExpiredClass,
			Message: message + fmt.Sprintf(" (held by %s, expired %s, rescued by %s)",
				j.LeaseOwner, j.LeaseExpiresAt.UTC().Format(time.RFC3339), rescuer),
			Outcome: dlq.OutcomeLeaseExpired,
		}
		into := &requeue
		if j.Attempt >= j.MaxAttempts {
			a.Outcome, into = dlq.OutcomeDead, &dead
		}
		entry, err := json.Marshal(a)
		if err != nil {
			return dlq.RescueResult{}, fmt.Errorf("rescue: %w", err)
		}
		into.ids = append(into.ids, j.ID)
		into.entries = append(into.entries, string(entry))
		group, err := s.groups.GroupOf(ctx, j.Task, dlq.LeaseExpiredClass, message, "")
		if err != nil {
			return dlq.RescueResult{}, fmt.Errorf("rescue: %w", err)
		}
		into.fingerprints = append(into.fingerprints, group)
		into.lastErrors = append(into.lastErrors, dlq.LeaseExpiredClass+": "+message)
		into.messages = append(into.messages, message)
	}
	if len(requeue.ids) > 0 {
		if _, err := tx.ExecContext(ctx, requeueRescuedSQL, pq.Array(requeue.ids), pq.Array(requeue.entries),
			pq.Array(requeue.lastErrors)); err != nil {
			return dlq.RescueResult{}, fmt.Errorf("rescue: requeue: %w", err)
		}
	}
	if len(dead.ids) > 0 {
		if _, err := tx.ExecContext(ctx, deadLetterRescuedSQL, pq.Array(dead.ids), pq.Array(dead.entries),
			pq.Array(dead.fingerprints), pq.Array(dead.lastErrors), pq.Array(dead.messages), dlq.LeaseExpiredClass); err != nil {
			return dlq.RescueResult{}, fmt.Errorf("rescue: dead-letter: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return dlq.RescueResult{}, fmt.Errorf("rescue: commit: %w", err)
	}
	return dlq.RescueResult{Requeued: len(requeue.ids), DeadLettered: len(dead.ids)}, nil
}

// rescueBatch gathers the parallel arrays of one rescue statement.
type rescueBatch struct {
	ids                                         []int64
	entries, fingerprints, lastErrors, messages []string
}

package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// LeaseExpiredClass and leaseExpiredMessage describe a rescued job's attempt.
// The message has no variable parts, so every crash of one task shares a
// fingerprint; who held the lease is kept in the attempt history instead.
const (
	LeaseExpiredClass   = "LeaseExpired"
	leaseExpiredMessage = "the worker running this job stopped heartbeating and its lease expired (crash, OOM kill or lost connection)"
)

// expiredSQL locks running jobs whose lease ran out. SKIP LOCKED lets every
// worker run the rescuer without two of them rescuing the same job. The
// vanished worker's row (left behind: it never unregistered) supplies the
// host and build version for the attempt, so a lease_expired dead letter
// still says which release kept crashing.
const expiredSQL = `
SELECT j.id, j.task, j.attempt, j.max_attempts, j.lease_owner, j.lease_expires_at,
	COALESCE(w.host, '') AS host, COALESCE(w.version, '') AS version
FROM jobs j LEFT JOIN workers w ON w.id = j.lease_owner
WHERE j.state = 'running' AND j.lease_expires_at < now()
ORDER BY j.lease_expires_at
LIMIT $1
FOR UPDATE OF j SKIP LOCKED`

// requeueRescuedSQL sends rescued jobs that have attempts left back to the
// queue; each gets its own history entry from the parallel arrays.
const requeueRescuedSQL = `
UPDATE jobs j SET state = 'retrying', run_at = now(), lease_owner = NULL, lease_expires_at = NULL,
	last_error = $3, errors = j.errors || jsonb_build_array(r.entry)
FROM unnest($1::bigint[], $2::jsonb[]) AS r(id, entry)
WHERE j.id = r.id`

// deadLetterRescuedSQL dead-letters rescued jobs whose last attempt it was.
const deadLetterRescuedSQL = `
WITH dead AS (
	UPDATE jobs j SET state = 'dead', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
		last_error = $4, errors = j.errors || jsonb_build_array(r.entry)
	FROM unnest($1::bigint[], $2::jsonb[], $3::text[]) AS r(id, entry, fingerprint)
	WHERE j.id = r.id
	RETURNING j.id, j.queue, j.task, j.args, j.kwargs, j.idempotency_key, j.attempt, j.max_attempts,
		j.errors, j.created_at, j.replay_of, r.fingerprint, r.entry->>'version' AS version
)
INSERT INTO dead_letters (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT id, queue, task, args, kwargs, idempotency_key, $5, $6, '', attempt, max_attempts, errors,
	'lease_expired', fingerprint, COALESCE(version, ''), created_at, replay_of
FROM dead`

// RescueResult counts what one rescue pass did.
type RescueResult struct {
	Requeued     int
	DeadLettered int
}

type expiredJob struct {
	ID             int64     `db:"id"`
	Task           string    `db:"task"`
	Attempt        int       `db:"attempt"`
	MaxAttempts    int       `db:"max_attempts"`
	LeaseOwner     string    `db:"lease_owner"`
	LeaseExpiresAt time.Time `db:"lease_expires_at"`
	Host           string    `db:"host"`
	Version        string    `db:"version"`
}

// RescueExpired finds up to limit running jobs whose worker stopped renewing
// the lease and, in one transaction, requeues those with attempts left and
// dead-letters (reason lease_expired) those that were on their last attempt.
func (s *Store) RescueExpired(ctx context.Context, limit int, rescuer string, now time.Time) (RescueResult, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return RescueResult{}, fmt.Errorf("rescue: begin: %w", err)
	}
	defer tx.Rollback()
	var expired []expiredJob
	if err := tx.SelectContext(ctx, &expired, expiredSQL, limit); err != nil {
		return RescueResult{}, fmt.Errorf("rescue: find expired leases: %w", err)
	}
	if len(expired) == 0 {
		return RescueResult{}, nil
	}
	var requeueIDs, deadIDs []int64
	var requeueEntries, deadEntries, fingerprints []string
	for _, j := range expired {
		a := Attempt{
			Attempt: j.Attempt, At: now, Worker: j.LeaseOwner, Host: j.Host, Version: j.Version, Class: LeaseExpiredClass,
			Message: leaseExpiredMessage + fmt.Sprintf(" (held by %s, expired %s, rescued by %s)",
				j.LeaseOwner, j.LeaseExpiresAt.UTC().Format(time.RFC3339), rescuer),
			Outcome: OutcomeLeaseExpired,
		}
		if j.Attempt >= j.MaxAttempts {
			a.Outcome = OutcomeDead
		}
		entry, err := json.Marshal(a)
		if err != nil {
			return RescueResult{}, fmt.Errorf("rescue: %w", err)
		}
		if a.Outcome == OutcomeDead {
			deadIDs = append(deadIDs, j.ID)
			deadEntries = append(deadEntries, string(entry))
			fingerprints = append(fingerprints, Fingerprint(j.Task, LeaseExpiredClass, leaseExpiredMessage))
		} else {
			requeueIDs = append(requeueIDs, j.ID)
			requeueEntries = append(requeueEntries, string(entry))
		}
	}
	last := LeaseExpiredClass + ": " + leaseExpiredMessage
	if len(requeueIDs) > 0 {
		if _, err := tx.ExecContext(ctx, requeueRescuedSQL, pq.Array(requeueIDs), pq.Array(requeueEntries), last); err != nil {
			return RescueResult{}, fmt.Errorf("rescue: requeue: %w", err)
		}
	}
	if len(deadIDs) > 0 {
		if _, err := tx.ExecContext(ctx, deadLetterRescuedSQL, pq.Array(deadIDs), pq.Array(deadEntries),
			pq.Array(fingerprints), last, LeaseExpiredClass, leaseExpiredMessage); err != nil {
			return RescueResult{}, fmt.Errorf("rescue: dead-letter: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return RescueResult{}, fmt.Errorf("rescue: commit: %w", err)
	}
	return RescueResult{Requeued: len(requeueIDs), DeadLettered: len(deadIDs)}, nil
}

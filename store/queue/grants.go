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

// Grants are how a throttle costs the claim nothing while it has room.
// Each worker process leases a share of every open throttle that touches
// its queues (throttle_grants in 00117_throttles.sql), renews it about once
// a second, and keeps within it on its own: the claim is told each
// throttle's room and takes no lock and counts no running job. The shares
// are written here, under the throttle row's lock, which is what keeps
// their sum within the throttle's limits.

// lockThrottlesSQL locks the open throttles touching queues ($1) in id
// order, so that two renewals never deadlock, and waits for them: a
// renewal is rare (about once a second per worker) and must not skip a
// throttle another holds.
const lockThrottlesSQL = `
SELECT t.id FROM throttles t
WHERE ` + openTouchingSQL + `
ORDER BY t.id
FOR UPDATE`

// grantSQL writes worker $1's grants of the throttles $2, which the
// transaction holds locked, for $3 ms, and returns them, a zero share for
// each throttle it does not want ($4: the tasks it runs; a task's
// throttle it cannot run is no use to it, and a share of it would be lost
// to the others). It runs as a statement of its own after the lock, so
// that it reads what committed before the lock was granted: the grants
// and running jobs of the renewal that held it last.
//
// For each throttle, the other workers' live grants of its current
// revision each stand for greatest(slots, the jobs it runs): a worker
// whose grant shrank runs what it runs until those finish. Every other
// running job of the throttle (a dead worker's until the rescuer requeues
// it, a worker whose grant lapsed or predates a change, jobs running
// before the throttle was set) stands for itself, held. This worker's
// share is its fair part of max_running less held, by rank among the
// workers that want the throttle (the remainder to the first), capped at
// what the others leave: a worker that joins gets its part as the others
// renew and shrink to theirs. Its own running jobs count against its
// grant, in the worker.
//
// The start rate is shared among at most floor(max_per_second) workers,
// each share at least one start a second: a worker's token bucket holds
// max(1, share), so smaller shares would add up to a larger burst than
// the throttle's own bucket of max(1, max_per_second). Below one start a
// second, one worker holds the whole rate.
const grantSQL = `
WITH t AS (
	SELECT id, kind, name, max_running, max_per_second, revision,
		kind = 'queue' OR name = ANY($4::text[]) AS wanted
	FROM throttles WHERE id = ANY($2::bigint[])
),
running AS (
	SELECT t.id, j.lease_owner AS worker, count(*) AS n
	FROM t JOIN jobs j ON j.state = 'running'
		AND CASE WHEN t.kind = 'task' THEN j.task = t.name ELSE j.queue = t.name END
	GROUP BY t.id, j.lease_owner
),
others AS (
	SELECT g.throttle_id AS id, g.worker, g.slots, g.per_second, g.revision = t.revision AS current
	FROM throttle_grants g JOIN t ON t.id = g.throttle_id
	WHERE g.worker <> $1 AND g.expires_at > now()
),
share AS (
	SELECT t.id, t.revision, t.max_running, t.max_per_second,
		1 + (SELECT count(*) FROM others o WHERE o.id = t.id) AS wanting,
		(SELECT count(*) FROM others o WHERE o.id = t.id AND o.worker < $1) AS rank,
		(SELECT coalesce(sum(greatest(coalesce(o.slots, 0), coalesce(r.n, 0))), 0)::bigint
			FROM others o LEFT JOIN running r ON r.id = o.id AND r.worker = o.worker
			WHERE o.id = t.id AND o.current) AS granted,
		(SELECT coalesce(sum(r.n), 0)::bigint FROM running r
			WHERE r.id = t.id AND r.worker <> $1
				AND NOT EXISTS (SELECT 1 FROM others o WHERE o.id = r.id AND o.worker = r.worker AND o.current)) AS held,
		(SELECT coalesce(sum(o.per_second), 0) FROM others o WHERE o.id = t.id AND o.current) AS rate_granted
	FROM t WHERE t.wanted
),
shares AS (
	SELECT s.*, greatest(0, s.max_running - s.held) AS free,
		least(s.wanting, greatest(1, floor(s.max_per_second)))::bigint AS rate_holders
	FROM share s
),
mine AS (
	SELECT s.id, s.revision,
		CASE WHEN s.max_running IS NOT NULL THEN greatest(0, least(
			s.free / s.wanting + CASE WHEN s.rank < s.free % s.wanting THEN 1 ELSE 0 END,
			s.max_running - s.held - s.granted))::integer END AS slots,
		CASE WHEN s.max_per_second IS NOT NULL THEN (
			SELECT CASE WHEN r >= least(1, s.max_per_second) * (1 - 1e-9) THEN r ELSE 0 END
			FROM (SELECT least(CASE WHEN s.rank < s.rate_holders THEN s.max_per_second / s.rate_holders ELSE 0 END,
				s.max_per_second - s.rate_granted) AS r) x) END AS per_second
	FROM shares s
),
granted AS (
	INSERT INTO throttle_grants AS g (throttle_id, worker, revision, slots, per_second, expires_at)
	SELECT id, $1, revision, slots, per_second, now() + $3 * interval '1 millisecond' FROM mine
	ON CONFLICT (throttle_id, worker) DO UPDATE SET revision = excluded.revision, slots = excluded.slots,
		per_second = excluded.per_second, expires_at = excluded.expires_at
	RETURNING g.throttle_id, g.slots, g.per_second
)
SELECT t.id AS throttle_id, t.kind, t.name, t.revision,
	CASE WHEN t.max_running IS NOT NULL THEN coalesce(g.slots, 0) END AS slots,
	CASE WHEN t.max_per_second IS NOT NULL THEN coalesce(g.per_second, 0) END AS per_second,
	now() + $3 * interval '1 millisecond' AS expires_at, now() AS now
FROM t LEFT JOIN granted g ON g.throttle_id = t.id
ORDER BY t.id`

// dropGrantsSQL forgets worker $1's grants of throttles no longer open
// ($2 the open ones), and the lapsed grants of the open ones, which stand
// for nothing.
const dropGrantsSQL = `
DELETE FROM throttle_grants
WHERE worker = $1 AND throttle_id <> ALL($2::bigint[]) OR throttle_id = ANY($2::bigint[]) AND expires_at <= now()`

// RenewGrants leases worker a share of every open throttle touching its
// queues (a task's throttle touches every queue), for ttl by the
// database's clock, and returns them, a zero share of the throttles of
// tasks it does not run (tasks). It forgets the worker's grants of
// throttles that have ended.
func (s *Store) RenewGrants(ctx context.Context, worker string, queues, tasks []string, ttl time.Duration) ([]dlq.ThrottleGrant, error) {
	var grants []dlq.ThrottleGrant
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var ids []int64
		if err := tx.SelectContext(ctx, &ids, lockThrottlesSQL, pq.Array(queues)); err != nil {
			return fmt.Errorf("renew throttle grants: %w", postgres.Translate(err))
		}
		if _, err := tx.ExecContext(ctx, dropGrantsSQL, worker, pq.Array(ids)); err != nil {
			return fmt.Errorf("renew throttle grants: %w", postgres.Translate(err))
		}
		if len(ids) == 0 {
			return nil
		}
		if err := tx.SelectContext(ctx, &grants, grantSQL, worker, pq.Array(ids), ttl.Milliseconds(), pq.Array(tasks)); err != nil {
			return fmt.Errorf("renew throttle grants: %w", postgres.Translate(err))
		}
		return nil
	})
	return grants, err
}

// DropGrants gives up every grant of worker's at once, so that the others
// need not wait for them to lapse: a stopping worker calls it.
func (s *Store) DropGrants(ctx context.Context, worker string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM throttle_grants WHERE worker = $1`, worker); err != nil {
		return fmt.Errorf("drop throttle grants: %w", postgres.Translate(err))
	}
	return nil
}

// Room is what one claim may start of a throttle the worker holds a grant
// of: the grant's slots less the jobs of it the worker runs, and the
// whole tokens of its bucket, whichever is less. Revision is the grant's:
// a claim honours it only while the throttle is at that revision.
type Room struct {
	ThrottleID int64
	Revision   int64
	Room       int
}

// roomArrays splits rooms into parallel arrays for unnest.
func roomArrays(rooms []Room) (ids, revisions []int64, room []int64) {
	ids, revisions, room = make([]int64, len(rooms)), make([]int64, len(rooms)), make([]int64, len(rooms))
	for i, r := range rooms {
		ids[i], revisions[i], room[i] = r.ThrottleID, r.Revision, int64(r.Room)
	}
	return ids, revisions, room
}

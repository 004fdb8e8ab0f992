package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
)

// claimSQL takes up to $2 due jobs. SKIP LOCKED lets many workers claim at
// once without queueing behind each other's row locks, and the attempt is
// counted here, at claim time, so a job that kills its worker before any
// outcome is written still uses up its attempts.
//
// The due jobs are looked up one queue at a time (the LATERAL join over
// the queue names): with a scalar queue, Postgres walks jobs_claimable_idx
// (queue, run_at, id) in order and stops after $2 rows, whereas
// queue = ANY($1) made it read and sort every waiting job of every queue,
// a cost that grew with the backlog. The outer ORDER BY then keeps the
// oldest due jobs across queues; rows locked but not chosen are released
// when the statement's transaction ends. The chosen ids are updated
// through the primary key (= ANY of an array): joined to the CTE instead,
// a small table was hashed whole with a sequential scan.
//
// Paused queues and tasks (store/queue/pause.go) are left out. Each list is an
// uncorrelated subquery, so it runs once per claim (an InitPlan over the
// small pauses table), not once per row. A paused queue drops out of the
// queue list before its walk: free. A paused task's jobs stay in
// jobs_claimable_idx, so the walk reads past those that are due ahead of
// the first job it may take: O(paused jobs due ahead), measured in
// docs/performance.md ("What a task pause costs the claim"). The task is
// compared concatenated with the empty string, an expression without statistics:
// compared bare, with the list unknown at planning time, Postgres guessed
// from jobs.task's few distinct values that almost no row would pass, and
// sorted the queue's whole backlog instead of walking the index
// (TestClaimCostIsFlat). NOT ARRAY[task] <@ list plans as well, but cost
// 25% more per paused row.
//
// claimAfterSQL is the same claim with each queue's walk starting after a
// position ($5 and $6, one per queue): the run_at and id of the last job
// a worker claimed from it, or -infinity for its head. Claimed jobs leave
// their entries in jobs_claimable_idx, dead, until VACUUM removes them, and
// a walk from the head steps over every one: 50,000 jobs drained since the
// last VACUUM put 250 index pages (3 ms) before the first claimable row, a
// cost that grew through a drain until the claim was half of all database
// time. After the last claim's position the walk reads a few pages
// (TestClaimAfterSkipsTheDrainedHead). The head's claim stays without the
// condition: its selectivity, unknown to the planner, made it sort a small
// queue whole instead of walking the index (TestClaimCostIsFlat).
//
// The claim commits without waiting for its WAL to reach the disk
// (synchronous_commit off for its transaction alone, set in the statement
// so that it holds behind a transaction pooler too): the wait was a fifth
// of a claim's time at the defaults. Nothing depends on a claim being
// durable. A claim lost in a server crash returns the job to the queue
// unclaimed, as if the claim had never run, and is redelivered (at least
// once); the job's outcome is written with a synchronous commit, whose
// flush carries the earlier claim's commit record with it, so no outcome
// is ever recorded against a claim that was lost. A worker killed, unlike
// the server, loses nothing: the WAL writer flushes within a fraction of
// a second, and the claim keeps counting its attempt.
//
// Throttles (store/queue/throttle.go) have a claim of their own,
// throttledClaimQuery, which ClaimGranted runs when the worker's room in
// one of them is below the claim's limit. The claim above reads them only
// to ask whether one is open, touching the claimed queues, that the
// worker holds no grant of at its current revision (grants.go): if one
// is, it takes nothing and returns the marker row saying so, and
// ClaimGranted runs the throttled claim instead, which takes none of that
// throttle's jobs. So a throttle with room costs the claim one look at
// the small throttles table, as no throttle does, and a throttle opened or
// changed since the worker's last renewal binds its next claim. Neither
// is planned per call (claim, postgres.PreparedGeneric).
var (
	claimSQL, claimAfterSQL                   = claimQuery(false), claimQuery(true)
	throttledClaimSQL, throttledClaimAfterSQL = throttledClaimQuery(false), throttledClaimQuery(true)
)

// claimWalk is where a claim's walk starts, and the condition that starts
// each queue's walk after its position.
// first is the number of its first parameter, after those of the grants.
func claimWalk(after bool, first int) (from, walk string) {
	if after {
		return fmt.Sprintf("unnest($1::text[], $%d::timestamptz[], $%d::bigint[]) AS q(name, after_run_at, after_id)", first, first+1),
			"\n\t\t\tAND (run_at, id) > (q.after_run_at, q.after_id)"
	}
	return "unnest($1::text[]) AS q(name)", ""
}

func claimQuery(after bool) string {
	from, walk := claimWalk(after, 7)
	return `
WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true) AS setting),
next AS (
	SELECT due.id, due.run_at
	FROM ` + from + `
	CROSS JOIN LATERAL (
		SELECT id, run_at FROM jobs
		WHERE queue = q.name AND state IN ('available', 'retrying') AND run_at <= now()` + walk + `
			AND (task || '') <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'task'))
		ORDER BY run_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) due
	WHERE q.name <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'queue')) AND NOT EXISTS (` + ungrantedThrottlesSQL + `)
	ORDER BY due.run_at, due.id
	LIMIT $2
),
claimed AS (
	UPDATE jobs j
	SET state = 'running', attempt = j.attempt + 1, lease_owner = $3,
		lease_expires_at = now() + $4 * interval '1 millisecond', attempted_at = now()
	WHERE j.id = ANY(ARRAY(SELECT id FROM next)) AND (SELECT setting FROM async_commit) = 'off'
	RETURNING ` + claimedColumns + `
)
SELECT ` + claimedColumns + ` FROM claimed
UNION ALL
SELECT ` + throttleMarker("''", ungrantedMarker) + ` WHERE EXISTS (` + ungrantedThrottlesSQL + `)`
}

// throttledClaimQuery is the claim while a throttle is open and the
// worker's room in one of them is below the claim's limit. room is each
// open throttle touching the queues with the room the worker passes for
// it ($5 to $7: throttle, revision, room), none for a throttle it holds
// no grant of at that revision. It locks no throttle and counts no
// running job: the worker's grants (grants.go) did that, once a second.
//
// A throttled task's jobs are taken by the main walk itself, capped at
// its room (taken): the rows past the room are dropped, unclaimed, and the
// claim's marker row says a throttle was open, so the worker asks again
// soon. So a throttle with room costs the walk what no throttle costs,
// O(limit), however large the task's backlog. A task whose throttle has no
// room is left out of the walk as a paused task is: taking none of its
// jobs, the walk must read past them to reach the rest of the queue, the
// one cost that grows with a backlog (TestClaimCostOfThrottles). The
// worker pays it about once a poll interval: a throttled claim keeps the
// worker's positions (worker/cursor.go), and a queue whose walk read every
// due job and left none of what it read unclaimed (neither past a room nor
// past the limit across queues) is reported, a marker row naming it with
// the claim's now(), so the next claims walk on from past the held jobs.
//
// Jobs of a throttled task that a walk after positions left behind (the
// task was full, or past its room, when the walk passed them) are taken
// from the queue's head by behind, for the room the main walk left unused
// and only as far as the claim is short: a claim the main walk filled
// never reads the head, whose dead entries the positions are there to
// skip. A queue's throttle leaves the queue out of the main walk, and
// slowed takes its room from its head, less the jobs of throttled tasks
// (behind's, there too).
func throttledClaimQuery(after bool) string {
	from, walk := claimWalk(after, 8)
	return `
WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true) AS setting),
room AS MATERIALIZED (
	SELECT t.id, t.kind, t.name, coalesce(g.room, 0) AS room, g.room IS NULL AS ungranted
	FROM throttles t
	LEFT JOIN unnest($5::bigint[], $6::bigint[], $7::bigint[]) AS g(id, revision, room) ON g.id = t.id AND g.revision = t.revision
	WHERE ` + openTouchingSQL + `
),
walked AS MATERIALIZED (
	SELECT q.name AS queue, due.id, due.run_at, due.task
	FROM ` + from + `
	CROSS JOIN LATERAL (
		SELECT id, run_at, task FROM jobs
		WHERE queue = q.name AND state IN ('available', 'retrying') AND run_at <= now()` + walk + `
			AND (task || '') <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'task' UNION ALL SELECT name FROM room WHERE kind = 'task' AND room = 0))
		ORDER BY run_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) due
	WHERE q.name <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'queue' UNION ALL SELECT name FROM room WHERE kind = 'queue'))
),
taken AS (
	SELECT c.id, c.run_at, c.task FROM (
		SELECT w.id, w.run_at, w.task, r.room, row_number() OVER (PARTITION BY r.id ORDER BY w.run_at, w.id) AS n
		FROM walked w LEFT JOIN room r ON r.kind = 'task' AND r.name = w.task
	) c
	WHERE c.room IS NULL OR c.n <= c.room
),
next AS (
	SELECT id, run_at, task FROM taken ORDER BY run_at, id LIMIT $2
),
behind AS (
	SELECT b.id, b.run_at FROM (
		SELECT due.id, due.run_at, r.left, row_number() OVER (PARTITION BY r.id ORDER BY due.run_at, due.id) AS n
		FROM (
			SELECT r.id, r.name, least(r.room - (SELECT count(*) FROM next WHERE next.task = r.name),
				$2 - (SELECT count(*) FROM next)) AS left
			FROM room r WHERE r.kind = 'task'
		) r
		CROSS JOIN unnest($1::text[]) AS q(name)
		CROSS JOIN LATERAL (
			SELECT id, run_at FROM jobs
			WHERE queue = q.name AND state IN ('available', 'retrying') AND run_at <= now()
				AND q.name <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'queue'))
				AND (task || '') = r.name AND id <> ALL (ARRAY(SELECT id FROM next))
			ORDER BY run_at, id
			LIMIT greatest(0, r.left)
			FOR UPDATE SKIP LOCKED
		) due
		WHERE r.left > 0
	) b
	WHERE b.n <= b.left
),
slowed AS (
	SELECT due.id, due.run_at
	FROM room r
	CROSS JOIN LATERAL (
		SELECT id, run_at FROM jobs
		WHERE queue = r.name AND state IN ('available', 'retrying') AND run_at <= now()
			AND (task || '') <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'task' UNION ALL SELECT name FROM room WHERE kind = 'task'))
		ORDER BY run_at, id
		LIMIT least(r.room, $2)
		FOR UPDATE SKIP LOCKED
	) due
	WHERE r.kind = 'queue' AND r.room > 0 AND r.name = ANY($1::text[])
		AND r.name <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'queue'))
),
claimed AS (
	UPDATE jobs j
	SET state = 'running', attempt = j.attempt + 1, lease_owner = $3,
		lease_expires_at = now() + $4 * interval '1 millisecond', attempted_at = now()
	WHERE j.id = ANY(ARRAY(
		SELECT c.id FROM (SELECT id, run_at FROM next UNION ALL SELECT id, run_at FROM behind UNION ALL SELECT id, run_at FROM slowed) c
		ORDER BY c.run_at, c.id LIMIT $2
	)) AND (SELECT setting FROM async_commit) = 'off'
	RETURNING ` + claimedColumns + `
)
SELECT ` + claimedColumns + ` FROM claimed
UNION ALL
SELECT ` + throttleMarker("''", "''") + ` WHERE EXISTS (SELECT 1 FROM room)
UNION ALL
SELECT ` + throttleMarker("''", ungrantedMarker) + ` WHERE EXISTS (SELECT 1 FROM room WHERE ungranted)
UNION ALL
SELECT ` + throttleMarker("q.name", "''") + `
FROM unnest($1::text[]) AS q(name)
WHERE EXISTS (SELECT 1 FROM room)
	AND q.name <> ALL (ARRAY(` + pausedSQL + ` AND kind = 'queue' UNION ALL SELECT name FROM room WHERE kind = 'queue'))
	AND (SELECT count(*) FROM walked w WHERE w.queue = q.name) < $2
	AND NOT EXISTS (SELECT 1 FROM walked w WHERE w.queue = q.name AND w.id <> ALL (ARRAY(SELECT id FROM claimed)))`
}

// throttleMarker is a marker row of the claim's, sent when a throttle is
// open: id 0, which no job has, the queue and task given, and values of
// the claimed columns' types. The one with an empty queue and task says a
// throttle was open; one naming a queue says that its main walk read
// every job due at the claim's now(), its run_at; one whose task is
// ungrantedMarker says a throttle was open that the claim had no grant
// of (dlq.Claim.Ungranted).
func throttleMarker(queue, task string) string {
	return `0, ` + queue + `, ` + task + `, '[]'::jsonb, '{}'::jsonb, NULL, 0, 0, now(), NULL, '[]'::jsonb, now(), now(), NULL, NULL, NULL`
}

// ungrantedTask is the task of the marker row saying a throttle was open
// that the claim had no grant of; ungrantedMarker is it in SQL.
const (
	ungrantedTask   = "ungranted"
	ungrantedMarker = "'" + ungrantedTask + "'"
)

// claimedColumns are jobColumns less those the claim itself sets to
// values Claim knows: state, lease_owner and lease_expires_at (attempted_at
// plus the lease, the same sum the UPDATE makes). Fewer columns to send and
// parse, a timestamp among them, on the path every job takes.
const claimedColumns = `id, queue, task, args, kwargs, idempotency_key, attempt,
	max_attempts, run_at, last_error, errors, created_at, attempted_at, finished_at, replay_of, timeout_ms`

// pausedSQL selects the names of the pauses open now, by the database's
// clock: an expired pause holds nothing, whether or not anyone has
// recorded its expiry yet.
const pausedSQL = `SELECT name FROM pauses WHERE resumed_at IS NULL AND (until IS NULL OR until > now())`

// openTouchingSQL says of a throttle t that it is open now, by the
// database's clock as pausedSQL says of the pauses, and touches the
// claimed queues ($1; a task's throttle touches every queue).
const openTouchingSQL = `t.lifted_at IS NULL AND (t.until IS NULL OR t.until > now()) AND (t.kind = 'task' OR t.name = ANY($1::text[]))`

// ungrantedThrottlesSQL selects the throttles open now, by the
// database's clock as pausedSQL does the pauses, that touch the claimed
// queues ($1; a task's throttle touches every queue) and that the worker
// holds no grant of at their current revision ($5 and $6: the grants'
// throttles and revisions). An uncorrelated subquery over the small
// throttles table: once per claim.
const ungrantedThrottlesSQL = `SELECT 1 FROM throttles t
		WHERE ` + openTouchingSQL + `
			AND NOT EXISTS (SELECT 1 FROM unnest($5::bigint[], $6::bigint[]) AS g(id, revision) WHERE g.id = t.id AND g.revision = t.revision)`

// Claim leases up to limit due jobs from queues to worker for lease,
// none of a throttled queue's or task's.
func (s *Store) Claim(ctx context.Context, worker string, queues []string, limit int, lease time.Duration) ([]dlq.Job, error) {
	return s.ClaimAfter(ctx, worker, queues, nil, limit, lease)
}

// ClaimAfter is Claim with each queue's walk starting after its position
// in after (a queue missing from it starts at its head). A job due before
// the position is not taken: one whose earlier run_at committed late (a
// long transaction's now(), a rescued or handed-back job, an explicit past
// run_at). The caller must claim from the head now and then, and whenever
// a claim after positions comes back short, to take those too.
func (s *Store) ClaimAfter(ctx context.Context, worker string, queues []string, after map[string]dlq.Position, limit int, lease time.Duration) ([]dlq.Job, error) {
	c, err := s.ClaimGranted(ctx, worker, queues, after, limit, lease, nil)
	return c.Jobs, err
}

// ClaimGranted is ClaimAfter that takes, of each open throttle touching
// queues, at most its room in rooms (the worker's grants less what it
// runs and has started: RenewGrants), none of one missing from rooms or
// granted before an operator changed it (dlq.Claim.Ungranted then says
// so), and that says whether a throttle was open (dlq.Claim.Throttled): a
// claim that came back short may then have left throttled work waiting
// for room, to be asked for again soon. While every room is at least the
// limit it runs the plain claim, whose only look at the throttles is
// whether one is ungranted; otherwise, or if one is, the throttled claim.
func (s *Store) ClaimGranted(ctx context.Context, worker string, queues []string, after map[string]dlq.Position,
	limit int, lease time.Duration, rooms []Room) (dlq.Claim, error) {
	throttled := slices.ContainsFunc(rooms, func(r Room) bool { return r.Room < limit })
	c, err := s.claim(ctx, worker, queues, after, limit, lease, rooms, throttled)
	if err == nil && c.Ungranted && !throttled {
		c, err = s.claim(ctx, worker, queues, after, limit, lease, rooms, true)
	}
	return c, err
}

// claim runs one claim statement, prepared on its connection and run with
// its generic plan (postgres.PreparedGeneric): planned per call, the
// throttled claim spent 1.0 ms planning against 0.8 running, the plain one
// 0.3 against 0.5, and Postgres never chose the generic plan by itself
// (the LIMIT $2 of its walks, unknown to a generic plan, is costed as a
// tenth of the backlog). The generic plans walk the index as the custom
// ones do (TestClaimGenericPlansAreFlat). The rows are scanned by hand: on the
// claim path, sqlx's reflection cost more than the rest of the client's
// work per job. The destinations follow claimedColumns;
// TestClaimReturnsEveryColumn checks the result against the job as the
// store reads it.
func (s *Store) claim(ctx context.Context, worker string, queues []string, after map[string]dlq.Position,
	limit int, lease time.Duration, rooms []Room, throttled bool) (dlq.Claim, error) {
	leaseMS := lease.Milliseconds()
	query, args := claimArgs(worker, queues, after, limit, leaseMS, rooms, throttled)
	rows, err := s.db.QueryContext(ctx, query, append([]any{postgres.PreparedGeneric}, args...)...)
	if err != nil {
		return dlq.Claim{}, fmt.Errorf("claim jobs: %w", err)
	}
	defer rows.Close()
	c := dlq.Claim{Jobs: make([]dlq.Job, 0, limit)}
	owner := worker
	for rows.Next() {
		// Scanned in place: a Job scanned on its own would escape to the
		// heap (Scan takes pointers into it) and then be copied.
		c.Jobs = append(c.Jobs, dlq.Job{State: dlq.StateRunning, LeaseOwner: &owner})
		j := &c.Jobs[len(c.Jobs)-1]
		times := new([2]time.Time) // attempted_at and the lease's end, in one allocation
		if err := rows.Scan(&j.ID, &j.Queue, &j.Task, &j.Args, &j.Kwargs, &j.IdempotencyKey, &j.Attempt,
			&j.MaxAttempts, &j.RunAt, &j.LastError, &j.Errors,
			&j.CreatedAt, &times[0], &j.FinishedAt, &j.ReplayOf, &j.TimeoutMS); err != nil {
			return dlq.Claim{}, fmt.Errorf("claim jobs: %w", err)
		}
		if j.ID == 0 { // throttleMarker
			c.Jobs, c.Throttled = c.Jobs[:len(c.Jobs)-1], true
			c.Ungranted = c.Ungranted || j.Task == ungrantedTask
			if j.Queue != "" {
				if c.Exhausted == nil {
					c.Exhausted = make(map[string]time.Time)
				}
				c.Exhausted[j.Queue] = j.RunAt
			}
			continue
		}
		times[1] = times[0].Add(time.Duration(leaseMS) * time.Millisecond)
		j.AttemptedAt, j.LeaseExpiresAt = &times[0], &times[1]
	}
	if err := rows.Err(); err != nil {
		return dlq.Claim{}, fmt.Errorf("claim jobs: %w", err)
	}
	return c, nil
}

// claimArgs is the claim to run, from the head of every queue or after
// positions, honouring throttles or not, with its parameters in order.
func claimArgs(worker string, queues []string, after map[string]dlq.Position, limit int, leaseMS int64,
	rooms []Room, throttled bool) (string, []any) {
	ids, revisions, room := roomArrays(rooms)
	head, positioned := claimSQL, claimAfterSQL
	args := []any{pq.Array(queues), limit, worker, leaseMS, pq.Array(ids), pq.Array(revisions)}
	if throttled {
		head, positioned = throttledClaimSQL, throttledClaimAfterSQL
		args = append(args, pq.Array(room))
	}
	if len(after) == 0 {
		return head, args
	}
	// -infinity sorts before every run_at: a queue without a position is
	// walked from its head.
	afterRunAt, afterID := make([]string, len(queues)), make([]int64, len(queues))
	for i, q := range queues {
		afterRunAt[i] = "-infinity"
		if p, ok := after[q]; ok {
			afterRunAt[i], afterID[i] = p.RunAt.Format(time.RFC3339Nano), p.ID
		}
	}
	return positioned, append(args, pq.Array(afterRunAt), pq.Array(afterID))
}

// completeManySQL acknowledges a batch of successes in one statement. Each
// row is guarded by its own lease, so a job whose lease was lost (and that
// another claim may now be running) is simply not matched. The lease's
// expiry is not part of the guard: until somebody takes the job, the
// outcome is still the claim's to write.
const completeManySQL = `
UPDATE jobs j SET state = 'succeeded', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
FROM unnest($1::bigint[], $2::int[]) AS done(id, attempt)
WHERE j.id = done.id AND j.attempt = done.attempt AND j.lease_owner = $3 AND j.state = 'running'
RETURNING j.id`

// CompleteMany acknowledges jobs that ran to success, all claimed by
// worker, in one statement. It returns the ids it acknowledged; a lease
// missing from them had been lost (see ReclaimRescued), or its outcome
// was written already.
func (s *Store) CompleteMany(ctx context.Context, worker string, leases []dlq.Lease) ([]int64, error) {
	ids, attempts := LeaseArrays(leases)
	var done []int64
	if err := s.db.SelectContext(ctx, &done, completeManySQL, pq.Array(ids), pq.Array(attempts), worker); err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(leases), err)
	}
	return done, nil
}

const retryManySQL = `
UPDATE jobs j SET state = 'retrying', run_at = now() + r.delay_ms * interval '1 millisecond',
	lease_owner = NULL, lease_expires_at = NULL, last_error = r.last_error,
	errors = j.errors || jsonb_build_array(r.entry)
FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::text[], $5::jsonb[]) AS r(id, attempt, delay_ms, last_error, entry)
WHERE j.id = r.id AND j.attempt = r.attempt AND j.lease_owner = $6 AND j.state = 'running'
RETURNING j.id`

// RetryMany records failed attempts of jobs claimed by worker and schedules
// each one's next attempt after its delay, in one statement. It returns the
// ids it rescheduled; the others had lost their leases.
func (s *Store) RetryMany(ctx context.Context, worker string, outcomes []dlq.RetryOutcome) ([]int64, error) {
	n := len(outcomes)
	ids, attempts, delays := make([]int64, n), make([]int64, n), make([]int64, n)
	lastErrors, entries := make([]string, n), make([]string, n)
	for i, o := range outcomes {
		a := o.Attempt
		a.Outcome = dlq.OutcomeRetry
		a.RetryInMS = o.Delay.Milliseconds()
		entry, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("retry job %d: %w", o.Lease.JobID, err)
		}
		ids[i], attempts[i], delays[i] = o.Lease.JobID, int64(o.Lease.Attempt), a.RetryInMS
		lastErrors[i], entries[i] = Summary(a), string(entry)
	}
	var done []int64
	err := s.db.SelectContext(ctx, &done, retryManySQL, pq.Array(ids), pq.Array(attempts), pq.Array(delays),
		pq.Array(lastErrors), pq.Array(entries), worker)
	if err != nil {
		return nil, fmt.Errorf("retry %d jobs: %w", n, err)
	}
	return done, nil
}

// handBackSQL returns an interrupted job to the queue at once. The attempt
// it was claimed with is given back: a shutdown is not the job's failure.
// Its run_at is kept, so it keeps its place in the queue instead of going
// behind every job enqueued since (a claim never changes run_at). It
// notifies the queues the jobs return to, because the trigger only fires
// on INSERT and a worker idling on LISTEN would otherwise wait for its next
// poll to see the handed-back work.
const handBackSQL = `
WITH handed AS (
	UPDATE jobs SET state = CASE WHEN attempt > 1 THEN 'retrying' ELSE 'available' END,
		attempt = attempt - 1,
		lease_owner = NULL, lease_expires_at = NULL, errors = errors || $3::jsonb
	WHERE id = $1 AND lease_owner = $2 AND attempt = $4 AND state = 'running'
	RETURNING queue
)
SELECT count(*) FROM (SELECT pg_notify('redrive_jobs', queue) FROM handed) notified`

// HandBack returns a job a stopping worker could not finish to the queue
// immediately, rather than leaving it until its lease expires. It reports
// false when the lease was no longer this worker's.
func (s *Store) HandBack(ctx context.Context, l dlq.Lease, a dlq.Attempt) (bool, error) {
	a.Outcome = dlq.OutcomeInterrupted
	entry, err := json.Marshal([]dlq.Attempt{a})
	if err != nil {
		return false, fmt.Errorf("hand back job %d: %w", l.JobID, err)
	}
	var n int64
	if err := s.db.GetContext(ctx, &n, handBackSQL, l.JobID, l.Worker, entry, l.Attempt); err != nil {
		return false, fmt.Errorf("hand back job %d: %w", l.JobID, err)
	}
	return n == 1, nil
}

// Now reads the database's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.GetContext(ctx, &now, `SELECT now()`); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// handBackOrphansSQL hands back the jobs running under worker's id that the
// worker does not know it holds: the claim that took them committed after
// the worker had given up waiting for its reply (a client-side timeout, a
// connection cut mid-reply). Their handlers never ran, so the attempt is
// given back and run_at kept, as at shutdown; otherwise they would sit in
// running until their leases expired, and one on its last attempt would be
// dead-lettered without having run at all.
const handBackOrphansSQL = `
WITH orphans AS (
	UPDATE jobs j SET state = CASE WHEN j.attempt > 1 THEN 'retrying' ELSE 'available' END,
		attempt = j.attempt - 1, lease_owner = NULL, lease_expires_at = NULL,
		errors = j.errors || jsonb_build_array(jsonb_set($4::jsonb, '{attempt}', to_jsonb(j.attempt)))
	WHERE j.id = ANY($6::bigint[]) AND j.state = 'running' AND j.lease_owner = $1 AND j.attempted_at >= $5
		AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::int[]) AS held(id, attempt)
			WHERE held.id = j.id AND held.attempt = j.attempt)
	RETURNING j.id, j.queue
)
SELECT id FROM orphans, LATERAL (SELECT pg_notify('redrive_jobs', queue)) notified`

// orphanSuspectsSQL is handBackOrphansSQL's test as a plain read: it locks
// nothing and changes nothing. Finding running jobs by owner walks every
// entry jobs_running_lease_idx still holds, and at thousands of jobs a
// second the entries of jobs finished since the last vacuum are many:
// under load this took seconds.
const orphanSuspectsSQL = `
SELECT j.id FROM jobs j
WHERE j.state = 'running' AND j.lease_owner = $1 AND j.attempted_at >= $4
	AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::int[]) AS held(id, attempt)
		WHERE held.id = j.id AND held.attempt = j.attempt)`

// OrphanSuspects returns the jobs that HandBackOrphans would hand back
// now, without touching them. It takes no lock, so the caller need not
// hold off claiming while it runs, and a job it names may since have
// joined held: HandBackOrphans, given the suspects, checks again.
func (s *Store) OrphanSuspects(ctx context.Context, worker string, since time.Time, held []dlq.Lease) ([]int64, error) {
	ids, attempts := LeaseArrays(held)
	var suspects []int64
	if err := s.db.SelectContext(ctx, &suspects, orphanSuspectsSQL, worker, pq.Array(ids), pq.Array(attempts), since); err != nil {
		return nil, fmt.Errorf("look for orphaned jobs: %w", err)
	}
	return suspects, nil
}

// HandBackOrphans returns to the queue every job among suspects (see
// OrphanSuspects) running under worker's lease, claimed since since,
// except those in held, giving back their attempts, and returns their ids. since is when this process started, by
// the database's clock (Store.Now): a job claimed before that was claimed
// by an earlier process with the same worker id, which may have died
// running it, and must spend its attempt through the rescuer; otherwise a
// job that kills its worker would be handed back for ever. The caller must
// hold off claiming while it runs: a claim committed but not yet in held
// would be handed back too.
func (s *Store) HandBackOrphans(ctx context.Context, worker string, since time.Time, held []dlq.Lease, suspects []int64, a dlq.Attempt) ([]int64, error) {
	a.Outcome, a.Class = dlq.OutcomeInterrupted, dlq.ClaimLostClass
	entry, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("hand back orphaned jobs: %w", err)
	}
	ids, attempts := LeaseArrays(held)
	var orphans []int64
	if err := s.db.SelectContext(ctx, &orphans, handBackOrphansSQL, worker, pq.Array(ids), pq.Array(attempts), entry, since,
		pq.Array(suspects)); err != nil {
		return nil, fmt.Errorf("hand back orphaned jobs: %w", err)
	}
	return orphans, nil
}

// reclaimRescuedSQL takes back, for the claim whose handler ran, jobs the
// rescuer requeued from that very claim after its lease ran out and that
// nobody has claimed since: the rescue's entry is still the newest in the
// job's history, and the attempt is the claim's. The job runs under the
// claim again with a fresh lease, so its outcome can be written as usual;
// the rescue's entry stays, saying what happened to the lease. The
// guard's history test runs only on the jobs named, found by primary key.
const reclaimRescuedSQL = `
UPDATE jobs j SET state = 'running', lease_owner = $3, lease_expires_at = now() + $4 * interval '1 millisecond'
FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'retrying' AND j.lease_owner IS NULL
	AND j.errors->-1 @> jsonb_build_object('outcome', '` + string(dlq.OutcomeLeaseExpired) + `', 'worker', $3::text, 'attempt', c.attempt)
RETURNING j.id, j.attempt`

// ReclaimRescued takes back for worker the jobs among leases that the
// rescuer requeued from those very leases and that nobody has claimed
// since, each under a fresh lease, and returns the leases it took back.
// A worker whose outcome write found the job no longer running under its
// claim (it could not reach the database for longer than the lease)
// calls it, then writes the outcome again: a job whose handler ran is
// recorded with its real outcome whenever that is still possible, rather
// than run again.
func (s *Store) ReclaimRescued(ctx context.Context, worker string, leases []dlq.Lease, lease time.Duration) ([]dlq.Lease, error) {
	ids, attempts := LeaseArrays(leases)
	var rows []struct {
		ID      int64 `db:"id"`
		Attempt int   `db:"attempt"`
	}
	if err := s.db.SelectContext(ctx, &rows, reclaimRescuedSQL, pq.Array(ids), pq.Array(attempts), worker,
		lease.Milliseconds()); err != nil {
		return nil, fmt.Errorf("take back rescued jobs: %w", err)
	}
	taken := make([]dlq.Lease, len(rows))
	for i, r := range rows {
		taken[i] = dlq.Lease{Worker: worker, JobID: r.ID, Attempt: r.Attempt}
	}
	return taken, nil
}

// recordLostOutcomesSQL appends to each job's history the attempt whose
// outcome was lost, where the job has provably moved past that claim
// without it: claimed again since (its attempt is higher), unless the
// history already holds this claim's retry (an earlier write of it
// committed, its reply lost); or, on its last attempt, dead-lettered by
// the rescuer from this claim. Anything else (the outcome written already,
// the job killed by an operator, deleted) gets nothing: the note must
// never claim a loss that did not happen.
const recordLostOutcomesSQL = `
UPDATE jobs j SET errors = j.errors || jsonb_build_array(l.entry)
FROM unnest($1::bigint[], $2::int[], $3::jsonb[]) AS l(id, attempt, entry)
WHERE j.id = l.id AND (
	j.attempt > l.attempt
		AND NOT j.errors @> jsonb_build_array(jsonb_build_object('attempt', l.attempt, 'worker', $4::text, 'outcome', 'retry'))
	OR j.attempt = l.attempt AND j.state = 'dead'
		AND j.errors->-1 @> jsonb_build_object('attempt', l.attempt, 'worker', $4::text, 'class', '` + dlq.LeaseExpiredClass + `'))
RETURNING j.id`

// RecordLostOutcomes says in each job's history that an attempt of worker's
// ran but its outcome was lost: the job was rescued after the lease ran
// out (the worker could not reach the database meanwhile), and then
// claimed again or dead-lettered, so the outcome can no longer be
// written. The attempt stays counted: the job did run. It returns the
// jobs whose history it wrote to; see recordLostOutcomesSQL for those it
// leaves alone.
func (s *Store) RecordLostOutcomes(ctx context.Context, worker string, lost []dlq.LostOutcome) ([]int64, error) {
	ids, attempts, entries := make([]int64, len(lost)), make([]int64, len(lost)), make([]string, len(lost))
	for i, l := range lost {
		a := l.Attempt
		a.Attempt, a.Worker, a.Class, a.Outcome = l.Lease.Attempt, worker, dlq.OutcomeLostClass, dlq.OutcomeLost
		entry, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("record lost outcome of job %d: %w", l.Lease.JobID, err)
		}
		ids[i], attempts[i], entries[i] = l.Lease.JobID, int64(l.Lease.Attempt), string(entry)
	}
	var noted []int64
	if err := s.db.SelectContext(ctx, &noted, recordLostOutcomesSQL, pq.Array(ids), pq.Array(attempts), pq.Array(entries),
		worker); err != nil {
		return nil, fmt.Errorf("record %d lost outcomes: %w", len(lost), err)
	}
	return noted, nil
}

// deadLetterManySQL moves a batch of jobs to dead and writes their letters
// in one statement, so a job and its letter can never disagree: either
// both happen or neither does. One statement for many letters also means
// the summary triggers fold the whole batch into each summary row once,
// instead of every letter queueing for the same rows' locks.
//
// The outcome's own columns travel through the UPDATE's RETURNING rather
// than a join of the updated rows back to the outcomes: no CTE of the
// outcomes to materialise and no hash join per batch. The join also hung
// on the planner's guess at two CTEs: with the batch's size unknown (a
// generic plan, or outcomes read from a table) it chose a nested loop that
// rescanned every outcome for every job, 4 million rows for a batch of
// 2,000 in EXPLAIN ANALYZE.
//
// Each traceback travels packed (package letterpack): the letter keeps its
// values and its template's hash, and the statement's first part stores
// the batch's templates that are not stored yet.
var deadLetterManySQL = `
WITH templates AS (` + letterpack.InsertTemplatesSQL("$12", "$13") + `),
dead AS (
	UPDATE jobs j SET state = 'dead', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
		last_error = o.last_error, errors = j.errors || jsonb_build_array(o.entry)
	FROM unnest($1::bigint[], $2::int[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $14::text[])
		AS o(id, attempt, last_error, entry, error_class, error_message, traceback, reason, fingerprint, version, template)
	WHERE j.id = o.id AND j.attempt = o.attempt AND j.lease_owner = $11 AND j.state = 'running'
	RETURNING j.id, j.queue, j.task, j.args, j.kwargs, j.idempotency_key, j.attempt, j.max_attempts, j.errors,
		j.created_at, j.replay_of, o.error_class, o.error_message, o.traceback, o.template, o.reason, o.fingerprint, o.version
)
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, traceback_template, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT id, queue, task, args, kwargs, idempotency_key, error_class, error_message, traceback, ` + letterpack.HashSQL("template") + `,
	attempt, max_attempts, errors, reason, coalesce((SELECT m.into_id FROM error_group_merges m WHERE m.from_id = fingerprint), fingerprint), version, created_at, replay_of
FROM dead
ORDER BY id
RETURNING job_id, id`

// DeadLetterMany records the final failed attempts of jobs claimed by
// worker, marks them dead and writes their dead letters, all in one
// statement. It returns the jobs it dead-lettered with their letters' ids;
// the others had lost their leases.
func (s *Store) DeadLetterMany(ctx context.Context, worker string, outcomes []dlq.DeadOutcome) ([]dlq.DeadLetterResult, error) {
	args, err := s.deadLetterManyArgs(ctx, worker, outcomes)
	if err != nil {
		return nil, err
	}
	var done []dlq.DeadLetterResult
	if err := s.db.SelectContext(ctx, &done, deadLetterManySQL, args...); err != nil {
		return nil, fmt.Errorf("dead-letter %d jobs: %w", len(outcomes), postgres.Translate(err))
	}
	return done, nil
}

// deadLetterManyArgs are deadLetterManySQL's parallel arrays, one element
// per outcome, and the worker.
func (s *Store) deadLetterManyArgs(ctx context.Context, worker string, outcomes []dlq.DeadOutcome) ([]any, error) {
	n := len(outcomes)
	ids, attempts := make([]int64, n), make([]int64, n)
	lastErrors, entries, classes, messages := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tracebacks, reasons, fingerprints, versions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	var packed letterpack.Batch
	templates := make([]string, n)
	for i, o := range outcomes {
		a := o.Attempt
		a.Outcome = dlq.OutcomeDead
		entry, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("dead-letter job %d: %w", o.Lease.JobID, err)
		}
		ids[i], attempts[i] = o.Lease.JobID, int64(o.Lease.Attempt)
		lastErrors[i], entries[i], classes[i], messages[i] = Summary(a), string(entry), a.Class, a.Message
		reasons[i], versions[i] = string(o.Reason), a.Version
		if fingerprints[i], err = s.groups.GroupOf(ctx, o.Task, a.Class, a.Message, a.Traceback); err != nil {
			return nil, fmt.Errorf("dead-letter job %d: %w", o.Lease.JobID, err)
		}
		tracebacks[i], templates[i] = packed.Add(a.Traceback, a.Message)
	}
	fingerprints = s.groups.Resolve(fingerprints)
	return []any{pq.Array(ids), pq.Array(attempts), pq.Array(lastErrors), pq.Array(entries), pq.Array(classes),
		pq.Array(messages), pq.Array(tracebacks), pq.Array(reasons), pq.Array(fingerprints), pq.Array(versions),
		worker, pq.Array(packed.Hashes), pq.Array(packed.Templates), pq.Array(templates)}, nil
}

// LeaseArrays splits leases into parallel id and attempt arrays for unnest.
func LeaseArrays(leases []dlq.Lease) (ids, attempts []int64) {
	ids, attempts = make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], attempts[i] = l.JobID, int64(l.Attempt)
	}
	return ids, attempts
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
func (s *Store) ExtendLeases(ctx context.Context, worker string, held []dlq.Lease, lease time.Duration) ([]dlq.Lease, error) {
	ids, attempts := LeaseArrays(held)
	var rows []struct {
		ID      int64 `db:"id"`
		Attempt int   `db:"attempt"`
	}
	if err := s.db.SelectContext(ctx, &rows, extendLeasesSQL, pq.Array(ids), pq.Array(attempts), worker, lease.Milliseconds()); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	renewed := make([]dlq.Lease, len(rows))
	for i, r := range rows {
		renewed[i] = dlq.Lease{Worker: worker, JobID: r.ID, Attempt: r.Attempt}
	}
	return renewed, nil
}

// Summary is the one-line last_error kept on the job row.
func Summary(a dlq.Attempt) string {
	return a.Class + ": " + a.Message
}

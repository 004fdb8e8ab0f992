package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// replayCountsSQL counts an operation's replay jobs by state: one range
// of jobs_operation_state_idx (00100_queue.sql). Measured with EXPLAIN (ANALYZE,
// BUFFERS) on 100,000 replays of one operation among 300,000 jobs
// (PostgreSQL 15, a 2-core machine shared with other work, warm cache):
// right after the batches, a bitmap heap scan, 2,123 buffers, 93-107 ms;
// after VACUUM, a parallel index-only scan, 536 buffers, 134 ms (22,037
// heap fetches); with half the jobs changed since, an index-only scan,
// 3,244 buffers, 83 ms. The index is 976 kB. Too much to run for every
// poll of every viewer, cheap once a second: the runner counts, once a
// second per operation it follows, and keeps the counts in
// operations.replays, which pages, the API and the CLI read. The other
// way, a counter row per operation moved by a trigger on jobs, would put
// that one hot row in every worker acknowledgement of a replay (see
// 00100_queue.sql).
//
// A replay in another system is a row of source_replays instead of a job
// (00111_source_replays.sql), counted from its operation's range of
// source_replays_operation_idx alongside.
const replayCountsSQL = `
WITH ours AS (
	SELECT count(*) FILTER (WHERE state IN ('available', 'retrying')) AS waiting,
		count(*) FILTER (WHERE state = 'running') AS running,
		count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
		count(*) FILTER (WHERE state = 'dead') AS died_again
	FROM jobs WHERE operation_id = $1
), theirs AS (
	SELECT count(*) FILTER (WHERE state IN ('waiting', 'sending', 'sent')) AS waiting,
		count(*) FILTER (WHERE state = 'running') AS running,
		count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
		count(*) FILTER (WHERE state = 'died_again') AS died_again,
		count(*) FILTER (WHERE state = 'gone') AS gone,
		count(*) FILTER (WHERE state = 'refused') AS refused
	FROM source_replays WHERE operation_id = $1
)
SELECT o.waiting + t.waiting, o.running + t.running, o.succeeded + t.succeeded, o.died_again + t.died_again,
	t.gone, t.refused
FROM ours o, theirs t`

func replayCounts(ctx context.Context, q sqlx.QueryerContext, opID int64) (dlq.ReplayCounts, error) {
	var c dlq.ReplayCounts
	// Scanned field by field: ReplayCounts is a Scanner (of the JSON
	// the row keeps), which sqlx would otherwise hand the whole row.
	if err := q.QueryRowxContext(ctx, replayCountsSQL, opID).Scan(&c.Waiting, &c.Running, &c.Succeeded, &c.DiedAgain, &c.Gone, &c.Refused); err != nil {
		return dlq.ReplayCounts{}, fmt.Errorf("count replays of operation %d: %w", opID, err)
	}
	return c, nil
}

// OperationReplays counts where an operation's replay jobs are.
func (s *Store) OperationReplays(ctx context.Context, opID int64) (dlq.ReplayCounts, error) {
	return replayCounts(ctx, s.db, opID)
}

// followableSQL lists the replays whose jobs may still change: every one
// not finished (a paused one's jobs in flight go on settling). finished_at
// is set exactly when a state is Finished, so the open states are not
// listed here a second time, and the open-operations index serves it.
const followableSQL = `SELECT id FROM operations
WHERE kind = 'replay' AND finished_at IS NULL
ORDER BY id`

// FollowOperations counts the replays of every replay operation not
// finished, keeps the counts in its row (Operation.Replays), and moves it
// along on what they did: a settling operation whose replays have all
// settled is done; a canary gets its verdict (and waits in canary_failed
// when one of its replays died again); a guarded operation whose first
// GuardSample replays have settled is paused (auto_paused) when too many
// died again. Each change of state is audited in the same transaction. It
// returns how many operations changed state.
func (s *Store) FollowOperations(ctx context.Context, now time.Time) (int, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, followableSQL); err != nil {
		return 0, fmt.Errorf("followable operations: %w", err)
	}
	changed := 0
	for _, id := range ids {
		ok, err := s.followOperation(ctx, id, now)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	return changed, nil
}

// followOperation follows one operation in one transaction: lock it,
// keep its replays' counts, and move it along on them.
func (s *Store) followOperation(ctx context.Context, id int64, now time.Time) (bool, error) {
	changed := false
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		op, ok, err := lockFollowed(ctx, tx, id)
		if err != nil || !ok {
			return err
		}
		c, err := keepReplayCounts(ctx, tx, op)
		if err != nil {
			return err
		}
		changed, err = moveAlong(ctx, tx, op, c, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("follow operation %d: %w", id, err)
	}
	return changed, nil
}

// lockFollowed locks the operation id; false when there is nothing to
// follow: it is locked, gone, finished, or not a replay.
func lockFollowed(ctx context.Context, tx *sqlx.Tx, id int64) (dlq.Operation, bool, error) {
	var op dlq.Operation
	// SKIP LOCKED: a batch (or another console) holds it; next pass.
	err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE SKIP LOCKED`, id)
	if postgres.Translate(err) == dlq.ErrNotFound {
		return op, false, nil
	}
	if err != nil {
		return op, false, fmt.Errorf("lock operation: %w", err)
	}
	return op, !op.State.Finished() && op.Kind == dlq.OpReplay, nil
}

// keepReplayCounts counts op's replays and keeps the counts in its row.
func keepReplayCounts(ctx context.Context, tx *sqlx.Tx, op dlq.Operation) (dlq.ReplayCounts, error) {
	c, err := replayCounts(ctx, tx, op.ID)
	if err != nil {
		return c, err
	}
	if op.Replays == nil || *op.Replays != c {
		// Only when they moved: a row version a second per operation
		// is nothing, but a settled one need not write at all.
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET replays = $2 WHERE id = $1`, op.ID, audit.MustJSON(c)); err != nil {
			return c, fmt.Errorf("keep replay counts: %w", err)
		}
	}
	return c, nil
}

// moveAlong moves op along on what its replays did (c), as
// FollowOperations says, and reports whether its state changed.
func moveAlong(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, c dlq.ReplayCounts, now time.Time) (bool, error) {
	switch {
	case op.State == dlq.OpSettling:
		return settle(ctx, tx, op, c, now)
	case op.State == dlq.OpCanary && op.CanaryVerdict == nil:
		return judgeCanary(ctx, tx, op, c, now)
	case op.State == dlq.OpRunning && op.GuardPending():
		return judgeGuard(ctx, tx, op, c, now)
	}
	return false, nil
}

// settle makes a settling operation done once none of its replays is
// waiting or running, with its closing audit entry.
func settle(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, c dlq.ReplayCounts, now time.Time) (bool, error) {
	if c.Waiting+c.Running > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'done', finished_at = now(), updated_at = now()
				WHERE id = $1`, op.ID); err != nil {
		return false, fmt.Errorf("settle operation: %w", err)
	}
	return true, auditFinish(ctx, tx, op, &c, now)
}

// judgeCanary gives a canary its verdict once its replays have one
// (canaryVerdict).
func judgeCanary(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, c dlq.ReplayCounts, now time.Time) (bool, error) {
	verdict, next := canaryVerdict(c)
	if verdict == "" {
		return false, nil
	}
	return true, setVerdict(ctx, tx, op, c, now, dlq.ActionCanaryVerdict, `canary_verdict = $3`, verdict, next,
		map[string]any{"verdict": verdict, "canary": op.Canary})
}

// judgeGuard gives the died-again guard its verdict once the first
// GuardSample replays have settled: passed, or tripped, which pauses the
// operation (auto_paused).
func judgeGuard(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, c dlq.ReplayCounts, now time.Time) (bool, error) {
	died, sample, err := guardSample(ctx, tx, op.ID)
	if err != nil || sample < dlq.GuardSample {
		return false, err
	}
	if !guardTripped(died, sample, *op.DiedAgainPercent) {
		_, err := tx.ExecContext(ctx, `UPDATE operations SET guard_verdict = 'passed', updated_at = now() WHERE id = $1`, op.ID)
		return true, err
	}
	return true, setVerdict(ctx, tx, op, c, now, dlq.ActionBulkAutoPause, `guard_verdict = $3`, "tripped", dlq.OpAutoPaused,
		map[string]any{"died_again_percent": *op.DiedAgainPercent, "sample": sample, "sample_died_again": died})
}

// canaryVerdict judges a canary from its replays: died as soon as one
// died again (the rest need not be waited for), succeeded once every one
// has, none yet otherwise. It returns the state the operation waits in.
func canaryVerdict(c dlq.ReplayCounts) (string, dlq.OperationState) {
	switch {
	case c.DiedAgain > 0:
		return "died", dlq.OpCanaryFailed
	case c.Total() > 0 && c.Succeeded == c.Total():
		return "succeeded", dlq.OpCanary
	}
	return "", ""
}

// guardTripped: more than percent of the sample died again.
func guardTripped(died, sample int64, percent float64) bool {
	return float64(died)*100 > percent*float64(sample)
}

// guardSample reads the first GuardSample replays of an operation to
// settle, in the order they settled, and how many of them died again.
func guardSample(ctx context.Context, tx *sqlx.Tx, opID int64) (died, sample int64, err error) {
	// A replay in another system settles in source_replays; one whose job
	// the source lost ran to an end unknown, and is no evidence either way.
	err = tx.QueryRowxContext(ctx, `SELECT count(*) FILTER (WHERE died), count(*) FROM (
		(SELECT state = 'dead' AS died, finished_at AS at, id FROM jobs
		 WHERE operation_id = $1 AND state IN ('succeeded', 'dead') ORDER BY finished_at, id LIMIT $2)
		UNION ALL
		(SELECT state = 'died_again', settled_at, id FROM source_replays
		 WHERE operation_id = $1 AND state IN ('succeeded', 'died_again') ORDER BY settled_at, id LIMIT $2)
		ORDER BY at, id LIMIT $2) s`, opID, dlq.GuardSample).Scan(&died, &sample)
	if err != nil {
		return 0, 0, fmt.Errorf("guard sample: %w", err)
	}
	return died, sample, nil
}

// setVerdict records a verdict column (set, with the verdict as $3), moves
// the operation to next and audits it, as the system (the operation's
// starter is the actor: it acts on their behalf).
func setVerdict(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, c dlq.ReplayCounts, now time.Time, action, set, verdict string,
	next dlq.OperationState, details map[string]any) error {
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = $2, `+set+`, updated_at = now() WHERE id = $1`,
		op.ID, next, verdict); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	counts := map[string]int64{"matched": op.Matched, dlq.PastTense(string(op.Kind)): op.Done}
	c.AddTo(counts)
	details["kind"], details["from"], details["to"] = op.Kind, op.State, next
	details["started_audit_event_id"] = op.AuditEventID
	opID := op.ID
	_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: now, Actor: op.Actor, Action: action, OperationID: &opID, Counts: audit.MustJSON(counts), Reason: op.Reason,
		Details: audit.MustJSON(details),
	})
	return err
}

// ReplayOutcomes returns the outcome of the replay of each of the given
// letters that was replayed (the others are absent). A replay that died
// again is the letter whose job_id is the replay job (unique) and whose
// replay_of is the first letter (the worker copies it from the job): both
// must hold, since a letter's job_id names a job only once that job
// existed (seeded or imported letters name ids of their own). A letter of
// a source that runs its own jobs (River) was replayed there: its replay
// job is that system's, never looked for among Redrive's jobs, and it died
// again when a letter names it as the one it replays.
func (s *Store) ReplayOutcomes(ctx context.Context, letterIDs []int64) (map[int64]dlq.ReplayOutcome, error) {
	var rows []dlq.ReplayOutcome
	err := s.db.SelectContext(ctx, &rows, `
		SELECT d.id AS letter_id, coalesce(d.replay_job_id, 0) AS job_id,
			coalesce(j.state, CASE r.state WHEN 'succeeded' THEN 'succeeded' WHEN 'died_again' THEN 'dead'
				WHEN 'running' THEN 'running' WHEN 'gone' THEN '' ELSE 'available' END, '') AS job_state,
			CASE WHEN ls.source IS NULL THEN n.id
			     ELSE (SELECT l.id FROM dead_letter_records l WHERE l.replay_of = d.id ORDER BY l.id LIMIT 1) END AS died_again_as,
			coalesce(ls.source, '') AS source
		FROM dead_letters d
		LEFT JOIN letter_sources ls ON ls.dead_letter_id = d.id
		LEFT JOIN LATERAL (SELECT state FROM source_replays WHERE dead_letter_id = d.id ORDER BY id DESC LIMIT 1) r ON ls.source IS NOT NULL
		LEFT JOIN jobs j ON j.id = d.replay_job_id AND ls.source IS NULL
		LEFT JOIN dead_letters n ON n.job_id = d.replay_job_id AND n.replay_of = d.id AND ls.source IS NULL
		WHERE d.id = ANY($1) AND d.replayed_at IS NOT NULL`, pq.Array(letterIDs))
	if err != nil {
		return nil, fmt.Errorf("replay outcomes: %w", err)
	}
	out := make(map[int64]dlq.ReplayOutcome, len(rows))
	for _, r := range rows {
		out[r.LetterID] = r
	}
	return out, nil
}

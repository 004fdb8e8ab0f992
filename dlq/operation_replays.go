package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Following a bulk replay to its outcome. Its letters are handed to the
// queue first (enqueued); each replay job then settles: it succeeds, or it
// dies again and becomes a new dead letter (whose job_id is the replay
// job). The operation is done only when every replay has settled, or when
// the operator stops following it.

// The follow-through's audit actions.
const (
	ActionCanaryVerdict     = "canary_verdict"      // the canary's replays settled, or one died
	ActionBulkAutoPause     = "bulk_auto_pause"     // the died-again guard paused the releases
	ActionBulkResume        = "bulk_resume"         // the operator resumed after the guard
	ActionBulkStopFollowing = "bulk_stop_following" // the operator ended it before every replay settled
)

// The died-again guard: it judges on the first GuardSample replays to
// settle, and until it has, at most GuardWindow replays are in flight
// (enqueued, not settled), so that a bad replay costs at most that many
// new dead letters before the operation pauses. Operations of more than
// GuardDefaultOver letters get DefaultDiedAgainPercent unless the operator
// says otherwise.
const (
	GuardSample             = 100
	GuardWindow             = 5 * GuardSample
	GuardDefaultOver        = 1000
	DefaultDiedAgainPercent = 20.0
)

// ReplayCounts says where an operation's replay jobs are.
type ReplayCounts struct {
	Waiting   int64 `db:"waiting" json:"waiting"` // available or retrying
	Running   int64 `db:"running" json:"running"`
	Succeeded int64 `db:"succeeded" json:"succeeded"`
	DiedAgain int64 `db:"died_again" json:"died_again"` // dead: a new dead letter
}

// Settled counts the replays that succeeded or died again.
func (c ReplayCounts) Settled() int64 { return c.Succeeded + c.DiedAgain }

// Total counts every replay job of the operation.
func (c ReplayCounts) Total() int64 { return c.Waiting + c.Running + c.Settled() }

// Scan reads the counts as operations.replays keeps them (JSON).
func (c *ReplayCounts) Scan(src any) error {
	b, ok := src.([]byte)
	if !ok {
		return fmt.Errorf("replay counts: %T is not JSON", src)
	}
	return json.Unmarshal(b, c)
}

func (c ReplayCounts) into(m map[string]int64) {
	m["succeeded"], m["died_again"], m["waiting"], m["running"] = c.Succeeded, c.DiedAgain, c.Waiting, c.Running
}

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
const replayCountsSQL = `
SELECT count(*) FILTER (WHERE state IN ('available', 'retrying')) AS waiting,
	count(*) FILTER (WHERE state = 'running') AS running,
	count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
	count(*) FILTER (WHERE state = 'dead') AS died_again
FROM jobs WHERE operation_id = $1`

func replayCounts(ctx context.Context, q sqlx.QueryerContext, opID int64) (ReplayCounts, error) {
	var c ReplayCounts
	// Scanned field by field: ReplayCounts is a Scanner (of the JSON
	// the row keeps), which sqlx would otherwise hand the whole row.
	if err := q.QueryRowxContext(ctx, replayCountsSQL, opID).Scan(&c.Waiting, &c.Running, &c.Succeeded, &c.DiedAgain); err != nil {
		return ReplayCounts{}, fmt.Errorf("count replays of operation %d: %w", opID, err)
	}
	return c, nil
}

// OperationReplays counts where an operation's replay jobs are.
func (s *Store) OperationReplays(ctx context.Context, opID int64) (ReplayCounts, error) {
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

func (s *Store) followOperation(ctx context.Context, id int64, now time.Time) (bool, error) {
	changed := false
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var op Operation
		// SKIP LOCKED: a batch (or another console) holds it; next pass.
		err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE SKIP LOCKED`, id)
		if translate(err) == ErrNotFound {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock operation: %w", err)
		}
		if op.State.Finished() || op.Kind != OpReplay {
			return nil
		}
		c, err := replayCounts(ctx, tx, op.ID)
		if err != nil {
			return err
		}
		if op.Replays == nil || *op.Replays != c {
			// Only when they moved: a row version a second per operation
			// is nothing, but a settled one need not write at all.
			if _, err := tx.ExecContext(ctx, `UPDATE operations SET replays = $2 WHERE id = $1`, op.ID, mustJSON(c)); err != nil {
				return fmt.Errorf("keep replay counts: %w", err)
			}
		}
		switch {
		case op.State == OpSettling:
			if c.Waiting+c.Running > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'done', finished_at = now(), updated_at = now()
				WHERE id = $1`, op.ID); err != nil {
				return fmt.Errorf("settle operation: %w", err)
			}
			changed = true
			return auditFinish(ctx, tx, op, &c, now)
		case op.State == OpCanary && op.CanaryVerdict == nil:
			verdict, next := canaryVerdict(c)
			if verdict == "" {
				return nil
			}
			changed = true
			return setVerdict(ctx, tx, op, c, now, ActionCanaryVerdict, `canary_verdict = $3`, verdict, next,
				map[string]any{"verdict": verdict, "canary": op.Canary})
		case op.State == OpRunning && op.guardPending():
			died, sample, err := guardSample(ctx, tx, op.ID)
			if err != nil || sample < GuardSample {
				return err
			}
			changed = true
			if !guardTripped(died, sample, *op.DiedAgainPercent) {
				_, err := tx.ExecContext(ctx, `UPDATE operations SET guard_verdict = 'passed', updated_at = now() WHERE id = $1`, op.ID)
				return err
			}
			return setVerdict(ctx, tx, op, c, now, ActionBulkAutoPause, `guard_verdict = $3`, "tripped", OpAutoPaused,
				map[string]any{"died_again_percent": *op.DiedAgainPercent, "sample": sample, "sample_died_again": died})
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("follow operation %d: %w", id, err)
	}
	return changed, nil
}

// canaryVerdict judges a canary from its replays: died as soon as one
// died again (the rest need not be waited for), succeeded once every one
// has, none yet otherwise. It returns the state the operation waits in.
func canaryVerdict(c ReplayCounts) (string, OperationState) {
	switch {
	case c.DiedAgain > 0:
		return "died", OpCanaryFailed
	case c.Total() > 0 && c.Succeeded == c.Total():
		return "succeeded", OpCanary
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
	err = tx.QueryRowxContext(ctx, `SELECT count(*) FILTER (WHERE state = 'dead'), count(*) FROM (
		SELECT state FROM jobs WHERE operation_id = $1 AND state IN ('succeeded', 'dead')
		ORDER BY finished_at, id LIMIT $2) s`, opID, GuardSample).Scan(&died, &sample)
	if err != nil {
		return 0, 0, fmt.Errorf("guard sample: %w", err)
	}
	return died, sample, nil
}

// setVerdict records a verdict column (set, with the verdict as $3), moves
// the operation to next and audits it, as the system (the operation's
// starter is the actor: it acts on their behalf).
func setVerdict(ctx context.Context, tx *sqlx.Tx, op Operation, c ReplayCounts, now time.Time, action, set, verdict string,
	next OperationState, details map[string]any) error {
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = $2, `+set+`, updated_at = now() WHERE id = $1`,
		op.ID, next, verdict); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	counts := map[string]int64{"matched": op.Matched, pastTense(string(op.Kind)): op.Done}
	c.into(counts)
	details["kind"], details["from"], details["to"] = op.Kind, op.State, next
	details["started_audit_event_id"] = op.AuditEventID
	opID := op.ID
	_, err := appendAudit(ctx, tx, AuditEntry{
		At: now, Actor: op.Actor, Action: action, OperationID: &opID, Counts: mustJSON(counts), Reason: op.Reason,
		Details: mustJSON(details),
	})
	return err
}

// ReplayOutcome is what became of one letter's replay: its job's state
// and, when it died again, the letter it became.
type ReplayOutcome struct {
	LetterID int64 `db:"letter_id" json:"dead_letter_id"`
	JobID    int64 `db:"job_id" json:"job_id"`
	// JobState is "" when the job is gone (a job is kept while its letter
	// is; this is a letter purged and restored from elsewhere).
	JobState    State  `db:"job_state" json:"job_state"`
	DiedAgainAs *int64 `db:"died_again_as" json:"died_again_as,omitempty"`
}

// ReplayOutcomes returns the outcome of the replay of each of the given
// letters that was replayed (the others are absent). A replay that died
// again is the letter whose job_id is the replay job (unique) and whose
// replay_of is the first letter (the worker copies it from the job): both
// must hold, since a letter's job_id names a job only once that job
// existed (seeded or imported letters name ids of their own).
func (s *Store) ReplayOutcomes(ctx context.Context, letterIDs []int64) (map[int64]ReplayOutcome, error) {
	var rows []ReplayOutcome
	err := s.db.SelectContext(ctx, &rows, `
		SELECT d.id AS letter_id, d.replay_job_id AS job_id, coalesce(j.state, '') AS job_state, n.id AS died_again_as
		FROM dead_letters d
		LEFT JOIN jobs j ON j.id = d.replay_job_id
		LEFT JOIN dead_letters n ON n.job_id = d.replay_job_id AND n.replay_of = d.id
		WHERE d.id = ANY($1) AND d.replay_job_id IS NOT NULL`, pq.Array(letterIDs))
	if err != nil {
		return nil, fmt.Errorf("replay outcomes: %w", err)
	}
	out := make(map[int64]ReplayOutcome, len(rows))
	for _, r := range rows {
		out[r.LetterID] = r
	}
	return out, nil
}

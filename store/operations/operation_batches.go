package operations

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/postgres"
)

// The batch statements take the next letters of the selection after the
// operation's cursor, act on the pending ones, link them to the operation's
// audit entry, and report the last letter seen so the cursor can move past
// the batch. The whole batch, the cursor and the audit links commit
// together, which is what lets a crashed operation resume without acting on
// a letter twice.
//
// A batch walks the selection's pending letters oldest first on
// (failed_at, id), the list's order read backwards, where the pending list
// would read them (Filter.source): pending_dead_letters by time or reason,
// or the index of the letters' task, queue, error class or error group,
// each letter checked for a pending row on the way. Either way one index
// holds the filter's letters in that order, so a batch of 2,000 reads
// about 2,000 index entries. Letters that are not pending could never be
// acted on, so leaving them out changes nothing but the cost; they count as
// skipped when the operation finishes (Matched - Done).
//
// Deleting the letters' pending rows comes first and is the claim: of two
// transactions acting on a letter, only the one whose DELETE removed its
// row goes on (the other's DELETE, re-checking the row once the first
// commits, finds it gone), and only the letters it took get an outcome, a
// job and an audit link. The letter's own row is never written: its
// outcome is a narrow row of dead_letter_outcomes (00101_letters.sql says
// what that saves). A replay's job id is drawn from the jobs sequence as
// the outcome is written, so the job can be inserted from the outcomes'
// RETURNING rows.
//
// Paced replays spread run_at: the k-th letter of a batch runs k / rate
// seconds after the batch's start slot, which is where the operation's
// previous letter left off (pace_origin + done / rate) or now, whichever is
// later. After a pause (a canary waiting for release, a console restart)
// pacing so resumes from now instead of releasing every overdue letter at
// once; RunOperationBatch moves pace_origin to match.
//
// The audit links are inserted without ON CONFLICT: a letter is changed at
// most once per operation (the claim), so its link cannot exist yet, and a
// plain insert costs a WAL record less than a speculative one.
//
// The statements are templates: the batch's letters (batchLettersSQL, or
// for several error groups one walk of it per group, merged), which is
// itself a template of the relation the batch reads, the selection's
// condition and, once the operation has a position, the keyset condition
// after it; then what the kind leaves untaken (takeAll, or
// takeReplayable).
const batchSelectSQL = `batch AS MATERIALIZED (
	%s
), taken AS (
	DELETE FROM pending_dead_letters p USING batch b WHERE p.id = b.id%s
	RETURNING p.id, p.failed_at, p.task, p.queue
)`

// A discard takes every letter of its batch. A replay takes Redrive's own
// letters and those of a source that runs its own jobs again (River, a
// Celery app, or an HTTP source that names a replay endpoint), and leaves
// the others pending:
// their tasks are another system's, which Redrive's queue cannot run and
// which cannot be sent back, so they count as skipped, never as replayed.
const (
	takeAll        = ``
	takeReplayable = ` AND NOT EXISTS (SELECT 1 FROM letter_sources s JOIN sources src ON src.name = s.source
		WHERE s.dead_letter_id = p.id AND src.kind NOT IN ('river', 'celery') AND src.replay_url IS NULL)`
)

// batchLettersSQL reads the next letters of a batch, oldest first.
const batchLettersSQL = `SELECT id, failed_at FROM %s
	WHERE %s AND id <= $1%s
	ORDER BY failed_at, id LIMIT $2`

// batchSummarySQL reports the batch's last letter (the new cursor), how
// many letters it saw and how many it changed (acted, a CTE of each kind).
const batchSummarySQL = `
SELECT last.failed_at, coalesce(last.id, 0), (SELECT count(*) FROM batch), (SELECT count(*) FROM acted)
FROM (SELECT 1) one
LEFT JOIN (SELECT failed_at, id FROM batch ORDER BY failed_at DESC, id DESC LIMIT 1) last ON true`

// replayBatchSQL replays the letters taken: Redrive's own as jobs of its
// queue, inserted from the outcomes' RETURNING rows; another source's
// (theirs) as rows of source_replays, sent to the source once the batch has
// committed (SendSourceReplays). Both are paced alike: k is a letter's
// place in the batch, and runAt (below) its start.
const replayBatchSQL = `
WITH %s, theirs AS MATERIALIZED (
	SELECT s.dead_letter_id, s.source, s.external_id
	FROM letter_sources s JOIN taken t ON t.id = s.dead_letter_id
), marked AS (
	INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, replayed_at, replayed_by, replay_job_id)
	SELECT t.failed_at, t.id, t.task, t.queue, now(), $6,
		CASE WHEN th.dead_letter_id IS NULL THEN nextval(` + postgres.JobsSequenceSQL + `) END
	FROM taken t LEFT JOIN theirs th ON th.dead_letter_id = t.id
	RETURNING dead_letter_id, replay_job_id
), paced AS MATERIALIZED (
	SELECT m.*, row_number() OVER (ORDER BY m.dead_letter_id) AS k FROM marked m
), ours AS (
	INSERT INTO jobs (id, queue, task, args, kwargs, max_attempts, run_at, replay_of, operation_id)
	OVERRIDING SYSTEM VALUE
	SELECT m.replay_job_id, coalesce($9::text, r.queue), r.task, r.args, r.kwargs, coalesce($10::integer, r.max_attempts),
		` + runAtSQL + `, r.id, $8::bigint
	FROM paced m
	JOIN dead_letter_records r ON r.id = m.dead_letter_id
	WHERE m.replay_job_id IS NOT NULL
	ORDER BY r.id
	RETURNING replay_of
), queued AS (
	INSERT INTO source_replays (dead_letter_id, operation_id, source, external_id, run_at)
	SELECT th.dead_letter_id, $8::bigint, th.source, th.external_id, ` + runAtSQL + `
	FROM paced m JOIN theirs th ON th.dead_letter_id = m.dead_letter_id
	ORDER BY th.dead_letter_id
	RETURNING dead_letter_id
), acted AS (
	SELECT replay_of AS id FROM ours UNION ALL SELECT dead_letter_id FROM queued
), linked AS (
	INSERT INTO audit_event_letters (dead_letter_id, audit_event_id, outcome)
	SELECT id, $7::bigint, 'replay' FROM acted WHERE $7::bigint IS NOT NULL
)` + batchSummarySQL

// runAtSQL is when the k-th replay of a batch starts: now, or on a paced
// operation ($3 a second) its slot after the batch's start slot; never
// before the operation's start time ($11; greatest ignores a NULL).
const runAtSQL = `CASE WHEN $3::float8 IS NULL THEN greatest(now(), $11::timestamptz)
		     ELSE greatest(now(), $11::timestamptz, $4::timestamptz + ($5::bigint / $3::float8) * interval '1 second')
		          + (m.k / $3::float8) * interval '1 second' END`

const discardBatchSQL = `
WITH %s, acted AS (
	INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, discarded_at, discarded_by, discard_reason)
	SELECT failed_at, id, task, queue, now(), $3, $4 FROM taken
	RETURNING dead_letter_id AS id
), linked AS (
	INSERT INTO audit_event_letters (dead_letter_id, audit_event_id, outcome)
	SELECT id, $5::bigint, 'discard' FROM acted WHERE $5::bigint IS NOT NULL
)` + batchSummarySQL

// RunOperationBatch does the next batch of a running operation in one
// transaction, after the operation's own cursor (opStream). Another
// process working on the same operation is skipped (its row is locked), so
// two runners never interleave on one operation. A canary operation stops
// after its first Canary letters in state canary.
func (s *Store) RunOperationBatch(ctx context.Context, opID int64, batchSize int, now time.Time) (dlq.BatchResult, error) {
	var res dlq.BatchResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) (err error) {
		res, err = nextBatch(ctx, tx, s.probe, opStream{opID: opID, size: batchSize}, now)
		return err
	})
	if err != nil {
		return dlq.BatchResult{}, fmt.Errorf("operation %d: %w", opID, err)
	}
	return res, nil
}

// batchStream is a stream of an operation's batches, each taking the
// next letters after the stream's cursor: the operation's one stream
// (opStream, RunOperationBatch) or one of its lanes (laneStream,
// RunOperationLane). nextBatch runs a batch of either.
type batchStream interface {
	// lock takes the stream for this transaction and reads the operation;
	// false when another runner has it (or, for opStream, it is gone).
	lock(ctx context.Context, tx *sqlx.Tx) (dlq.Operation, bool, error)
	// next is where the running operation's next batch starts and how
	// many letters it may take; false when the stream has nothing to do
	// now.
	next(ctx context.Context, tx *sqlx.Tx, op dlq.Operation) (from batchCursor, limit int, ok bool, err error)
	// share is the part of the selection the stream walks: the letters of
	// lane (its blocks of ids) when lanes > 1.
	share() (lane, lanes int)
	// advance commits the batch to the operation's row: its cursor and
	// counts. It returns the operation as it now is, and whether its
	// selection is exhausted, so that it is to be finished.
	advance(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, b batch) (after dlq.Operation, finish bool, err error)
}

// batch is what one batch did: where it started, the last letter it saw
// (the new cursor), how many letters it saw and how many it changed.
type batch struct {
	from, last  batchCursor
	seen, acted int
}

// batchCursor is a place in a batch walk's order: a letter's (failed_at,
// id), or nil before the first letter.
type batchCursor struct {
	FailedAt *time.Time
	ID       int64
}

// nextBatch is the next batch of a stream's cursor, inside tx: lock the
// operation (or the lane), read the next letters after the cursor and act
// on them (one statement, batchQuery), advance the cursor, and finish the
// operation once its selection is exhausted.
func nextBatch(ctx context.Context, tx *sqlx.Tx, probe letters.ArgProbe, st batchStream, now time.Time) (dlq.BatchResult, error) {
	op, ok, err := st.lock(ctx, tx)
	if err != nil || !ok {
		return dlq.BatchResult{State: dlq.OpRunning}, err // another runner has it: nothing to do here
	}
	if op.State != dlq.OpRunning {
		return dlq.BatchResult{State: op.State, Finished: op.State.Finished()}, nil
	}
	from, limit, ok, err := st.next(ctx, tx, op)
	if err != nil || !ok {
		return dlq.BatchResult{State: op.State}, err
	}
	lane, lanes := st.share()
	b, err := takeBatch(ctx, tx, probe, op, from, limit, lane, lanes)
	if err != nil {
		return dlq.BatchResult{}, err
	}
	after, finish, err := st.advance(ctx, tx, op, b)
	res := dlq.BatchResult{State: after.State, Acted: b.acted, Skipped: b.seen - b.acted}
	if err != nil || !finish {
		return res, err
	}
	res.State, err = finishOperation(ctx, tx, after, now)
	res.Finished = res.State.Finished()
	return res, err
}

// takeBatch reads the next batch of at most limit letters of op's
// selection (of lane's share of it) after from, and acts on them. The
// selection is probed afresh for each batch: letters indexed since the
// last one are found, and the probe is a few index pages.
func takeBatch(ctx context.Context, tx *sqlx.Tx, probe letters.ArgProbe, op dlq.Operation, from batchCursor, limit, lane, lanes int) (batch, error) {
	sel, err := op.StoredSelection()
	if err != nil {
		return batch{}, err
	}
	if sel, err = probe.Selection(ctx, tx, sel); err != nil {
		return batch{}, err
	}
	op.CursorFailedAt, op.CursorID = from.FailedAt, from.ID
	query, args, err := batchQuery(op, sel, limit, lane, lanes)
	if err != nil {
		return batch{}, err
	}
	b := batch{from: from}
	if err := tx.QueryRowxContext(ctx, query, args...).Scan(&b.last.FailedAt, &b.last.ID, &b.seen, &b.acted); err != nil {
		return batch{}, fmt.Errorf("%s batch: %w", op.Kind, err)
	}
	return b, nil
}

// opStream is an operation's one stream of batches (RunOperationBatch),
// after the operation's own cursor. It holds the operation's row for the
// whole batch.
type opStream struct {
	opID int64
	size int
}

func (opStream) share() (lane, lanes int) { return 0, 1 }

// lock locks the operation's row, skipping it if another runner holds it.
func (o opStream) lock(ctx context.Context, tx *sqlx.Tx) (dlq.Operation, bool, error) {
	var op dlq.Operation
	err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations
			WHERE id = $1 FOR UPDATE SKIP LOCKED`, o.opID)
	if postgres.Translate(err) == dlq.ErrNotFound {
		return op, false, nil // locked by another runner, or gone
	}
	if err != nil {
		return op, false, fmt.Errorf("lock operation: %w", err)
	}
	return op, true, nil
}

// next starts at the operation's cursor. A batch of a canary takes no
// more than what is left of the canary, and while the died-again guard
// has yet to judge no more than its window leaves room for.
func (o opStream) next(ctx context.Context, tx *sqlx.Tx, op dlq.Operation) (batchCursor, int, bool, error) {
	from := batchCursor{FailedAt: op.CursorFailedAt, ID: op.CursorID}
	limit := o.size
	if left := canaryLeft(op); left > 0 {
		limit = left
	}
	if !op.GuardPending() {
		return from, limit, true, nil
	}
	// Until the guard has judged, at most GuardWindow replays are in
	// flight: releasing them all at once would leave the guard nothing to
	// stop (a paced replay hands every letter to the queue within seconds,
	// its pace being in run_at).
	c, err := replayCounts(ctx, tx, op.ID)
	if err != nil {
		return from, 0, false, err
	}
	limit = min(limit, dlq.GuardWindow-int(op.Done-c.Settled()))
	return from, limit, limit > 0, nil // none: the runner comes back at its next poll
}

// canaryLeft is how many letters of op's canary are yet to be replayed;
// 0 for an operation without a canary or past it.
func canaryLeft(op dlq.Operation) int {
	if op.Kind == dlq.OpReplay && op.Canary > 0 && op.Done < int64(op.Canary) {
		return op.Canary - int(op.Done)
	}
	return 0
}

// advance moves the operation's cursor past the batch and adds it to the
// counts; a batch that found nothing leaves the row for finishOperation.
func (o opStream) advance(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, b batch) (dlq.Operation, bool, error) {
	if b.seen == 0 {
		return op, true, nil
	}
	next := dlq.OpRunning
	if left := canaryLeft(op); left > 0 && b.acted >= left {
		// The canary is Canary letters replayed, not seen: letters
		// skipped (already handled) do not count towards it, and once
		// it is complete a released operation never stops again.
		next = dlq.OpCanary
	}
	// pace_origin moves with a pause, as the batch's start slot did
	// (SET expressions read the row as it was: the old done_count).
	_, err := tx.ExecContext(ctx, `UPDATE operations SET cursor_failed_at = $6, cursor_id = $2,
			done_count = done_count + $3, skipped = skipped + $4, state = $5, updated_at = now(),
			pace_origin = CASE WHEN rate_per_second IS NULL THEN pace_origin
				ELSE greatest(now(), pace_origin + (done_count / rate_per_second) * interval '1 second')
				     - (done_count / rate_per_second) * interval '1 second' END
			WHERE id = $1`,
		op.ID, b.last.ID, b.acted, b.seen-b.acted, next, b.last.FailedAt)
	if err != nil {
		return op, false, fmt.Errorf("advance operation: %w", err)
	}
	op.State = next
	return op, false, nil
}

// batchQuery is the statement of op's next batch of at most limit letters.
// With lanes > 1 it takes only the letters of lane (its blocks of ids).
func batchQuery(op dlq.Operation, sel dlq.Selection, limit, lane, lanes int) (string, []any, error) {
	var query string
	var args []any
	take := takeAll
	switch op.Kind {
	case dlq.OpReplay:
		query, take = replayBatchSQL, takeReplayable
		args = []any{op.MaxID, limit, op.RatePerSecond, op.PaceOrigin, op.Done, op.Actor, op.AuditEventID, op.ID,
			op.TargetQueue, op.TargetMaxAttempts, op.StartAt}
	case dlq.OpDiscard:
		query = discardBatchSQL
		args = []any{op.MaxID, limit, op.Actor, op.Reason, op.AuditEventID}
	default:
		return "", nil, fmt.Errorf("unknown operation kind %q", op.Kind)
	}
	pending := sel.PendingOnly()
	src := letters.PendingSource(sel)
	after := ""
	if op.CursorFailedAt != nil {
		// A row comparison: the start of the index range scan.
		args = append(args, *op.CursorFailedAt, op.CursorID)
		after = fmt.Sprintf(" AND (failed_at, id) > ($%d, $%d)", len(args)-1, len(args))
	}
	if lanes > 1 {
		// Literals: small numbers of our own, and the planner sees the
		// condition as a filter on the index's id column.
		after += fmt.Sprintf(" AND id / %d %% %d = %d", laneBlock, lanes, lane)
	}
	read := func(sel dlq.Selection, args []any) (string, []any) {
		where, selArgs := letters.SelectionWhere(sel, src, len(args))
		return fmt.Sprintf(batchLettersSQL, src.Table(), where, after), append(args, selArgs...)
	}
	var batch string
	if pending.Filter != nil && letters.WalksGroups(*pending.Filter, src) {
		batch, args = letters.EachGroupSQL(*pending.Filter, args, "failed_at, id", "$2", func(g dlq.Filter, args []any) (string, []any) {
			return read(dlq.Selection{Filter: &g}, args)
		})
	} else {
		batch, args = read(pending, args)
	}
	return fmt.Sprintf(query, fmt.Sprintf(batchSelectSQL, batch, take)), args, nil
}

// finishOperation closes the first phase of an operation whose selection
// is exhausted. Letters that left the selection between confirmation and
// processing (replayed or discarded by someone else) count as skipped. A
// discard is then done, and its closing audit entry written; a replay is
// settling until its replays have (FollowOperations), and its closing
// entry waits until then. It returns the state it moved to.
func finishOperation(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, now time.Time) (dlq.OperationState, error) {
	skipped := max(op.Matched-op.Done, op.Skipped)
	if op.Kind == dlq.OpReplay {
		// Counted once here too, not only at the follower's next tick: the
		// settling operation's second phase starts with every replay in
		// it, never with the counts of its canary.
		c, err := replayCounts(ctx, tx, op.ID)
		if err != nil {
			return "", err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'settling', skipped = $2, enqueued_at = now(),
			updated_at = now(), replays = $3 WHERE id = $1`, op.ID, skipped, audit.MustJSON(c)); err != nil {
			return "", fmt.Errorf("finish enqueueing: %w", err)
		}
		return dlq.OpSettling, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET state = 'done', skipped = $2, finished_at = now(),
		updated_at = now() WHERE id = $1`, op.ID, skipped); err != nil {
		return "", fmt.Errorf("finish operation: %w", err)
	}
	op.Skipped = skipped
	return dlq.OpDone, auditFinish(ctx, tx, op, nil, now)
}

// auditFinish writes an operation's closing audit entry with its final
// counts, and for a replay what its replays did.
func auditFinish(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, replays *dlq.ReplayCounts, now time.Time) error {
	counts := map[string]int64{"matched": op.Matched, "skipped": op.Skipped}
	counts[dlq.PastTense(string(op.Kind))] = op.Done
	if replays != nil {
		counts["succeeded"], counts["died_again"] = replays.Succeeded, replays.DiedAgain
	}
	opID := op.ID
	_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: now, Actor: op.Actor, Action: dlq.ActionBulkFinish, OperationID: &opID,
		Counts: audit.MustJSON(counts), Reason: op.Reason,
		Details: audit.MustJSON(map[string]any{"kind": op.Kind, "started_audit_event_id": op.AuditEventID}),
	})
	return err
}

// FailOperation stops a running operation whose batches keep failing (a
// selection the database refuses, say), keeping why in its error. Letters
// already handled stay handled; the stop is audited with the final counts.
// An operation that is no longer running is left as it is.
func (s *Store) FailOperation(ctx context.Context, id int64, cause string, now time.Time) error {
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var op dlq.Operation
		err := tx.GetContext(ctx, &op, `UPDATE operations SET state = 'failed', error = $2, finished_at = now(),
			updated_at = now() WHERE id = $1 AND state = 'running' RETURNING `+operationColumns, id, cause)
		if postgres.Translate(err) == dlq.ErrNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		counts := map[string]int64{"matched": op.Matched, "skipped": op.Skipped}
		counts[dlq.PastTense(string(op.Kind))] = op.Done
		opID := op.ID
		_, err = audit.AppendAudit(ctx, tx, dlq.AuditEntry{
			At: now, Actor: op.Actor, Action: dlq.ActionBulkFinish, OperationID: &opID,
			Counts: audit.MustJSON(counts), Reason: op.Reason,
			Details: audit.MustJSON(map[string]any{"kind": op.Kind, "state": dlq.OpFailed, "error": cause,
				"started_audit_event_id": op.AuditEventID}),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("fail operation %d: %w", id, err)
	}
	return nil
}

// CancelOperation stops a running or waiting operation. Letters already
// handled stay handled; the rest are left alone. A settling operation has
// nothing left to cancel: StopFollowing ends it.
func (s *Store) CancelOperation(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error) {
	return s.changeOperation(ctx, p, dlq.ActionBulkCancel, []dlq.OperationState{dlq.OpRunning, dlq.OpCanary, dlq.OpCanaryFailed, dlq.OpAutoPaused}, dlq.OpCancelled)
}

// ReleaseCanary lets an operation waiting after its canary replay the rest,
// also after a canary that died (the operator's "release anyway").
func (s *Store) ReleaseCanary(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error) {
	return s.changeOperation(ctx, p, dlq.ActionCanaryRelease, []dlq.OperationState{dlq.OpCanary, dlq.OpCanaryFailed}, dlq.OpRunning)
}

// ResumeOperation lets an operation the died-again guard paused release
// the rest. The guard has judged and does not pause it again.
func (s *Store) ResumeOperation(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error) {
	return s.changeOperation(ctx, p, dlq.ActionBulkResume, []dlq.OperationState{dlq.OpAutoPaused}, dlq.OpRunning)
}

// StopFollowing ends a settling operation before its replays have all
// settled: it is done, and its replays go on as any job does.
func (s *Store) StopFollowing(ctx context.Context, p dlq.ChangeOperationParams) (dlq.Operation, error) {
	return s.changeOperation(ctx, p, dlq.ActionBulkStopFollowing, []dlq.OperationState{dlq.OpSettling}, dlq.OpDone)
}

func (s *Store) changeOperation(ctx context.Context, p dlq.ChangeOperationParams, action string, from []dlq.OperationState, to dlq.OperationState) (dlq.Operation, error) {
	var op dlq.Operation
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		_, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, action, dlq.RequestHash(action, p.ID), &op, func() error {
			return changeOperationTx(ctx, tx, p, action, from, to, &op)
		})
		return err
	})
	if err != nil {
		return dlq.Operation{}, fmt.Errorf("%s: %w", action, err)
	}
	return op, nil
}

// changeOperationTx moves the operation p.ID from one of the states from
// to to, inside tx, leaving it in op and an audit entry behind.
func changeOperationTx(ctx context.Context, tx *sqlx.Tx, p dlq.ChangeOperationParams, action string, from []dlq.OperationState, to dlq.OperationState, op *dlq.Operation) error {
	if err := tx.GetContext(ctx, op, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE`, p.ID); err != nil {
		return fmt.Errorf("operation %d: %w", p.ID, postgres.Translate(err))
	}
	if !slices.Contains(from, op.State) {
		return dlq.Errorf(dlq.EConflict, "operation %d is %s", op.ID, op.State)
	}
	finished := "NULL"
	if to.Finished() {
		finished = "now()"
	}
	var stoppedBy *string
	if action == dlq.ActionBulkStopFollowing {
		stoppedBy = &p.Actor.Name
	}
	was := op.State
	if err := tx.GetContext(ctx, op, `UPDATE operations SET state = $2, updated_at = now(), finished_at = `+finished+`,
			stopped_following_by = coalesce($3, stopped_following_by)
		WHERE id = $1 RETURNING `+operationColumns, op.ID, to, stoppedBy); err != nil {
		return fmt.Errorf("operation %d: %w", op.ID, err)
	}
	counts := map[string]int64{"matched": op.Matched, dlq.PastTense(string(op.Kind)): op.Done}
	if op.Kind == dlq.OpReplay {
		c, err := replayCounts(ctx, tx, op.ID)
		if err != nil {
			return err
		}
		c.AddTo(counts)
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET replays = $2 WHERE id = $1`, op.ID, audit.MustJSON(c)); err != nil {
			return fmt.Errorf("keep replay counts: %w", err)
		}
		op.Replays = &c
	}
	opID := op.ID
	_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: action, OperationID: &opID,
		Counts:    audit.MustJSON(counts),
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(map[string]any{"kind": op.Kind, "from": was, "started_audit_event_id": op.AuditEventID}),
	})
	return err
}

// OperationJobs returns the replay jobs of an operation's first letters (the
// canary), in id order, with their current state. A letter of another
// system names its job there (Source), in the state its replay has got to:
// waiting to run (available), running, succeeded, dead (died again), gone
// from its source, or refused by it.
func (s *Store) OperationJobs(ctx context.Context, opID int64, limit int) ([]dlq.JobOutcome, error) {
	var out []dlq.JobOutcome
	err := s.db.SelectContext(ctx, &out, `
		SELECT d.id AS dead_letter_id, coalesce(j.id, r.job_id, 0) AS job_id,
			coalesce(j.state, CASE r.state WHEN 'succeeded' THEN 'succeeded' WHEN 'died_again' THEN 'dead'
				WHEN 'running' THEN 'running' WHEN 'gone' THEN 'gone' WHEN 'refused' THEN 'refused'
				ELSE 'available' END) AS state,
			coalesce(j.attempt, 0) AS attempt, coalesce(j.last_error, r.problem) AS last_error,
			coalesce(j.args, d.args) AS args, coalesce(j.kwargs, d.kwargs) AS kwargs, coalesce(r.source, '') AS source
		FROM operations o
		JOIN audit_event_letters a ON a.audit_event_id = o.audit_event_id
		JOIN dead_letters d ON d.id = a.dead_letter_id
		LEFT JOIN source_replays r ON r.dead_letter_id = d.id AND r.operation_id = o.id
		LEFT JOIN jobs j ON j.id = d.replay_job_id AND r.id IS NULL
		WHERE o.id = $1 AND (j.id IS NOT NULL OR r.id IS NOT NULL)
		ORDER BY d.id LIMIT $2`, opID, limit)
	if err != nil {
		return nil, fmt.Errorf("operation %d jobs: %w", opID, err)
	}
	return out, nil
}

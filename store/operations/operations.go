package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/postgres"
)

const operationColumns = `id, kind, state, actor, reason, ids, filter, max_id, matched, rate_per_second, canary,
	cursor_failed_at, cursor_id, lane_cursors, done_count, skipped, pace_origin, audit_event_id, error, created_at, updated_at, finished_at,
	died_again_percent, guard_verdict, canary_verdict, enqueued_at, stopped_following_by, replays,
	target_queue, start_at, target_max_attempts`

// storedFilter is the filter as the operation keeps it: its own JSON, its
// times the instants they meant at confirmation (dlq.TimeBound), without
// the page.
func storedFilter(f dlq.Filter) json.RawMessage {
	b, err := json.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("marshal filter: %v", err)) // plain fields and times: cannot fail
	}
	return b
}

// selectionCount is how many letters a selection holds (all), how many of
// them are pending, and its highest id: MaxID when set, else the highest
// that matches now.
type selectionCount struct {
	all, pending, maxID int64
}

// countSelection counts sel's pending letters from their own table (a
// count of the view filtering on status would look up every letter's
// outcome), then, when the selection may hold letters of other statuses
// too, all of its letters in the view, whose highest id is then MaxID.
//
// A selection filtered to pending letters holds nothing else, so it is
// counted once: counting it in the view as well joined every pending
// letter to its record (in a bulk replay of 100,000 of a million seeded
// letters by "failed since", 390-490 ms of the API call, against 60 ms
// for the pending table's index). sel is probed (letters.ArgProbe).
func countSelection(ctx context.Context, q sqlx.QueryerContext, sel dlq.Selection) (selectionCount, error) {
	var c selectionCount
	src := letters.PendingSource(sel)
	where, args := letters.BoundedWhere(sel.PendingOnly(), src, 0)
	if err := q.QueryRowxContext(ctx, `SELECT count(*), coalesce(max(id), 0) FROM `+src.Table()+` WHERE `+where, args...).
		Scan(&c.pending, &c.maxID); err != nil {
		return c, fmt.Errorf("count selection: pending: %w", postgres.Translate(err))
	}
	c.all = c.pending
	if sel.Filter == nil || sel.Filter.Status != dlq.StatusPending {
		where, args := letters.BoundedWhere(sel, letters.AllLetters, 0)
		if err := q.QueryRowxContext(ctx, `SELECT count(*), coalesce(max(id), 0) FROM dead_letters WHERE `+where, args...).
			Scan(&c.all, &c.maxID); err != nil {
			return c, fmt.Errorf("count selection: %w", postgres.Translate(err))
		}
	}
	if sel.MaxID > 0 {
		c.maxID = sel.MaxID
	}
	return c, nil
}

// PreviewSelection counts, samples and breaks down a selection by task. It
// fixes MaxID (when not given) at the highest id that matches now.
func (s *Store) PreviewSelection(ctx context.Context, sel dlq.Selection, sampleSize int) (dlq.Preview, error) {
	if err := sel.Validate(); err != nil {
		return dlq.Preview{}, err
	}
	var p dlq.Preview
	sel, err := s.probe.Selection(ctx, s.db, sel)
	if err != nil {
		return dlq.Preview{}, fmt.Errorf("preview selection: %w", err)
	}
	c, err := countSelection(ctx, s.db, sel)
	if err != nil {
		return dlq.Preview{}, fmt.Errorf("preview selection: %w", err)
	}
	p.Matched, p.Other, p.MaxID = c.pending, c.all-c.pending, c.maxID
	src := letters.PendingSource(sel)
	where, args := letters.BoundedWhere(sel.PendingOnly(), src, 0)
	if err := s.db.SelectContext(ctx, &p.ByTask, `
		SELECT task, count(*) AS n FROM `+src.Table()+` WHERE `+where+`
		GROUP BY task ORDER BY n DESC, task LIMIT 20`, args...); err != nil {
		return dlq.Preview{}, fmt.Errorf("preview selection: by task: %w", err)
	}
	sample, args := letters.SampleSQL(sel, letters.DeadLetterColumns, sampleSize)
	if err := s.db.SelectContext(ctx, &p.Sample, sample, args...); err != nil {
		return dlq.Preview{}, fmt.Errorf("preview selection: sample: %w", err)
	}
	return p, nil
}

// CreateOperation records a bulk operation (bounded by the selection's
// MaxID) and its audit entry in one transaction. The operation then runs in
// the background (RunOperationBatch). With a used key, it returns the
// operation that key created.
func (s *Store) CreateOperation(ctx context.Context, p dlq.OperationParams) (dlq.Operation, error) {
	if err := p.Selection.Validate(); err != nil {
		return dlq.Operation{}, err
	}
	if p.Kind != dlq.OpReplay && p.Kind != dlq.OpDiscard {
		return dlq.Operation{}, &dlq.ValidationError{Fields: map[string]string{"kind": "must be replay or discard"}}
	}
	if p.Kind == dlq.OpDiscard && strings.TrimSpace(p.Reason) == "" {
		return dlq.Operation{}, &dlq.ValidationError{Fields: map[string]string{"reason": "a reason is required to discard"}}
	}
	if p.RatePerSecond < 0 || p.Canary < 0 {
		return dlq.Operation{}, &dlq.ValidationError{Fields: map[string]string{"rate_per_second": "must not be negative"}}
	}
	if err := p.Target.Validate(p.Now); err != nil {
		return dlq.Operation{}, err
	}
	if !p.Target.IsZero() && p.Kind != dlq.OpReplay {
		return dlq.Operation{}, &dlq.ValidationError{Fields: map[string]string{"queue": "only a replay has a queue, a start time or attempts"}}
	}
	if p.DiedAgainPercent != 0 && (p.Kind != dlq.OpReplay || !(p.DiedAgainPercent > 0 && p.DiedAgainPercent < 100)) {
		return dlq.Operation{}, &dlq.ValidationError{Fields: map[string]string{"died_again_percent": "a replay's guard is a percentage between 0 and 100 (0: no guard)"}}
	}
	var op dlq.Operation
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var ref struct {
			ID int64 `json:"operation_id"`
		}
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, "bulk_"+string(p.Kind), p.RequestHash(), &ref, func() error {
			var err error
			op, err = createOperationInTx(ctx, tx, s.probe, p)
			ref.ID = op.ID
			return err
		})
		if err != nil {
			return err
		}
		if repeated {
			return tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, ref.ID)
		}
		return nil
	})
	if err != nil {
		return dlq.Operation{}, fmt.Errorf("create %s operation: %w", p.Kind, err)
	}
	return op, nil
}

func createOperationInTx(ctx context.Context, tx *sqlx.Tx, probe letters.ArgProbe, p dlq.OperationParams) (dlq.Operation, error) {
	sel, err := probe.Selection(ctx, tx, p.Selection)
	if err != nil {
		return dlq.Operation{}, err
	}
	c, err := countSelection(ctx, tx, sel)
	if err != nil {
		return dlq.Operation{}, err
	}
	matched, maxID := c.all, c.maxID
	if p.Confirm != nil {
		if err := p.Confirm(c.pending); err != nil {
			return dlq.Operation{}, err
		}
	}
	var ids any
	var filter any
	if sel.Filter != nil {
		filter = []byte(storedFilter(*sel.Filter))
	} else {
		ids = pq.Array(sel.IDs)
	}
	var rate *float64
	if p.RatePerSecond > 0 {
		rate = &p.RatePerSecond
	}
	var guard *float64
	if p.DiedAgainPercent > 0 {
		guard = &p.DiedAgainPercent
	}
	var op dlq.Operation
	err = tx.GetContext(ctx, &op, `
		INSERT INTO operations (kind, actor, reason, ids, filter, max_id, matched, rate_per_second, canary, pace_origin, died_again_percent,
			target_queue, start_at, target_max_attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, greatest(now(), $12), $10, nullif($11, ''), $12, nullif($13, 0))
		RETURNING `+operationColumns,
		p.Kind, p.Actor.Name, p.Reason, ids, filter, maxID, matched, rate, p.Canary, guard,
		p.Target.Queue, nullTime(p.Target.StartAt), p.Target.MaxAttempts)
	if err != nil {
		return dlq.Operation{}, fmt.Errorf("insert operation: %w", postgres.Translate(err))
	}
	opID := op.ID
	var filterJSON *json.RawMessage
	if sel.Filter != nil {
		f := storedFilter(*sel.Filter)
		filterJSON = &f
	}
	details := map[string]any{"kind": p.Kind, "canary": p.Canary, "rate_per_second": p.RatePerSecond}
	if guard != nil {
		details["died_again_percent"] = *guard
	}
	p.Target.Details(details)
	if sel.Filter == nil {
		details["ids"] = sel.IDs
	}
	auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionBulkStart, OperationID: &opID,
		Filter: filterJSON, MaxID: &maxID, Counts: audit.MustJSON(map[string]int64{"matched": matched}),
		Reason: p.Reason, RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(details),
	})
	if err != nil {
		return dlq.Operation{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET audit_event_id = $2 WHERE id = $1`, op.ID, auditID); err != nil {
		return dlq.Operation{}, fmt.Errorf("link audit entry: %w", err)
	}
	op.AuditEventID = &auditID
	return op, nil
}

// Operation returns one operation.
func (s *Store) Operation(ctx context.Context, id int64) (dlq.Operation, error) {
	var op dlq.Operation
	if err := s.db.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, id); err != nil {
		return dlq.Operation{}, fmt.Errorf("operation %d: %w", id, postgres.Translate(err))
	}
	return op, nil
}

// RunnableOperations lists operations with work left, oldest first.
func (s *Store) RunnableOperations(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, `SELECT id FROM operations WHERE state = 'running' ORDER BY id`); err != nil {
		return nil, fmt.Errorf("runnable operations: %w", err)
	}
	return ids, nil
}

// nullTime is t as a column takes it: NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

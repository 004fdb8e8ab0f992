package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// OperationKind is what a bulk operation does to each letter.
type OperationKind string

// The bulk operation kinds.
const (
	OpReplay  OperationKind = "replay"
	OpDiscard OperationKind = "discard"
)

// OperationState is where a bulk operation is.
type OperationState string

// The operation states. A replay goes running → (canary →) running →
// settling → done: running while its letters are handed to the queue,
// settling while their replay jobs have not all succeeded or died again,
// done once they have (or once the operator stops following it). A
// discard has no jobs: running → done. canary_failed (a canary replay died
// again) and auto_paused (the died-again guard) wait for a decision:
// release or resume, or cancel. cancelled and failed end it early. Only
// running operations are worked on; settling, canary and guarded running
// ones are followed (FollowOperations).
const (
	OpRunning      OperationState = "running"
	OpCanary       OperationState = "canary" // the canary letters are replayed; waiting for release
	OpCanaryFailed OperationState = "canary_failed"
	OpAutoPaused   OperationState = "auto_paused"
	OpSettling     OperationState = "settling"
	OpDone         OperationState = "done"
	OpCancelled    OperationState = "cancelled"
	OpFailed       OperationState = "failed"
)

// OperationStates lists every state, in the order an operation meets them.
var OperationStates = []OperationState{OpRunning, OpCanary, OpCanaryFailed, OpAutoPaused, OpSettling, OpDone, OpCancelled, OpFailed}

// Finished reports whether the operation will do nothing more, and nothing
// more is followed: every replay settled, or the operator stopped
// following it, or it was cancelled or failed. The runner, the API's 200,
// the CLI's watch and the "operation ended" notification (a trigger on
// these same three states, 00107_notifications.sql) all mean this.
func (s OperationState) Finished() bool {
	return s == OpDone || s == OpCancelled || s == OpFailed
}

// Waiting reports whether the operation waits for a person's decision.
func (s OperationState) Waiting() bool {
	return s == OpCanary || s == OpCanaryFailed || s == OpAutoPaused
}

// Operation is a durable bulk replay or discard.
type Operation struct {
	ID            int64            `db:"id" json:"operation_id"`
	Kind          OperationKind    `db:"kind" json:"kind"`
	State         OperationState   `db:"state" json:"state"`
	Actor         string           `db:"actor" json:"actor"`
	Reason        string           `db:"reason" json:"reason,omitempty"`
	IDs           pq.Int64Array    `db:"ids" json:"ids,omitempty"`
	Filter        *json.RawMessage `db:"filter" json:"filter,omitempty"`
	MaxID         int64            `db:"max_id" json:"max_id"`
	Matched       int64            `db:"matched" json:"matched"`
	RatePerSecond *float64         `db:"rate_per_second" json:"rate_per_second,omitempty"`
	Canary        int              `db:"canary" json:"canary,omitempty"`
	// CursorFailedAt and CursorID are the last letter a batch saw (nil:
	// none yet); batches walk on (failed_at, id).
	CursorFailedAt *time.Time `db:"cursor_failed_at" json:"-"`
	CursorID       int64      `db:"cursor_id" json:"-"`
	// LaneCursors holds each lane's position once batches run in lanes
	// (RunOperationLane).
	LaneCursors  *json.RawMessage `db:"lane_cursors" json:"-"`
	Done         int64            `db:"done_count" json:"done"`
	Skipped      int64            `db:"skipped" json:"skipped"`
	PaceOrigin   *time.Time       `db:"pace_origin" json:"-"`
	AuditEventID *int64           `db:"audit_event_id" json:"audit_event_id,omitempty"`
	Error        *string          `db:"error" json:"error,omitempty"`
	CreatedAt    time.Time        `db:"created_at" json:"created_at"`
	UpdatedAt    time.Time        `db:"updated_at" json:"updated_at"`
	FinishedAt   *time.Time       `db:"finished_at" json:"finished_at,omitempty"`
	// DiedAgainPercent is the died-again guard (nil: none): more than this
	// share of the first GuardSample settled replays dying again pauses the
	// operation (auto_paused). GuardVerdict is nil until the guard has
	// judged, then "passed" or "tripped".
	DiedAgainPercent *float64 `db:"died_again_percent" json:"died_again_percent,omitempty"`
	GuardVerdict     *string  `db:"guard_verdict" json:"guard_verdict,omitempty"`
	// CanaryVerdict is nil until the canary's replays settle or one dies:
	// "succeeded" or "died".
	CanaryVerdict *string `db:"canary_verdict" json:"canary_verdict,omitempty"`
	// EnqueuedAt is when the last letter was handed to the queue.
	EnqueuedAt *time.Time `db:"enqueued_at" json:"enqueued_at,omitempty"`
	// StoppedFollowingBy names who ended the operation before its replays
	// had all settled.
	StoppedFollowingBy *string `db:"stopped_following_by" json:"stopped_following_by,omitempty"`
	// Replays is where its replay jobs were when the runner last counted
	// them (FollowOperations, about once a second); nil before the first
	// count, and for a discard.
	Replays *ReplayCounts `db:"replays" json:"replays,omitempty"`
}

// guardPending reports whether the died-again guard has yet to judge.
func (op Operation) guardPending() bool {
	return op.Kind == OpReplay && op.DiedAgainPercent != nil && op.GuardVerdict == nil
}

const operationColumns = `id, kind, state, actor, reason, ids, filter, max_id, matched, rate_per_second, canary,
	cursor_failed_at, cursor_id, lane_cursors, done_count, skipped, pace_origin, audit_event_id, error, created_at, updated_at, finished_at,
	died_again_percent, guard_verdict, canary_verdict, enqueued_at, stopped_following_by, replays`

// Selection is what a bulk operation acts on: explicit letter ids, or every
// letter matching a filter, bounded by MaxID so that letters arriving after
// the engineer confirmed are not swept in.
type Selection struct {
	IDs    []int64
	Filter *Filter
	// MaxID bounds the selection: letters with a higher id are left alone.
	// Zero means "the highest id matching now" (the API without a preview).
	MaxID int64
}

// Valid reports a problem with the selection's shape.
func (s Selection) valid() error {
	switch {
	case len(s.IDs) == 0 && s.Filter == nil:
		return &ValidationError{Fields: map[string]string{"selection": "select at least one letter, or a filter"}}
	case len(s.IDs) > 0 && s.Filter != nil:
		return &ValidationError{Fields: map[string]string{"selection": "give ids or a filter, not both"}}
	case len(s.IDs) > MaxBatch:
		return &ValidationError{Fields: map[string]string{"ids": fmt.Sprintf("at most %d ids; use a filter for more", MaxBatch)}}
	case s.Filter != nil && len(s.Filter.Groups()) > MaxFilterGroups:
		// An operation stores its filter and reads it back with
		// ParseFilter, which would refuse it: refused here, before it starts.
		return &ValidationError{Fields: map[string]string{"fingerprint": fmt.Sprintf("at most %d error groups", MaxFilterGroups)}}
	}
	for _, id := range s.IDs {
		if id <= 0 {
			return &ValidationError{Fields: map[string]string{"ids": fmt.Sprintf("letter ids are positive whole numbers; %d is not", id)}}
		}
	}
	return nil
}

// where returns the selection's condition in a query of src, numbering
// its arguments after the first offset ones. Of pending_dead_letters, the
// letters a bulk action can change, it selects the selection's pending
// letters: a filter for another status then selects none.
func (s Selection) where(src letterSource, offset int) (string, []any) {
	if s.Filter == nil {
		return fmt.Sprintf("id = ANY($%d)", offset+1), []any{pq.Array(s.IDs)}
	}
	clause, args := s.Filter.FirstPage().where(src, false, offset)
	clause = strings.TrimPrefix(clause, "WHERE ")
	if clause == "" {
		return "TRUE", nil
	}
	return clause, args
}

// storedFilter is the filter as the operation keeps it: pinned (Filter.Pinned).
func storedFilter(f Filter) json.RawMessage {
	return mustJSON(f.Pinned())
}

func loadFilter(raw json.RawMessage) (Filter, error) {
	var v url.Values
	if err := json.Unmarshal(raw, &v); err != nil {
		return Filter{}, fmt.Errorf("stored filter: %w", err)
	}
	return ParseFilter(v, time.Now())
}

// selectionOf rebuilds an operation's selection from its row.
func (op Operation) selection() (Selection, error) {
	if op.Filter == nil {
		return Selection{IDs: op.IDs, MaxID: op.MaxID}, nil
	}
	f, err := loadFilter(*op.Filter)
	if err != nil {
		return Selection{}, err
	}
	return Selection{Filter: &f, MaxID: op.MaxID}, nil
}

// pendingOnly is the selection narrowed to its pending letters.
func (s Selection) pendingOnly() Selection {
	if s.Filter != nil && s.Filter.Status == "" {
		f := *s.Filter
		f.Status = StatusPending
		s.Filter = &f
	}
	return s
}

// pendingSource is where the selection's pending letters are best read
// from to be counted, sampled or acted on (Filter.source). Ids are looked
// up by the pending table's key; a filter for another status has no
// pending letters, which the pending table's condition for it says
// (FALSE).
func (s Selection) pendingSource() letterSource {
	if s.Filter == nil || (s.Filter.Status != "" && s.Filter.Status != StatusPending) {
		return pendingLetters
	}
	return s.pendingOnly().Filter.source()
}

// boundedWhere is where's condition, bounded by MaxID when set; its
// arguments are numbered after the first offset ones.
func (s Selection) boundedWhere(src letterSource, offset int) (string, []any) {
	where, args := s.where(src, offset)
	if s.MaxID > 0 {
		args = append(args, s.MaxID)
		where += fmt.Sprintf(" AND id <= $%d", offset+len(args))
	}
	return where, args
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
// for the pending table's index).
func countSelection(ctx context.Context, q sqlx.QueryerContext, sel Selection) (selectionCount, error) {
	var c selectionCount
	src := sel.pendingSource()
	where, args := sel.pendingOnly().boundedWhere(src, 0)
	if err := q.QueryRowxContext(ctx, `SELECT count(*), coalesce(max(id), 0) FROM `+src.table()+` WHERE `+where, args...).
		Scan(&c.pending, &c.maxID); err != nil {
		return c, fmt.Errorf("count selection: pending: %w", translate(err))
	}
	c.all = c.pending
	if sel.Filter == nil || sel.Filter.Status != StatusPending {
		where, args := sel.boundedWhere(allLetters, 0)
		if err := q.QueryRowxContext(ctx, `SELECT count(*), coalesce(max(id), 0) FROM dead_letters WHERE `+where, args...).
			Scan(&c.all, &c.maxID); err != nil {
			return c, fmt.Errorf("count selection: %w", translate(err))
		}
	}
	if sel.MaxID > 0 {
		c.maxID = sel.MaxID
	}
	return c, nil
}

// Preview is what a confirmation page shows before a bulk action.
type Preview struct {
	// Matched counts the letters in the selection that the action applies to
	// (pending ones); Other counts selected letters already replayed or
	// discarded, which will be skipped.
	Matched int64
	Other   int64
	MaxID   int64
	Sample  []DeadLetter
	ByTask  []TaskCount
	// Overlaps are the open operations that already cover some of these
	// letters (SelectionOverlaps; replay.Service.Preview fills it in).
	Overlaps []Overlap
}

// TaskCount is one line of a preview's breakdown by task.
type TaskCount struct {
	Task string `db:"task" json:"task"`
	N    int64  `db:"n" json:"n"`
}

// PreviewSelection counts, samples and breaks down a selection by task. It
// fixes MaxID (when not given) at the highest id that matches now.
func (s *Store) PreviewSelection(ctx context.Context, sel Selection, sampleSize int) (Preview, error) {
	if err := sel.valid(); err != nil {
		return Preview{}, err
	}
	var p Preview
	c, err := countSelection(ctx, s.db, sel)
	if err != nil {
		return Preview{}, fmt.Errorf("preview selection: %w", err)
	}
	p.Matched, p.Other, p.MaxID = c.pending, c.all-c.pending, c.maxID
	src := sel.pendingSource()
	where, args := sel.pendingOnly().boundedWhere(src, 0)
	if err := s.db.SelectContext(ctx, &p.ByTask, `
		SELECT task, count(*) AS n FROM `+src.table()+` WHERE `+where+`
		GROUP BY task ORDER BY n DESC, task LIMIT 20`, args...); err != nil {
		return Preview{}, fmt.Errorf("preview selection: by task: %w", err)
	}
	sample, args := sel.sampleSQL(deadLetterColumns, sampleSize)
	if err := s.db.SelectContext(ctx, &p.Sample, sample, args...); err != nil {
		return Preview{}, fmt.Errorf("preview selection: sample: %w", err)
	}
	return p, nil
}

// sampleSQL reads columns of the selection's newest limit pending letters
// (a preview's sample), and returns its arguments.
func (s Selection) sampleSQL(columns string, limit int) (string, []any) {
	pending := s.pendingOnly()
	src := s.pendingSource()
	lim := strconv.Itoa(limit)
	if pending.Filter != nil && pending.Filter.walksGroups(src) {
		walks, args := eachGroupSQL(*pending.Filter, nil, newestFirst, lim, func(g Filter, args []any) (string, []any) {
			where, more := Selection{Filter: &g, MaxID: s.MaxID}.boundedWhere(src, len(args))
			return `SELECT id, failed_at FROM dead_letters WHERE ` + where + ` ORDER BY ` + newestFirst + ` LIMIT ` + lim, append(args, more...)
		})
		return byIDNewestFirstSQL(columns, `SELECT id FROM (`+walks+`) found`), args
	}
	where, args := pending.boundedWhere(src, 0)
	return newestFirstSQL(columns, src, "WHERE "+where, lim), args
}

// OperationParams starts a bulk operation.
type OperationParams struct {
	Kind      OperationKind
	Selection Selection
	Actor     Actor
	Reason    string
	// RatePerSecond paces a replay: replayed jobs get run_at spread at this
	// rate, so a recovering dependency is not hammered. Zero: all at once.
	RatePerSecond float64
	// Canary replays this many letters first and waits for a release.
	Canary int
	// DiedAgainPercent sets the died-again guard (0: none), a percentage
	// strictly between 0 and 100.
	DiedAgainPercent float64
	Now              time.Time
	Key              string // one-time key, as in ReplayParams
	// Confirm, when set, is called inside the transaction with the number
	// of pending letters the selection holds, counted by the server, before
	// anything is written; an error from it aborts the operation. It is how
	// a typed confirmation is checked against the real count, never against
	// a number the client sends.
	Confirm func(pending int64) error
}

// CreateOperation records a bulk operation (bounded by the selection's
// MaxID) and its audit entry in one transaction. The operation then runs in
// the background (RunOperationBatch). With a used key, it returns the
// operation that key created.
func (s *Store) CreateOperation(ctx context.Context, p OperationParams) (Operation, error) {
	if err := p.Selection.valid(); err != nil {
		return Operation{}, err
	}
	if p.Kind != OpReplay && p.Kind != OpDiscard {
		return Operation{}, &ValidationError{Fields: map[string]string{"kind": "must be replay or discard"}}
	}
	if p.Kind == OpDiscard && strings.TrimSpace(p.Reason) == "" {
		return Operation{}, &ValidationError{Fields: map[string]string{"reason": "a reason is required to discard"}}
	}
	if p.RatePerSecond < 0 || p.Canary < 0 {
		return Operation{}, &ValidationError{Fields: map[string]string{"rate_per_second": "must not be negative"}}
	}
	if p.DiedAgainPercent != 0 && (p.Kind != OpReplay || !(p.DiedAgainPercent > 0 && p.DiedAgainPercent < 100)) {
		return Operation{}, &ValidationError{Fields: map[string]string{"died_again_percent": "a replay's guard is a percentage between 0 and 100 (0: no guard)"}}
	}
	var op Operation
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var ref struct {
			ID int64 `json:"operation_id"`
		}
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, "bulk_"+string(p.Kind), p.requestHash(), &ref, func() error {
			var err error
			op, err = createOperationInTx(ctx, tx, p)
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
		return Operation{}, fmt.Errorf("create %s operation: %w", p.Kind, err)
	}
	return op, nil
}

// requestHash is the digest a bulk action's key is bound to: its kind, its
// selection as asked for, reason, pace and canary. A filter counts as
// written, relative times included ("since 24h"), so a client's retry of
// the same body an hour later is still the same request; the typed
// confirmation is not part of what was asked.
func (p OperationParams) requestHash() string {
	var filter url.Values
	if p.Selection.Filter != nil {
		filter = p.Selection.Filter.FirstPage().Values()
		filter.Del("limit")
	}
	parts := []any{"bulk_" + string(p.Kind), uniqueIDs(p.Selection.IDs), filter, p.Selection.MaxID, p.Reason, p.RatePerSecond, p.Canary}
	if p.DiedAgainPercent != 0 {
		// Only when set, so that a key stored before the guard existed
		// still matches its request.
		parts = append(parts, p.DiedAgainPercent)
	}
	return requestHash(parts...)
}

func createOperationInTx(ctx context.Context, tx *sqlx.Tx, p OperationParams) (Operation, error) {
	sel := p.Selection
	c, err := countSelection(ctx, tx, sel)
	if err != nil {
		return Operation{}, err
	}
	matched, maxID := c.all, c.maxID
	if p.Confirm != nil {
		if err := p.Confirm(c.pending); err != nil {
			return Operation{}, err
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
	var op Operation
	err = tx.GetContext(ctx, &op, `
		INSERT INTO operations (kind, actor, reason, ids, filter, max_id, matched, rate_per_second, canary, pace_origin, died_again_percent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), $10)
		RETURNING `+operationColumns,
		p.Kind, p.Actor.Name, p.Reason, ids, filter, maxID, matched, rate, p.Canary, guard)
	if err != nil {
		return Operation{}, fmt.Errorf("insert operation: %w", translate(err))
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
	if sel.Filter == nil {
		details["ids"] = sel.IDs
	}
	auditID, err := appendAudit(ctx, tx, AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: ActionBulkStart, OperationID: &opID,
		Filter: filterJSON, MaxID: &maxID, Counts: mustJSON(map[string]int64{"matched": matched}),
		Reason: p.Reason, RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: mustJSON(details),
	})
	if err != nil {
		return Operation{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE operations SET audit_event_id = $2 WHERE id = $1`, op.ID, auditID); err != nil {
		return Operation{}, fmt.Errorf("link audit entry: %w", err)
	}
	op.AuditEventID = &auditID
	return op, nil
}

// Operation returns one operation.
func (s *Store) Operation(ctx context.Context, id int64) (Operation, error) {
	var op Operation
	if err := s.db.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, id); err != nil {
		return Operation{}, fmt.Errorf("operation %d: %w", id, translate(err))
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

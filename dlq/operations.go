package dlq

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

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
	// TargetQueue, StartAt and TargetMaxAttempts are where, from when and
	// with how many attempts a replay's jobs run (nil: each letter's own
	// queue, now, its own attempts); Target gathers them.
	TargetQueue       *string    `db:"target_queue" json:"queue,omitempty"`
	StartAt           *time.Time `db:"start_at" json:"start_at,omitempty"`
	TargetMaxAttempts *int       `db:"target_max_attempts" json:"max_attempts,omitempty"`
}

// GuardPending reports whether the died-again guard has yet to judge.
func (op Operation) GuardPending() bool {
	return op.Kind == OpReplay && op.DiedAgainPercent != nil && op.GuardVerdict == nil
}

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

// Validate reports a problem with the selection's shape.
func (s Selection) Validate() error {
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

// loadFilter reads an operation's stored filter: the filter's own JSON
// (storedFilter), its times the instants they meant when it was confirmed.
func loadFilter(raw json.RawMessage) (Filter, error) {
	var f Filter
	if err := json.Unmarshal(raw, &f); err != nil {
		return Filter{}, fmt.Errorf("stored filter: %w", err)
	}
	return f, nil
}

// StoredSelection rebuilds an operation's selection from its row.
func (op Operation) StoredSelection() (Selection, error) {
	if op.Filter == nil {
		return Selection{IDs: op.IDs, MaxID: op.MaxID}, nil
	}
	f, err := loadFilter(*op.Filter)
	if err != nil {
		return Selection{}, err
	}
	return Selection{Filter: &f, MaxID: op.MaxID}, nil
}

// PendingOnly is the selection narrowed to its pending letters.
func (s Selection) PendingOnly() Selection {
	if s.Filter != nil && s.Filter.Status == "" {
		f := *s.Filter
		f.Status = StatusPending
		s.Filter = &f
	}
	return s
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
	// Target is where, from when and with how many attempts a replay's
	// jobs run; a discard leaves it zero.
	Target ReplayTarget
	Now    time.Time
	Key    string // one-time key, as in ReplayParams
	// Confirm, when set, is called inside the transaction with the number
	// of pending letters the selection holds, counted by the server, before
	// anything is written; an error from it aborts the operation. It is how
	// a typed confirmation is checked against the real count, never against
	// a number the client sends.
	Confirm func(pending int64) error
}

// RequestHash is the digest a bulk action's key is bound to: its kind, its
// selection as asked for, reason, pace and canary. A filter counts as
// written, relative times included ("since 24h"), so a client's retry of
// the same body an hour later is still the same request; the typed
// confirmation is not part of what was asked.
func (p OperationParams) RequestHash() string {
	var filter url.Values
	if p.Selection.Filter != nil {
		filter = p.Selection.Filter.FirstPage().Values()
		filter.Del("limit")
	}
	parts := []any{"bulk_" + string(p.Kind), UniqueIDs(p.Selection.IDs), filter, p.Selection.MaxID, p.Reason, p.RatePerSecond, p.Canary}
	if p.DiedAgainPercent != 0 {
		// Only when set, so that a key stored before the guard existed
		// still matches its request.
		parts = append(parts, p.DiedAgainPercent)
	}
	if !p.Target.IsZero() {
		parts = append(parts, p.Target.Queue, p.Target.StartAt, p.Target.MaxAttempts)
	}
	return RequestHash(parts...)
}

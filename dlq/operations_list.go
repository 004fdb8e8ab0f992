package dlq

import (
	"context"
	"fmt"
	"strings"
)

// Operation list sizes: the list is a recent-first window for on-call
// eyes (the console's /operations, the remote CLI, the API), paged with a
// keyset cursor on id; the audit trail is the archive.
const (
	DefaultOperationLimit = 50
	MaxOperationLimit     = 200
)

// OperationPhase groups states by whether an operation can still act:
// open (not Finished) or finished. It is how a list asks for "everything
// in flight" without naming the states in between, which change.
type OperationPhase string

// The phases.
const (
	PhaseOpen     OperationPhase = "open"
	PhaseFinished OperationPhase = "finished"
)

// OperationListFilter selects operations, newest first. Zero values do not
// filter.
type OperationListFilter struct {
	State OperationState // one state
	Phase OperationPhase // open or finished, whatever the state
	Kind  OperationKind
	Actor string // who started it, in any case
	// Before continues the list with operations whose id is smaller; 0 is
	// the newest page.
	Before int64
	Limit  int
}

// Narrowed reports whether f filters by anything.
func (f OperationListFilter) Narrowed() bool {
	return f.State != "" || f.Phase != "" || f.Kind != "" || f.Actor != ""
}

// OperationPage is one page of the operation list.
type OperationPage struct {
	Operations []Operation
	// Next continues after the last operation (pass it as Before); 0 on
	// the last page.
	Next int64
}

// listOperationsSQL walks the primary key backwards, so the newest
// operations come first without a sort, whatever the table's size. Open
// and finished are told apart by finished_at, which is set exactly when
// the state becomes one whose Finished() is true (finishOperation,
// FailOperation, changeOperation).
const listOperationsSQL = `SELECT ` + operationColumns + ` FROM operations
	WHERE ($1::text IS NULL OR state = $1)
		AND ($2::text IS NULL OR kind = $2)
		AND ($3::text IS NULL OR lower(actor) = lower($3))
		AND ($4::bool IS NULL OR (finished_at IS NULL) = $4)
		AND ($5::bigint = 0 OR id < $5)
	ORDER BY id DESC LIMIT $6`

// ListOperations returns the page of operations f selects, newest first.
func (s *Store) ListOperations(ctx context.Context, f OperationListFilter) (OperationPage, error) {
	limit := f.Limit
	if limit < 1 || limit > MaxOperationLimit {
		limit = DefaultOperationLimit
	}
	var open *bool
	switch f.Phase {
	case PhaseOpen, PhaseFinished:
		b := f.Phase == PhaseOpen
		open = &b
	case "":
	default:
		return OperationPage{}, &ValidationError{Fields: map[string]string{"state": "must be open, finished or a state"}}
	}
	ops := []Operation{}
	// One more than a page: the extra row only says whether a next page exists.
	if err := s.db.SelectContext(ctx, &ops, listOperationsSQL, nullable(string(f.State)), nullable(string(f.Kind)),
		nullable(strings.TrimSpace(f.Actor)), open, f.Before, limit+1); err != nil {
		return OperationPage{}, fmt.Errorf("list operations: %w", translate(err))
	}
	page := OperationPage{Operations: ops}
	if len(ops) > limit {
		page.Operations = ops[:limit]
		page.Next = page.Operations[limit-1].ID
	}
	return page, nil
}

// InFlight is what the banner on every page shows: the newest open
// operations and how many are open in all.
type InFlight struct {
	Operations []Operation // newest first, at most the limit asked for
	Open       int
}

// inFlightSQL reads the open operations from their partial index
// (00104_operations.sql), which holds only them: the cost does not grow with
// the history. Only the columns the banner shows are read.
const inFlightSQL = `SELECT id, kind, state, actor, matched, done_count, skipped, created_at, count(*) OVER () AS open
	FROM operations WHERE finished_at IS NULL ORDER BY id DESC LIMIT $1`

// OperationsInFlight returns the newest limit open operations and how many
// are open. It runs on every page a person opens, so it is one query on a
// small index.
func (s *Store) OperationsInFlight(ctx context.Context, limit int) (InFlight, error) {
	var rows []struct {
		Operation
		Open int `db:"open"`
	}
	if err := s.db.SelectContext(ctx, &rows, inFlightSQL, limit); err != nil {
		return InFlight{}, fmt.Errorf("operations in flight: %w", translate(err))
	}
	var out InFlight
	for _, r := range rows {
		out.Open = r.Open
		if !r.State.Finished() { // finished_at and the state agree; the state has the last word
			out.Operations = append(out.Operations, r.Operation)
		}
	}
	return out, nil
}

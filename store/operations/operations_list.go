package operations

import (
	"context"
	"fmt"
	"strings"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

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
func (s *Store) ListOperations(ctx context.Context, f dlq.OperationListFilter) (dlq.OperationPage, error) {
	limit := f.Limit
	if limit < 1 || limit > dlq.MaxOperationLimit {
		limit = dlq.DefaultOperationLimit
	}
	var open *bool
	switch f.Phase {
	case dlq.PhaseOpen, dlq.PhaseFinished:
		b := f.Phase == dlq.PhaseOpen
		open = &b
	case "":
	default:
		return dlq.OperationPage{}, &dlq.ValidationError{Fields: map[string]string{"state": "must be open, finished or a state"}}
	}
	ops := []dlq.Operation{}
	// One more than a page: the extra row only says whether a next page exists.
	if err := s.db.SelectContext(ctx, &ops, listOperationsSQL, postgres.Nullable(string(f.State)), postgres.Nullable(string(f.Kind)),
		postgres.Nullable(strings.TrimSpace(f.Actor)), open, f.Before, limit+1); err != nil {
		return dlq.OperationPage{}, fmt.Errorf("list operations: %w", postgres.Translate(err))
	}
	page := dlq.OperationPage{Operations: ops}
	if len(ops) > limit {
		page.Operations = ops[:limit]
		page.Next = page.Operations[limit-1].ID
	}
	return page, nil
}

// inFlightSQL reads the open operations from their partial index
// (00104_operations.sql), which holds only them: the cost does not grow with
// the history. Only the columns the banner shows are read.
const inFlightSQL = `SELECT id, kind, state, actor, matched, done_count, skipped, created_at, count(*) OVER () AS open
	FROM operations WHERE finished_at IS NULL ORDER BY id DESC LIMIT $1`

// OperationsInFlight returns the newest limit open operations and how many
// are open. It runs on every page a person opens, so it is one query on a
// small index.
func (s *Store) OperationsInFlight(ctx context.Context, limit int) (dlq.InFlight, error) {
	var rows []struct {
		dlq.Operation
		Open int `db:"open"`
	}
	if err := s.db.SelectContext(ctx, &rows, inFlightSQL, postgres.Prepared, limit); err != nil {
		return dlq.InFlight{}, fmt.Errorf("operations in flight: %w", postgres.Translate(err))
	}
	var out dlq.InFlight
	for _, r := range rows {
		out.Open = r.Open
		if !r.State.Finished() { // finished_at and the state agree; the state has the last word
			out.Operations = append(out.Operations, r.Operation)
		}
	}
	return out, nil
}

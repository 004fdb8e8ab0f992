package operations

import (
	"context"
	"fmt"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// OperationSkips breaks down the skipped letters of an operation over
// explicit ids (at most MaxBatch, so this is one short query): those the
// operation did not act on, by their state now. An operation over a filter
// selected pending letters only, so every skip there is a letter someone
// else replayed or discarded meanwhile, and it returns the zero value.
func (s *Store) OperationSkips(ctx context.Context, op dlq.Operation) (dlq.SkipCounts, error) {
	if op.Filter != nil || len(op.IDs) == 0 || op.AuditEventID == nil {
		return dlq.SkipCounts{}, nil
	}
	var c dlq.SkipCounts
	err := s.db.QueryRowxContext(ctx, `
		SELECT count(*) FILTER (WHERE d.replayed_at IS NOT NULL), count(*) FILTER (WHERE d.discarded_at IS NOT NULL)
		FROM dead_letters d
		WHERE d.id = ANY($1) AND d.id <= $2
			AND NOT EXISTS (SELECT 1 FROM audit_event_letters l WHERE l.audit_event_id = $3 AND l.dead_letter_id = d.id)`,
		pq.Array(dlq.UniqueIDs(op.IDs)), op.MaxID, *op.AuditEventID).Scan(&c.Replayed, &c.Discarded)
	if err != nil {
		return dlq.SkipCounts{}, fmt.Errorf("operation %d skips: %w", op.ID, postgres.Translate(err))
	}
	// Matched counted the ids that named a letter when the operation began.
	c.NotFound = max(0, int64(len(dlq.UniqueIDs(op.IDs)))-op.Matched)
	return c, nil
}

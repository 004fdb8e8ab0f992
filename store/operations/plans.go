package operations

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
)

// LaneBlock is how many consecutive letter ids fall in one lane, for the
// store's tests that place letters in lanes.
const LaneBlock = laneBlock

// InFlightSQL is the banner's query, for the store's test that reads its
// plan (EXPLAIN).
const InFlightSQL = inFlightSQL

// ExplainOperationBatch runs the next batch of an operation under EXPLAIN
// (ANALYZE, FORMAT JSON) in a transaction it rolls back, for the store's
// tests that check what a batch reads.
func (s *Store) ExplainOperationBatch(ctx context.Context, opID int64, limit int) (string, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	var op dlq.Operation
	if err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, opID); err != nil {
		return "", fmt.Errorf("operation %d: %w", opID, err)
	}
	sel, err := op.StoredSelection()
	if err != nil {
		return "", err
	}
	if sel, err = s.probe.Selection(ctx, tx, sel); err != nil {
		return "", err
	}
	query, args, err := batchQuery(op, sel, limit, 0, 1)
	if err != nil {
		return "", err
	}
	var plan string
	err = tx.GetContext(ctx, &plan, `EXPLAIN (ANALYZE, FORMAT JSON) `+query, args...)
	return plan, err
}

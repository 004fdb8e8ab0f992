package dlq

import (
	"context"
	"fmt"
)

// ExplainOperationBatch runs the next batch of an operation under EXPLAIN
// (ANALYZE, FORMAT JSON) in a transaction it rolls back, for the tests
// that check what a batch reads.
func (s *Store) ExplainOperationBatch(ctx context.Context, opID int64, limit int) (string, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	var op Operation
	if err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, opID); err != nil {
		return "", fmt.Errorf("operation %d: %w", opID, err)
	}
	sel, err := op.selection()
	if err != nil {
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

// LaneBlock is laneBlock, for the tests that place letters in lanes.
const LaneBlock = laneBlock

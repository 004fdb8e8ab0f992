package dlq

import (
	"context"
	"fmt"
)

// Operation list sizes: the list is a recent-first window for on-call
// eyes (the remote CLI, the API), not an archive; the audit trail is that.
const (
	DefaultOperationLimit = 50
	MaxOperationLimit     = 200
)

// OperationListFilter selects operations: one state (all when empty), at
// most Limit of them, newest first.
type OperationListFilter struct {
	State OperationState
	Limit int
}

// listOperationsSQL walks the primary key backwards, so the newest
// operations come first without a sort, whatever the table's size.
const listOperationsSQL = `SELECT ` + operationColumns + ` FROM operations
	WHERE ($1::text IS NULL OR state = $1) ORDER BY id DESC LIMIT $2`

// ListOperations returns the newest operations first.
func (s *Store) ListOperations(ctx context.Context, f OperationListFilter) ([]Operation, error) {
	limit := f.Limit
	if limit < 1 || limit > MaxOperationLimit {
		limit = DefaultOperationLimit
	}
	ops := []Operation{}
	if err := s.db.SelectContext(ctx, &ops, listOperationsSQL, nullable(string(f.State)), limit); err != nil {
		return nil, fmt.Errorf("list operations: %w", translate(err))
	}
	return ops, nil
}

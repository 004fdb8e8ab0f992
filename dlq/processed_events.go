package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// markProcessedSQL claims an event id. ON CONFLICT DO NOTHING rather than
// catching the unique violation: an error would abort the caller's
// transaction, and the caller needs it alive to roll back cleanly or, for a
// fresh id, to go on with its work. A concurrent transaction holding the same
// id makes this statement wait for it to commit (then: duplicate) or roll
// back (then: ours), so two deliveries of one event can never both apply.
const markProcessedSQL = `INSERT INTO processed_events (external_id) VALUES ($1) ON CONFLICT (external_id) DO NOTHING`

// MarkProcessed records eventID as handled inside tx and reports whether it
// was new. It is meant to run in the same transaction as the event's effect
// (see worker.ProcessOnce): the effect commits exactly when the mark does.
func MarkProcessed(ctx context.Context, tx *sqlx.Tx, eventID string) (bool, error) {
	if eventID == "" {
		return false, &ValidationError{Fields: map[string]string{"event_id": "is required"}}
	}
	if tx == nil {
		return false, errors.New("mark processed: a transaction is required")
	}
	res, err := tx.ExecContext(ctx, markProcessedSQL, eventID)
	if err != nil {
		return false, fmt.Errorf("mark event %q processed: %w", eventID, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mark event %q processed: %w", eventID, err)
	}
	return n == 1, nil
}

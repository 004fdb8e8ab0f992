package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
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
		return false, &dlq.ValidationError{Fields: map[string]string{"event_id": "is required"}}
	}
	if tx == nil {
		return false, errors.New("mark processed: a transaction is required")
	}
	res, err := tx.ExecContext(ctx, markProcessedSQL, eventID)
	if err != nil {
		return false, fmt.Errorf("mark event %q processed: %w", eventID, postgres.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mark event %q processed: %w", eventID, err)
	}
	return n == 1, nil
}

// processedEventsPurgeBatch bounds each delete's transaction.
const processedEventsPurgeBatch = 10_000

// PurgeProcessedEvents deletes event ids recorded before now - olderThan,
// in batches, and returns how many it deleted. Past that age a redelivered
// event would apply again, so the age must be far longer than any
// redelivery can take (leases and retries are minutes to hours; weeks are
// safe). The table is append-only and read by key, so the oldest rows are
// at the head of the heap and each batch finds them at once without an
// index on received_at that every ProcessOnce would have to maintain.
func (s *Store) PurgeProcessedEvents(ctx context.Context, olderThan time.Duration, now time.Time) (int64, error) {
	if olderThan <= 0 {
		return 0, &dlq.ValidationError{Fields: map[string]string{"older_than": "must be a positive duration"}}
	}
	cutoff := now.Add(-olderThan)
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, `
			DELETE FROM processed_events WHERE ctid = ANY (ARRAY(
				SELECT ctid FROM processed_events WHERE received_at < $1 LIMIT $2))`,
			cutoff, processedEventsPurgeBatch)
		if err != nil {
			return total, fmt.Errorf("purge processed events: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("purge processed events: %w", err)
		}
		total += n
		if n < processedEventsPurgeBatch {
			return total, nil
		}
	}
}

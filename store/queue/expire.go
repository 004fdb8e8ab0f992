package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// holdExpiry is how the expiry of a pause or a throttle is recorded: both
// hold a queue's or a task's jobs back until an operator ends them or
// their time runs out.
type holdExpiry[T any] struct {
	what    string // "pauses", "throttles": for errors
	action  string // the audit action
	reason  string // the audit reason
	target  func(T) (kind, name string)
	details func(T) map[string]any
}

// expire runs query (an UPDATE … RETURNING that closes the expired rows,
// guarded so that of the console and the workers only one closes each)
// and, for each row it closed, appends the expiry's audit entry and wakes
// the workers on its queue or task.
func (e holdExpiry[T]) expire(ctx context.Context, tx *sqlx.Tx, now time.Time, query string, args ...any) ([]T, error) {
	var expired []T
	if err := tx.SelectContext(ctx, &expired, query, args...); err != nil {
		return nil, fmt.Errorf("expire %s: %w", e.what, postgres.Translate(err))
	}
	for _, row := range expired {
		if _, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
			At: now, Actor: dlq.ExpiryActor, Action: e.action, Reason: e.reason,
			Details: audit.MustJSON(e.details(row)),
		}); err != nil {
			return nil, err
		}
		kind, name := e.target(row)
		if err := wakeWorkersFor(ctx, tx, kind, name); err != nil {
			return nil, err
		}
	}
	return expired, nil
}

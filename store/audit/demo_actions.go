package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// AuditDemoAction runs change, the demo's own write, and appends its audit
// entry in the same transaction: the entry exists exactly when the change
// does. what says in words what was done; details are kept with it.
// change's error is returned as it is, wrapped once.
func (s *Store) AuditDemoAction(ctx context.Context, a dlq.Actor, now time.Time, what string, details map[string]string,
	change func(ctx context.Context, tx *sqlx.Tx) error) error {
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := change(ctx, tx); err != nil {
			return err
		}
		_, err := AppendAudit(ctx, tx, dlq.AuditEntry{
			At: now, Actor: a.Name, Action: dlq.ActionDemo, Reason: what,
			RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
			Details: MustJSON(details),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("demo action: %w", err)
	}
	return nil
}

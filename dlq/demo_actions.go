package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ActionDemo is an action on the simulated world of the `redrive dev` demo
// (worker/demo), such as deploying the fix of its incident. It changes no
// letter and no job, but it changes what replays will do, so it is audited
// like every other action.
const ActionDemo = "demo"

// AuditDemoAction runs change, the demo's own write, and appends its audit
// entry in the same transaction: the entry exists exactly when the change
// does. what says in words what was done; details are kept with it.
// change's error is returned as it is, wrapped once.
func (s *Store) AuditDemoAction(ctx context.Context, a Actor, now time.Time, what string, details map[string]string,
	change func(ctx context.Context, tx *sqlx.Tx) error) error {
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := change(ctx, tx); err != nil {
			return err
		}
		_, err := appendAudit(ctx, tx, AuditEntry{
			At: now, Actor: a.Name, Action: ActionDemo, Reason: what,
			RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
			Details: mustJSON(details),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("demo action: %w", err)
	}
	return nil
}

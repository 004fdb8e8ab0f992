package letters

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// RevealArgs records that a letter's masked argument values are about to
// be shown to a: the audit entry is committed before anything is shown, so
// no reveal goes unrecorded. ErrNotFound if there is no such letter.
func (s *Store) RevealArgs(ctx context.Context, id int64, a dlq.Actor, now time.Time) error {
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var task string
		if err := tx.GetContext(ctx, &task, `SELECT task FROM dead_letters WHERE id = $1`, id); err != nil {
			return fmt.Errorf("dead letter %d: %w", id, postgres.Translate(err))
		}
		_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
			At: now, Actor: a.Name, Action: dlq.ActionRevealArgs, DeadLetterID: &id,
			RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
			Details: audit.MustJSON(map[string]string{"task": task}),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("reveal arguments: %w", err)
	}
	return nil
}

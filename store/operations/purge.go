package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// purgeBatchSQL deletes one batch, oldest outcome first, and returns the
// ids it deleted. Locking the outcomes is what keeps a purge and a restore
// apart: a restore deletes the outcome it undoes, so the purge skips a
// letter being restored, and a restore that comes second finds nothing to
// undo. Jobs that replayed a deleted letter keep their history but lose
// the link (jobs.replay_of has no foreign key: 00100_queue.sql).
const purgeBatchSQL = `
WITH settled AS (
	SELECT failed_at, dead_letter_id FROM dead_letter_outcomes
	WHERE coalesce(discarded_at, replayed_at) < $1
	ORDER BY coalesce(discarded_at, replayed_at) LIMIT $2
	FOR UPDATE SKIP LOCKED
), outcomes AS (
	DELETE FROM dead_letter_outcomes o USING settled s
	WHERE o.failed_at = s.failed_at AND o.dead_letter_id = s.dead_letter_id
	RETURNING o.dead_letter_id
), letters AS (
	DELETE FROM dead_letter_records r USING outcomes o WHERE r.id = o.dead_letter_id
	RETURNING r.id
), unlinked AS (
	UPDATE jobs SET replay_of = NULL WHERE replay_of IN (SELECT id FROM letters)
)
SELECT id FROM letters ORDER BY id`

// PurgeSettled deletes replayed and discarded letters settled before the
// cutoff, batch by batch. Each batch and its audit entry (with the count
// and id range) commit together, so an interrupted purge leaves an audit
// line for exactly what it deleted. It returns the number deleted.
func (s *Store) PurgeSettled(ctx context.Context, p dlq.PurgeParams) (int64, error) {
	if p.OlderThan <= 0 {
		return 0, &dlq.ValidationError{Fields: map[string]string{"older_than": "must be a positive duration"}}
	}
	batch := p.BatchSize
	if batch <= 0 {
		batch = 5000
	}
	cutoff := p.Now.Add(-p.OlderThan)
	var total int64
	for {
		var ids []int64
		err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
			if err := tx.SelectContext(ctx, &ids, purgeBatchSQL, cutoff, batch); err != nil {
				return fmt.Errorf("purge: %w", err)
			}
			if len(ids) == 0 {
				return nil
			}
			_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionPurge,
				Counts:    audit.MustJSON(map[string]int{"purged": len(ids)}),
				Reason:    fmt.Sprintf("retention: settled before %s", cutoff.UTC().Format(time.RFC3339)),
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(map[string]any{"first_id": ids[0], "last_id": ids[len(ids)-1], "older_than": p.OlderThan.String()}),
			})
			return err
		})
		if err != nil {
			return total, err
		}
		total += int64(len(ids))
		if len(ids) < batch {
			return total, nil
		}
	}
}

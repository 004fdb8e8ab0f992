package operations

import (
	"context"
	"database/sql"
	"errors"
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
//
// A letter whose group is still growing (a letter of its group failed at
// or after $3) is left alone: the purge holds it (recordHoldsSQL). The
// check is two index probes per letter: its record by id, and its
// group's newest letter in dead_letters_fingerprint_idx. $4, when set,
// narrows the batch to one group, growing or not: an operator's
// confirmation of its hold.
const purgeBatchSQL = `
WITH settled AS (
	SELECT o.failed_at, o.dead_letter_id FROM dead_letter_outcomes o
	WHERE coalesce(o.discarded_at, o.replayed_at) < $1
		AND ($4::text IS NULL OR EXISTS (
			SELECT 1 FROM dead_letter_records r WHERE r.id = o.dead_letter_id AND r.fingerprint = $4))
		AND ($4::text IS NOT NULL OR NOT EXISTS (
			SELECT 1 FROM dead_letter_records r JOIN dead_letter_records n ON n.fingerprint = r.fingerprint
			WHERE r.id = o.dead_letter_id AND n.failed_at >= $3))
	ORDER BY coalesce(o.discarded_at, o.replayed_at) LIMIT $2
	FOR UPDATE OF o SKIP LOCKED
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

// growingSettledCTE counts, per growing group (a letter failed at or
// after $2), its letters settled before $1: what a purge with that cutoff
// holds. It walks the settled letters before the cutoff, which right
// after a purge are the held ones, and probes each one's group for a
// recent letter in dead_letters_fingerprint_idx.
const growingSettledCTE = `growing AS (
	SELECT r.fingerprint, min(r.task) AS task, count(*) AS letters
	FROM dead_letter_outcomes o
	JOIN dead_letter_records r ON r.id = o.dead_letter_id
	WHERE coalesce(o.discarded_at, o.replayed_at) < $1
		AND EXISTS (SELECT 1 FROM dead_letter_records n WHERE n.fingerprint = r.fingerprint AND n.failed_at >= $2)
	GROUP BY r.fingerprint
)`

// recordHoldsSQL writes the holds of a purge with cutoff $1 at $3: one row
// per growing group with letters it kept, a group's first hold keeping its
// held_at; the rows of groups no longer held go. It returns the groups
// held now.
const recordHoldsSQL = `
WITH ` + growingSettledCTE + `, cleared AS (
	DELETE FROM purge_holds h WHERE NOT EXISTS (SELECT 1 FROM growing g WHERE g.fingerprint = h.fingerprint)
)
INSERT INTO purge_holds AS h (fingerprint, task, letters, settled_before, held_at)
SELECT fingerprint, task, letters, $1, $3 FROM growing ORDER BY fingerprint
ON CONFLICT (fingerprint) DO UPDATE SET task = excluded.task, letters = excluded.letters,
	settled_before = excluded.settled_before
RETURNING h.fingerprint, h.task, h.letters, h.settled_before, h.held_at`

// PurgeSettled deletes replayed and discarded letters settled before the
// cutoff, batch by batch, except those of groups still growing (a letter
// within dlq.PurgeGrowingWindow before p.Now), which it holds: it records
// one hold per such group (purge_holds), audited when a group is first
// held, for an operator to confirm. Each batch and its audit entry (with
// the count and id range) commit together, so an interrupted purge leaves
// an audit line for exactly what it deleted. It returns the number
// deleted and the holds.
func (s *Store) PurgeSettled(ctx context.Context, p dlq.PurgeParams) (int64, []dlq.PurgeHold, error) {
	if p.OlderThan <= 0 {
		return 0, nil, &dlq.ValidationError{Fields: map[string]string{"older_than": "must be a positive duration"}}
	}
	cutoff := p.Now.Add(-p.OlderThan)
	total, err := s.purgeBatches(ctx, p, cutoff, nil)
	if err != nil {
		return total, nil, err
	}
	holds, err := s.recordHolds(ctx, p, cutoff)
	return total, holds, err
}

// purgeBatches deletes settled letters before cutoff in batches, each
// audited: those of groups not growing, or with group set, that group's
// (an operator's confirmation, whose audit entry says so).
func (s *Store) purgeBatches(ctx context.Context, p dlq.PurgeParams, cutoff time.Time, group *string) (int64, error) {
	batch := p.BatchSize
	if batch <= 0 {
		batch = 5000
	}
	growingSince := p.Now.Add(-dlq.PurgeGrowingWindow)
	action, reason := dlq.ActionPurge, fmt.Sprintf("retention: settled before %s", cutoff.UTC().Format(time.RFC3339))
	if group != nil {
		action, reason = dlq.ActionPurgeConfirm, fmt.Sprintf("confirmed the purge held for group %s: settled before %s",
			*group, cutoff.UTC().Format(time.RFC3339))
	}
	var total int64
	for {
		var ids []int64
		err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
			if err := tx.SelectContext(ctx, &ids, purgeBatchSQL, cutoff, batch, growingSince, group); err != nil {
				return fmt.Errorf("purge: %w", err)
			}
			if len(ids) == 0 {
				return nil
			}
			details := map[string]any{"first_id": ids[0], "last_id": ids[len(ids)-1], "older_than": p.OlderThan.String()}
			if group != nil {
				details["fingerprint"] = *group
			}
			_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: action,
				Counts: audit.MustJSON(map[string]int{"purged": len(ids)}), Reason: reason,
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(details),
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

// recordHolds writes the holds of a purge with cutoff and audits each
// group held for the first time, in one transaction.
func (s *Store) recordHolds(ctx context.Context, p dlq.PurgeParams, cutoff time.Time) ([]dlq.PurgeHold, error) {
	var holds []dlq.PurgeHold
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		holds = nil
		if err := tx.SelectContext(ctx, &holds, recordHoldsSQL, cutoff, p.Now.Add(-dlq.PurgeGrowingWindow), p.Now); err != nil {
			return fmt.Errorf("purge: hold growing groups: %w", err)
		}
		for _, h := range holds {
			// Held by an earlier purge (its held_at kept), audited then.
			// Postgres keeps microseconds: p.Now comes back rounded.
			if h.HeldAt.Sub(p.Now).Abs() >= time.Microsecond {
				continue
			}
			if _, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionPurgeHeld,
				Counts: audit.MustJSON(map[string]int64{"held": h.Letters}),
				Reason: fmt.Sprintf("group %s of %s had a new letter within %s: its settled letters wait for an operator's confirmation",
					h.Fingerprint, h.Task, dlq.PurgeGrowingWindow),
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(map[string]any{"fingerprint": h.Fingerprint, "settled_before": cutoff}),
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return holds, err
}

// lockHoldSQL takes a hold for its confirmation; the lock keeps two
// confirmations of one hold apart.
const lockHoldSQL = `SELECT fingerprint, task, letters, settled_before, held_at FROM purge_holds WHERE fingerprint = $1 FOR UPDATE`

// ConfirmPurgeHold deletes the letters a purge held for group (those
// settled before the hold's cutoff), each batch audited as the
// operator's confirmation, then the hold. A group with no hold is a
// not-found error: another operator confirmed it, or the next purge found
// the group quiet and purged it.
func (s *Store) ConfirmPurgeHold(ctx context.Context, group string, actor dlq.Actor, now time.Time) (int64, error) {
	var hold dlq.PurgeHold
	if err := s.db.GetContext(ctx, &hold, `SELECT fingerprint, task, letters, settled_before, held_at FROM purge_holds WHERE fingerprint = $1`, group); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, dlq.Errorf(dlq.ENotFound, "No purge is held for group %s: someone confirmed it, or the next purge found the group quiet and purged it.", group)
		}
		return 0, fmt.Errorf("confirm purge hold: %w", err)
	}
	n, err := s.purgeBatches(ctx, dlq.PurgeParams{OlderThan: now.Sub(hold.SettledBefore), Now: now, Actor: actor}, hold.SettledBefore, &group)
	if err != nil {
		return n, err
	}
	err = postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var locked dlq.PurgeHold
		if err := tx.GetContext(ctx, &locked, lockHoldSQL, group); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // confirmed by someone else meanwhile: the letters are gone either way
			}
			return fmt.Errorf("confirm purge hold: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM purge_holds WHERE fingerprint = $1`, group); err != nil {
			return fmt.Errorf("confirm purge hold: %w", err)
		}
		if n > 0 {
			return nil // each batch was audited
		}
		_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
			At: now, Actor: actor.Name, Action: dlq.ActionPurgeConfirm, Counts: audit.MustJSON(map[string]int{"purged": 0}),
			Reason:    fmt.Sprintf("confirmed the purge held for group %s: its letters were already gone", group),
			RequestID: actor.RequestID, RemoteAddr: actor.RemoteAddr, UserAgent: actor.UserAgent,
			Details: audit.MustJSON(map[string]any{"fingerprint": group}),
		})
		return err
	})
	return n, err
}

// forecastSQL counts, up to $3 of them, the letters settled before $1,
// and among them those of groups growing since $2, which a purge would
// hold: one walk of dead_letter_outcomes_settled_idx, a lookup of each
// letter's group and a probe of that group's newest letter, so the
// overview's cost is bounded by the cap, however large an incident.
const forecastSQL = `
SELECT count(*) AS settled,
	count(*) FILTER (WHERE EXISTS (
		SELECT 1 FROM dead_letter_records n WHERE n.fingerprint = r.fingerprint AND n.failed_at >= $2)) AS held
FROM (
	SELECT dead_letter_id FROM dead_letter_outcomes WHERE coalesce(discarded_at, replayed_at) < $1 LIMIT $3
) s
JOIN dead_letter_records r ON r.id = s.dead_letter_id`

// PurgeForecast says what a purge at `at` with retention olderThan would
// remove, read now: the settled letters before its cutoff (counted up to
// dlq.MaxForecast), less those of groups growing now, and the holds
// recorded by the last purge. Reading the holds alone (olderThan 0, no
// scheduled purge) costs one small table.
func (s *Store) PurgeForecast(ctx context.Context, at time.Time, olderThan time.Duration, now time.Time) (dlq.PurgeForecast, error) {
	f := dlq.PurgeForecast{At: at}
	if err := s.db.SelectContext(ctx, &f.Holds, `SELECT fingerprint, task, letters, settled_before, held_at FROM purge_holds ORDER BY letters DESC, fingerprint`, postgres.Prepared); err != nil {
		return f, fmt.Errorf("purge forecast: holds: %w", err)
	}
	if olderThan <= 0 {
		return f, nil
	}
	f.SettledBefore = at.Add(-olderThan)
	var counts struct {
		Settled int64 `db:"settled"`
		Held    int64 `db:"held"`
	}
	if err := s.db.GetContext(ctx, &counts, forecastSQL, f.SettledBefore, now.Add(-dlq.PurgeGrowingWindow), dlq.MaxForecast+1); err != nil {
		return f, fmt.Errorf("purge forecast: %w", err)
	}
	settled, held := counts.Settled, counts.Held
	f.Capped = settled > dlq.MaxForecast
	f.Removes = max(0, min(settled, dlq.MaxForecast)-held)
	return f, nil
}

package letters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/postgres"
)

// ApplyMaskPolicy makes m the policy the search text is built with and
// reports whether that changed it (then RebuildSearch has work to do). It
// first asks PostgreSQL to compile every extra pattern, and to fold the key
// patterns' capitals as Go does, and refuses the policy, naming the
// pattern, when it cannot: a pattern the search cannot apply as the pages
// do would let search find what the pages hide.
func (s *Store) ApplyMaskPolicy(ctx context.Context, m mask.Policy) (bool, error) {
	if err := s.checkMaskPolicy(ctx, m); err != nil {
		return false, err
	}
	changed := false
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var cur dlq.MaskPolicyState
		err := tx.GetContext(ctx, &cur, `SELECT version, keys, written, 0 AS stale FROM mask_policy FOR UPDATE`)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil && slices.Equal(cur.Keys, m.Patterns()) && slices.Equal(cur.Patterns, m.TextPatterns()) {
			return nil
		}
		changed = true
		_, err = tx.ExecContext(ctx, `
INSERT INTO mask_policy AS p (version, keys, patterns, written) VALUES ($1 + 1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET version = p.version + 1, keys = EXCLUDED.keys, patterns = EXCLUDED.patterns,
	written = EXCLUDED.written, updated_at = now()`,
			cur.Version, pq.Array(nonNil(m.Patterns())), pq.Array(nonNil(m.SQLTextPatterns())), pq.Array(nonNil(m.TextPatterns())))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("apply mask policy: %w", err)
	}
	return changed, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Store) checkMaskPolicy(ctx context.Context, m mask.Policy) error {
	written := m.TextPatterns()
	for i, sqlPattern := range m.SQLTextPatterns() {
		// The empty text: compiling is what is being checked.
		_, err := s.db.ExecContext(ctx, `SELECT regexp_replace('', $1, '')`, sqlPattern)
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "2201B" { // invalid_regular_expression
			return fmt.Errorf("mask pattern %q: PostgreSQL, where the search applies it, rejects it: %s", written[i], pqErr.Message)
		}
		if err != nil {
			return fmt.Errorf("check mask pattern %q: %w", written[i], err)
		}
	}
	keys := m.Patterns()
	upper := make([]string, len(keys))
	for i, k := range keys {
		upper[i] = strings.ToUpper(k)
	}
	var bad []string
	if err := s.db.SelectContext(ctx, &bad, `SELECT k FROM unnest($1::text[], $2::text[]) t(k, up) WHERE lower(up) <> k OR lower(k) <> k`,
		pq.Array(keys), pq.Array(upper)); err != nil {
		return fmt.Errorf("check mask keys: %w", err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("mask key pattern %q: the database's lower() does not fold its capitals as the console does, "+
			"so search would miss keys the pages hide; use ASCII patterns or a database with a UTF-8 locale", bad[0])
	}
	return nil
}

// MaskPolicy returns the stored policy and how many search rows are stale.
func (s *Store) MaskPolicy(ctx context.Context) (dlq.MaskPolicyState, error) {
	var st dlq.MaskPolicyState
	err := s.db.GetContext(ctx, &st, `SELECT p.version, p.keys, p.written,
		(SELECT count(*) FROM dead_letter_search WHERE policy_version <> p.version) AS stale FROM mask_policy p`)
	if err != nil {
		return dlq.MaskPolicyState{}, fmt.Errorf("read mask policy: %w", postgres.Translate(err))
	}
	return st, nil
}

// rebuildSearchSQL rebuilds the next batch of stale rows after $1 in id
// order, under the current policy, and returns how many it rebuilt and
// the last id it looked at. SKIP LOCKED: a row another rebuild holds is
// its business.
const rebuildSearchSQL = `
WITH pol AS (SELECT version, keys, patterns FROM mask_policy),
batch AS (
	SELECT s.dead_letter_id FROM dead_letter_search s, pol
	WHERE s.dead_letter_id > $1 AND s.policy_version <> pol.version
	ORDER BY s.dead_letter_id LIMIT $2
	FOR UPDATE OF s SKIP LOCKED
),
rebuilt AS (
	UPDATE dead_letter_search s
	SET search_text = dead_letter_masked_search_text(d.error_message, d.args, d.kwargs, pol.keys, pol.patterns),
		policy_version = pol.version
	FROM batch b, dead_letters d, pol
	WHERE s.dead_letter_id = b.dead_letter_id AND d.id = b.dead_letter_id
	RETURNING 1
)
SELECT (SELECT count(*) FROM rebuilt) AS rebuilt, coalesce((SELECT max(dead_letter_id) FROM batch), 0) AS last`

// RebuildSearch rebuilds, under the stored policy, every search row built
// under another, in batches of batch rows (DefaultRebuildBatch when < 1),
// each its own short statement: dead-lettering never waits for it, and
// searches skip the stale rows meanwhile. progress, when set, hears the
// running total after each batch. It returns how many rows it rebuilt.
//
// A letter written while the policy changed can have read the old policy
// and commit after a pass went by, so the pass is made again once every
// transaction open at the start has ended (or a minute has passed).
func (s *Store) RebuildSearch(ctx context.Context, batch int, progress func(rebuilt int64)) (int64, error) {
	if batch < 1 {
		batch = dlq.DefaultRebuildBatch
	}
	var snapshot string
	if err := s.db.GetContext(ctx, &snapshot, `SELECT pg_current_snapshot()::text`); err != nil {
		return 0, fmt.Errorf("rebuild search: %w", err)
	}
	var total int64
	pass := func() error {
		var after int64
		for {
			var r struct {
				Rebuilt int64 `db:"rebuilt"`
				Last    int64 `db:"last"`
			}
			if err := s.db.GetContext(ctx, &r, rebuildSearchSQL, after, batch); err != nil {
				return err
			}
			if r.Last == 0 {
				return nil
			}
			total += r.Rebuilt
			after = r.Last
			if progress != nil {
				progress(total)
			}
		}
	}
	if err := pass(); err != nil {
		return total, fmt.Errorf("rebuild search: %w", err)
	}
	if err := s.waitForTransactions(ctx, snapshot); err != nil {
		return total, fmt.Errorf("rebuild search: %w", err)
	}
	if err := pass(); err != nil {
		return total, fmt.Errorf("rebuild search: %w", err)
	}
	return total, nil
}

// maxTransactionWait bounds waitForTransactions: transaction ids are
// cluster-wide, so a long transaction of another database (a pg_dump)
// would otherwise hold the rebuild. A letter it missed stays out of search
// (fail closed) until the next rebuild.
const maxTransactionWait = time.Minute

// waitForTransactions waits until every transaction in progress at
// snapshot has ended, polling: none is waited on through a lock, so
// nothing queues behind the wait.
func (s *Store) waitForTransactions(ctx context.Context, snapshot string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(maxTransactionWait)
	for {
		var open bool
		err := s.db.GetContext(ctx, &open, `SELECT EXISTS (SELECT 1 FROM pg_snapshot_xip($1::pg_snapshot) x
			WHERE pg_xact_status(x) = 'in progress')`, snapshot)
		if err != nil || !open {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return nil
		case <-tick.C:
		}
	}
}

package store_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/store/storetest"
)

// The summary tables must always equal what a full scan of dead_letters
// says, through inserts, status changes and deletes.
func TestSummariesFollowDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Letters written by a session in a half-hour time zone (a worker's
	// connection may run in any), changed and purged by UTC sessions.
	exec(`SET TIME ZONE 'Asia/Kolkata';
		INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
		max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT g, CASE WHEN g % 3 = 0 THEN 'payments' ELSE 'default' END, 't' || (g % 4), '[]', '{}', 'E', 'boom ' || g,
			1, 1, 'permanent', 'fp' || (g % 5), now(), now() - (g || ' minutes')::interval
		FROM generate_series(1, 500) g;
		SET TIME ZONE 'UTC'`)
	// Replays and discards move letters from pending_dead_letters to
	// dead_letter_outcomes (00101_letters.sql); a letter replayed already
	// (id 77) is no longer pending, so the discard leaves it replayed.
	storetest.Settle(t, db, storetest.Outcome{Status: "replayed", By: "a"}, "id % 7 = 0")
	storetest.Settle(t, db, storetest.Outcome{Status: "discarded", By: "a", Reason: "r"}, "id % 11 = 0")
	// A restore, as RestoreDeadLetter does it: the discard's outcome goes
	// and the letter is pending again.
	exec(`WITH undone AS (
			DELETE FROM dead_letter_outcomes WHERE dead_letter_id % 22 = 0 AND discarded_at IS NOT NULL
			RETURNING dead_letter_id)
		INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
		SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM dead_letter_records
		WHERE id IN (SELECT dead_letter_id FROM undone)`)
	exec(`DELETE FROM dead_letter_records WHERE id % 13 = 0`)
	// Retention takes the oldest and the newest letters of some groups:
	// their first and last seen, and sample message, must follow.
	exec(`DELETE FROM dead_letter_records WHERE id > 490 OR id < 12`)

	checks := map[string]string{
		"counts": `SELECT count(*) FROM (
			SELECT task, queue, status, count(*) AS n FROM dead_letters GROUP BY 1, 2, 3
			EXCEPT SELECT task, queue, status, n FROM dead_letter_counts WHERE n > 0) x`,
		"groups": `SELECT count(*) FROM (
			SELECT fingerprint, count(*), count(*) FILTER (WHERE status = 'pending'), min(failed_at), max(failed_at),
				(array_agg(error_message ORDER BY failed_at DESC, id DESC))[1]
			FROM dead_letters GROUP BY 1
			EXCEPT SELECT fingerprint, total, pending, first_seen, last_seen, sample_message FROM error_groups) x`,
		"inflow": `SELECT count(*) FROM (
			SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, count(*) FROM dead_letters GROUP BY 1, 2, 3
			EXCEPT SELECT fingerprint, hour, queue, n FROM dead_letter_inflow) x`,
		"hourly totals": `SELECT count(*) FROM (
			SELECT date_trunc('hour', failed_at, 'UTC'), count(*) FROM dead_letters GROUP BY 1
			EXCEPT SELECT hour, n FROM dead_letter_inflow_totals) x`,
	}
	// Each check is one direction of a set difference; add the other.
	for name, q := range map[string]string{
		"counts (extra)": `SELECT count(*) FROM (SELECT task, queue, status, n FROM dead_letter_counts WHERE n > 0
			EXCEPT SELECT task, queue, status, count(*) FROM dead_letters GROUP BY 1, 2, 3) x`,
		"groups (extra)": `SELECT count(*) FROM error_groups WHERE fingerprint NOT IN (SELECT fingerprint FROM dead_letters)`,
		"inflow (extra)": `SELECT count(*) FROM (SELECT fingerprint, hour, queue, n FROM dead_letter_inflow
			EXCEPT SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, count(*) FROM dead_letters GROUP BY 1, 2, 3) x`,
		"hourly totals (extra)": `SELECT count(*) FROM (SELECT hour, n FROM dead_letter_inflow_totals
			EXCEPT SELECT date_trunc('hour', failed_at, 'UTC'), count(*) FROM dead_letters GROUP BY 1) x`,
	} {
		checks[name] = q
	}
	for name, q := range checks {
		var mismatches int
		if err := db.GetContext(ctx, &mismatches, q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if mismatches != 0 {
			t.Errorf("%s: %d summary rows disagree with dead_letters", name, mismatches)
		}
	}
}

package storetest

import "testing"

// AssertSummariesMatch checks what the triggers keep against the letters
// themselves: the per-status counts, each error group's total and pending
// count, the hourly inflow and its daily and total rollups, each other
// source's pending count, and that a letter has a pending row exactly when
// it is pending.
func AssertSummariesMatch(t testing.TB, db *DB) {
	t.Helper()
	for _, check := range []struct{ what, query string }{
		{"(task, queue, status) counts differ from the letters", `
			SELECT count(*) FROM (
				SELECT task, queue, status, count(*) AS n FROM dead_letters GROUP BY 1, 2, 3
			) real FULL JOIN (SELECT task, queue, status, n FROM dead_letter_counts WHERE n <> 0) kept
				USING (task, queue, status)
			WHERE real.n IS DISTINCT FROM kept.n`},
		{"error groups' counts differ from the letters", `
			SELECT count(*) FROM error_groups g
			WHERE g.pending <> (SELECT count(*) FROM dead_letters d WHERE d.fingerprint = g.fingerprint AND d.status = 'pending')
			   OR g.total <> (SELECT count(*) FROM dead_letters d WHERE d.fingerprint = g.fingerprint)`},
		{"(error group, hour, queue) inflow counts differ from the letters", `
			SELECT count(*) FROM (
				SELECT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue, count(*) AS n
				FROM dead_letter_records GROUP BY 1, 2, 3
			) real FULL JOIN (SELECT fingerprint, hour, queue, n FROM dead_letter_inflow WHERE n <> 0) kept
				USING (fingerprint, hour, queue)
			WHERE real.n IS DISTINCT FROM kept.n`},
		{"daily inflow counts differ from the hourly ones", `
			SELECT count(*) FROM (
				SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day, sum(n) AS n FROM dead_letter_inflow GROUP BY 1, 2
				HAVING sum(n) <> 0
			) real FULL JOIN dead_letter_inflow_daily kept USING (fingerprint, day)
			WHERE real.n IS DISTINCT FROM kept.n`},
		{"hourly inflow totals differ from the hourly rows", `
			SELECT count(*) FROM (
				SELECT hour, sum(n) AS n FROM dead_letter_inflow GROUP BY 1 HAVING sum(n) <> 0
			) real FULL JOIN dead_letter_inflow_totals kept USING (hour)
			WHERE real.n IS DISTINCT FROM kept.n`},
		{"sources' pending counts differ from their letters", `
			SELECT count(*) FROM (
				SELECT l.source, count(*) AS n FROM letter_sources l JOIN pending_dead_letters p ON p.id = l.dead_letter_id
				GROUP BY 1
			) real FULL JOIN (SELECT source, pending AS n FROM source_counts WHERE pending <> 0) kept USING (source)
			WHERE real.n IS DISTINCT FROM kept.n`},
		{"letters' pending rows disagree with their status", `
			SELECT count(*) FROM dead_letters d
			WHERE (d.status = 'pending') <> EXISTS (SELECT 1 FROM pending_dead_letters p WHERE p.id = d.id)`},
	} {
		var n int
		if err := db.Get(&n, check.query); err != nil {
			t.Fatalf("%s: %v", check.query, err)
		}
		if n != 0 {
			t.Fatalf("%d %s", n, check.what)
		}
	}
}

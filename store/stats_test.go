package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func TestOverview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// 10 letters: one failing now, one 3 hours ago (today
	// or yesterday, depending on the hour) and eight 3 days ago; 2 of them
	// replayed, 1 discarded.
	exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
		max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT g, 'default', CASE WHEN g <= 6 THEN 'billing.charge' ELSE 'mail.send' END, '[]', '{}', 'E',
			'boom ' || g, 1, 1, 'permanent', CASE WHEN g <= 6 THEN 'fp-charge' ELSE 'fp-mail' END, now(),
			now() - CASE g WHEN 1 THEN interval '0' WHEN 2 THEN interval '3 hours' ELSE interval '3 days' END
		FROM generate_series(1, 10) g`)
	storetest.Settle(t, db, storetest.Outcome{Status: "replayed", By: "a"}, "job_id IN (3, 4)")
	storetest.Settle(t, db, storetest.Outcome{Status: "discarded", By: "a", Reason: "r"}, "job_id = 10")
	exec(`INSERT INTO workers (id, host, pid, queues, concurrency, heartbeat_at) VALUES
		('w-live', 'h1', 1, '{default}', 4, now() - interval '5 seconds'),
		('w-stale', 'h2', 2, '{default}', 4, now() - interval '5 minutes')`)
	insertJobs(t, db, 3, "default", "t.ok", dlq.StateAvailable)

	o, err := store.Letters.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.DeadLetters != (dlq.StatusCounts{Pending: 7, Replayed: 2, Discarded: 1}) {
		t.Errorf("dead letters %+v", o.DeadLetters)
	}
	if len(o.Hourly) != 24 || len(o.Daily) != 14 {
		t.Fatalf("%d hourly and %d daily buckets, want 24 and 14", len(o.Hourly), len(o.Daily))
	}
	if got := sum(o.Hourly); got != 2 {
		t.Errorf("last 24 hours: %d letters, want 2", got)
	}
	if got := sum(o.Daily); got != 10 {
		t.Errorf("last 14 days: %d letters, want 10", got)
	}
	if last := o.Hourly[23]; !last.Start.Equal(o.Now.UTC().Truncate(time.Hour)) || last.N != 1 {
		t.Errorf("the last hourly bucket %+v is not the current hour with one letter (now %s)", last, o.Now)
	}
	for i := 1; i < len(o.Daily); i++ {
		if d := o.Daily[i].Start.Sub(o.Daily[i-1].Start); d != 24*time.Hour {
			t.Fatalf("daily buckets %d and %d are %s apart", i-1, i, d)
		}
	}
	if want := []dlq.TaskPending{{Task: "billing.charge", Pending: 4}, {Task: "mail.send", Pending: 3}}; !slices.Equal(o.TopTasks, want) {
		t.Errorf("top tasks %+v, want %+v", o.TopTasks, want)
	}
	if len(o.Jobs) != 1 || o.Jobs[0].N != 3 {
		t.Errorf("jobs %+v", o.Jobs)
	}
	stale := map[string]bool{}
	for _, w := range o.Workers {
		stale[w.ID] = w.Stale()
	}
	if len(stale) != 2 || stale["w-live"] || !stale["w-stale"] {
		t.Errorf("stale workers %v, want only w-stale", stale)
	}

	m, err := store.Letters.MetricsSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.DeadLetters) != 4 || len(m.Jobs) != 1 || len(m.Workers) != 2 {
		t.Errorf("metrics snapshot: %d letter series, %d job series, %d workers", len(m.DeadLetters), len(m.Jobs), len(m.Workers))
	}
}

func TestOverviewOfAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	o, err := store.Letters.Overview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.DeadLetters.Total() != 0 || len(o.Jobs) != 0 || len(o.TopTasks) != 0 || len(o.Workers) != 0 || sum(o.Daily) != 0 {
		t.Fatalf("empty database, non-empty overview: %+v", o)
	}
}

// TestOverviewLeavesErrorGroupsAlone: the front page and its 5-second
// refresh rank their groups through ListGroups, in the order the reader
// chose; Overview itself reads no group, so it goes on answering while
// error_groups is locked (by a long migration, say) and costs nothing there.
func TestOverviewLeavesErrorGroupsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "fp-charge"})
	lock, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, `LOCK TABLE error_groups IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	o, err := store.Letters.Overview(octx)
	if err != nil {
		t.Fatalf("overview with error_groups locked: %v", err)
	}
	if o.DeadLetters.Pending != 1 || len(o.TopTasks) != 1 || o.TopTasks[0].Task != "billing.charge" {
		t.Errorf("overview %+v, want the one pending letter of billing.charge", o)
	}
}

func sum(bs []dlq.InflowBucket) int64 {
	var n int64
	for _, b := range bs {
		n += b.N
	}
	return n
}

// The hourly totals behind the overview charts always equal the per-hour
// sum of the inflow summary (and of the letters), through inserts across
// many hours, status changes, purges and a correction of the inflow itself.
func TestInflowTotalsFollowTheLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	check := func(stage string) {
		t.Helper()
		var mismatches int
		err := db.GetContext(ctx, &mismatches, `SELECT count(*) FROM (
			(SELECT date_trunc('hour', failed_at, 'UTC') AS hour, count(*) AS n FROM dead_letters GROUP BY 1
			 EXCEPT SELECT hour, n FROM dead_letter_inflow_totals)
			UNION ALL
			(SELECT hour, n FROM dead_letter_inflow_totals
			 EXCEPT SELECT date_trunc('hour', failed_at, 'UTC'), count(*) FROM dead_letters GROUP BY 1)) x`)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if mismatches != 0 {
			t.Errorf("%s: %d hourly totals disagree with the letters", stage, mismatches)
		}
	}
	exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
		max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT g, CASE WHEN g % 3 = 0 THEN 'payments' ELSE 'default' END, 't' || (g % 4), '[]', '{}', 'E', 'boom',
			1, 1, 'permanent', 'fp' || (g % 5), now(), now() - (g * 7 || ' minutes')::interval
		FROM generate_series(1, 800) g`)
	check("after a bulk insert over four days")
	exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
		max_attempts, reason, fingerprint, enqueued_at)
		VALUES (5000, 'default', 't1', '[]', '{}', 'E', 'boom', 1, 1, 'permanent', 'fp1', now())`)
	check("after one more letter now")
	storetest.Settle(t, db, storetest.Outcome{Status: "replayed", By: "a"}, "id % 7 = 0")
	check("after replaying some")
	exec(`DELETE FROM dead_letter_records WHERE id % 3 = 0 OR failed_at < now() - interval '2 days'`)
	check("after a purge")
	var emptyRows int
	if err := db.GetContext(ctx, &emptyRows, `SELECT count(*) FROM dead_letter_inflow_totals WHERE n <= 0`); err != nil {
		t.Fatal(err)
	}
	if emptyRows != 0 {
		t.Errorf("%d hours with no letters left behind", emptyRows)
	}
}

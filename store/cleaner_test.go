package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/store/queue"
)

// TestCleanerReadsWhatItDeletes checks the cleaner's walk of
// jobs_succeeded_idx stops at the jobs created after its cutoff: the
// succeeded jobs it must keep (a day's worth, in production millions) cost
// it nothing, whichever (queue, task) pair they are in.
func TestCleanerReadsWhatItDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	// Oldest ids first, as enqueued: old jobs in two pairs among old dead
	// jobs (kept while their letters are), then a job that waited a month
	// and ran an hour ago, then the recent ones.
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, created_at, finished_at)
		SELECT CASE WHEN g % 2 = 0 THEN 'default' ELSE 'payments' END, 't.ok',
			CASE WHEN g % 70 = 0 THEN 'succeeded' ELSE 'dead' END, 1,
			now() - interval '3 days', now() - interval '2 days'
		FROM generate_series(1, 21000) g`)
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, created_at, finished_at)
		VALUES ('default', 't.ok', 'succeeded', 1, now() - interval '30 days', now() - interval '1 hour')`)
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, created_at, finished_at)
		SELECT CASE WHEN g % 2 = 0 THEN 'default' ELSE 'payments' END, CASE WHEN g % 3 = 0 THEN 't.other' ELSE 't.ok' END,
			'succeeded', 1, now() - interval '1 hour', now() - interval '30 minutes'
		FROM generate_series(1, 20000) g`)
	db.MustExec(`ANALYZE jobs`)
	cutoff := time.Now().Add(-24 * time.Hour)

	// The plan, in a transaction rolled back: the delete reads about what
	// it deletes. Without the bound it would walk all 20,001 kept jobs'
	// entries in jobs_succeeded_idx; through the primary key, the 21,000
	// old jobs.
	tx := db.MustBegin()
	var bound int64
	if err := tx.GetContext(ctx, &bound, queue.SucceededBoundSQL, cutoff); err != nil {
		t.Fatal(err)
	}
	read, buffers := explainRead(t, tx, "jobs", queue.DeleteSucceededSQL, cutoff, 10_000, bound)
	_ = tx.Rollback()
	if bound != 21_002 {
		t.Errorf("bound %d, want 21,002: the first job created after the cutoff", bound)
	}
	t.Logf("deleting 300 of 41,001 jobs read %.0f rows or entries of jobs, %.0f buffers", read, buffers)
	if read > 1_000 {
		t.Errorf("deleting 300 jobs read %.0f rows or entries of jobs; want about what it deletes", read)
	}

	n, busy, err := store.Queue.DeleteSucceeded(ctx, cutoff, 10_000)
	if err != nil || busy || n != 300 {
		t.Fatalf("deleted %d (busy %v, err %v); want the 300 old jobs", n, busy, err)
	}
	var left int
	if err := db.Get(&left, `SELECT count(*) FROM jobs WHERE state = 'succeeded' AND finished_at < $1`, cutoff); err != nil || left != 0 {
		t.Fatalf("%d succeeded jobs past the retention left (%v)", left, err)
	}
	if err := db.Get(&left, `SELECT count(*) FROM jobs`); err != nil || left != 40_701 {
		t.Fatalf("%d jobs left (%v); want the 40,701 others", left, err)
	}
	kept, err := store.Queue.SucceededKept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The oldest kept is the job that waited a month: it sits first in
	// its pair, where the cleaner starts.
	if age := time.Since(kept.Oldest); age < 55*time.Minute || age > 65*time.Minute {
		t.Errorf("oldest kept finished %s ago, want about an hour", age)
	}
}

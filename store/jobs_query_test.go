package store_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/storetest"
)

func TestJobList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	avail := insertJobs(t, db, 7, "default", "t.ok", dlq.StateAvailable)
	pay := insertJobs(t, db, 5, "payments", "t.other", dlq.StateRetrying)
	insertJobs(t, db, 2, "default", "t.other", dlq.StateRunning)
	insertJobs(t, db, 3, "payments", "t.ok", dlq.StateSucceeded)

	t.Run("KeysetPagesCoverEverythingOnceNewestFirst", func(t *testing.T) {
		t.Parallel()
		f := dlq.JobFilter{Limit: 4}
		var seen []int64
		var pages int
		for {
			page, err := store.Queue.Jobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, j := range page.Jobs {
				seen = append(seen, j.ID)
			}
			if page.Older == 0 {
				break
			}
			if pages > 1 && page.Newer == 0 {
				t.Errorf("page %d has no link back to newer jobs", pages)
			}
			f.Before = page.Older
		}
		if len(seen) != 17 || pages != 5 {
			t.Fatalf("saw %d jobs on %d pages, want 17 on 5", len(seen), pages)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] >= seen[i-1] {
				t.Fatalf("not newest first: %v", seen)
			}
		}
	})

	t.Run("NewerPageGoesBack", func(t *testing.T) {
		t.Parallel()
		first, err := store.Queue.Jobs(ctx, dlq.JobFilter{Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		second, err := store.Queue.Jobs(ctx, dlq.JobFilter{Limit: 4, Before: first.Older})
		if err != nil {
			t.Fatal(err)
		}
		back, err := store.Queue.Jobs(ctx, dlq.JobFilter{Limit: 4, After: second.Newer})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(back.Jobs), ids(first.Jobs)) {
			t.Fatalf("newer page %v, want the first page %v", ids(back.Jobs), ids(first.Jobs))
		}
		if back.Newer != 0 {
			t.Errorf("the newest page links to newer jobs (%d)", back.Newer)
		}
	})

	t.Run("FiltersCombine", func(t *testing.T) {
		t.Parallel()
		page, err := store.Queue.Jobs(ctx, dlq.JobFilter{State: dlq.StateRetrying, Queue: "payments", Task: "t.other", Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		want := append([]int64(nil), pay...)
		slices.Reverse(want)
		if !reflect.DeepEqual(ids(page.Jobs), want) {
			t.Fatalf("got %v, want %v", ids(page.Jobs), want)
		}
	})

	t.Run("TaskAcrossStatesPagesInIDOrder", func(t *testing.T) {
		t.Parallel()
		// t.other has retrying (pay) and running jobs; each state is read
		// from its own index range and the branches merged.
		var all []int64
		for f := (dlq.JobFilter{Task: "t.other", Limit: 3}); ; {
			page, err := store.Queue.Jobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ids(page.Jobs)...)
			if page.Older == 0 {
				break
			}
			f.Before = page.Older
		}
		if len(all) != 7 || !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
			t.Fatalf("t.other jobs %v, want 7 newest first", all)
		}
		total, err := store.Queue.CountJobs(ctx, dlq.JobFilter{Task: "t.other"})
		if err != nil || total != (dlq.JobTotal{N: 7}) {
			t.Fatalf("count %+v, %v; want 7", total, err)
		}
		total, err = store.Queue.CountJobs(ctx, dlq.JobFilter{Queue: "payments"})
		if err != nil || total != (dlq.JobTotal{N: 8}) {
			t.Fatalf("payments count %+v, %v; want 8", total, err)
		}
	})

	t.Run("ExactCountForActiveStates", func(t *testing.T) {
		t.Parallel()
		got, err := store.Queue.CountJobs(ctx, dlq.JobFilter{State: dlq.StateAvailable})
		if err != nil {
			t.Fatal(err)
		}
		if got != (dlq.JobTotal{N: int64(len(avail))}) {
			t.Fatalf("count %+v, want %d exact", got, len(avail))
		}
	})

	t.Run("CountByQueueAndState", func(t *testing.T) {
		t.Parallel()
		counts, err := store.Queue.JobCounts(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := []dlq.JobCount{
			{Queue: "default", State: dlq.StateAvailable, N: 7},
			{Queue: "default", State: dlq.StateRunning, N: 2},
			{Queue: "payments", State: dlq.StateRetrying, N: 5},
			{Queue: "payments", State: dlq.StateSucceeded, N: 3},
		}
		if !reflect.DeepEqual(counts, want) {
			t.Fatalf("got %+v, want %+v", counts, want)
		}
		queues, err := store.Queue.JobQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(queues, []string{"default", "payments"}) {
			t.Fatalf("queues %v", queues)
		}
	})
}

func TestCountJobsStopsAtTheCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	insertJobs(t, db, dlq.CountCap+5, "default", "t.ok", dlq.StateSucceeded)
	insertJobs(t, db, 3, "default", "t.ok", dlq.StateDead)
	avail := insertJobs(t, db, dlq.CountCap+2, "default", "t.ok", dlq.StateAvailable)

	got, err := store.Queue.CountJobs(ctx, dlq.JobFilter{State: dlq.StateSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	if got != (dlq.JobTotal{N: dlq.CountCap, Capped: true}) {
		t.Fatalf("succeeded: %+v, want capped at %d", got, dlq.CountCap)
	}
	// The list counts waiting jobs exactly, past the cap.
	got, err = store.Queue.CountJobs(ctx, dlq.JobFilter{State: dlq.StateAvailable})
	if err != nil {
		t.Fatal(err)
	}
	if got != (dlq.JobTotal{N: int64(len(avail))}) {
		t.Fatalf("available: %+v, want %d exact", got, len(avail))
	}
	got, err = store.Queue.CountJobs(ctx, dlq.JobFilter{State: dlq.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	if got != (dlq.JobTotal{N: 3}) {
		t.Fatalf("dead: %+v, want 3 uncapped", got)
	}
	// By queue and state (the overview), every count stops at the cap.
	counts, err := store.Queue.JobCounts(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []dlq.JobCount{
		{Queue: "default", State: dlq.StateAvailable, N: 100, Capped: true},
		{Queue: "default", State: dlq.StateDead, N: 3},
		{Queue: "default", State: dlq.StateSucceeded, N: 100, Capped: true},
	}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("by queue: %+v, want %+v", counts, want)
	}
}

func TestDeadLetterIDForJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	var letterID int64
	err := db.GetContext(ctx, &letterID, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs,
		error_class, error_message, attempts, max_attempts, reason, fingerprint, enqueued_at)
		VALUES (42, 'default', 't.ok', '[]', '{}', 'E', 'boom', 1, 1, 'permanent', 'fp', now()) RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Queue.DeadLetterIDForJob(ctx, 42)
	if err != nil || got != letterID {
		t.Fatalf("got %d, %v; want %d", got, err, letterID)
	}
	if _, err := store.Queue.DeadLetterIDForJob(ctx, 43); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("job without a letter: %v, want ErrNotFound", err)
	}
}

func ids(jobs []dlq.JobListItem) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestSucceededJobList checks the succeeded jobs, which live in
// jobs_succeeded_idx by (queue, task) pair and, for replays, in the
// console's other indexes (00100_queue.sql), page newest first as one list, and
// count as one, whatever the filter.
func TestSucceededJobList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	var letter int64
	if err := db.Get(&letter, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class,
		error_message, attempts, max_attempts, reason, fingerprint, enqueued_at)
		VALUES (0, 'payments', 't.ok', '[]', '{}', 'E', 'boom', 1, 1, 'permanent', 'f', now())
		RETURNING id`); err != nil {
		t.Fatal(err)
	}
	var all []int64
	succeeded := func(n int, queue, task string, replayOf any) []int64 {
		var got []int64
		if err := db.Select(&got, `INSERT INTO jobs (queue, task, state, attempt, finished_at, replay_of)
			SELECT $2, $3, 'succeeded', 1, now(), $4 FROM generate_series(1, $1) RETURNING id`,
			n, queue, task, replayOf); err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		return got
	}
	// Interleaved, so that every page draws on several pairs.
	var paymentsOK []int64
	for range 3 {
		succeeded(2, "default", "t.ok", nil)
		paymentsOK = append(paymentsOK, succeeded(2, "payments", "t.ok", nil)...)
		succeeded(1, "default", "t.other", nil)
		paymentsOK = append(paymentsOK, succeeded(1, "payments", "t.ok", letter)...)
	}
	insertJobs(t, db, 4, "payments", "t.ok", dlq.StateDead)
	newestFirst := func(ids []int64) []int64 {
		out := slices.Clone(ids)
		slices.Sort(out)
		slices.Reverse(out)
		return out
	}

	for _, c := range []struct {
		name string
		f    dlq.JobFilter
		want []int64
	}{
		{"All", dlq.JobFilter{State: dlq.StateSucceeded}, newestFirst(all)},
		{"OneQueueAndTaskWithReplays", dlq.JobFilter{State: dlq.StateSucceeded, Queue: "payments", Task: "t.ok"}, newestFirst(paymentsOK)},
		{"OneQueue", dlq.JobFilter{State: dlq.StateSucceeded, Queue: "payments"}, newestFirst(paymentsOK)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var seen []int64
			f := c.f
			f.Limit = 4
			for {
				page, err := store.Queue.Jobs(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, ids(page.Jobs)...)
				if page.Older == 0 {
					break
				}
				f.Before = page.Older
			}
			if !reflect.DeepEqual(seen, c.want) {
				t.Fatalf("pages %v, want %v", seen, c.want)
			}
			// And back: the newer page of the last one.
			last, err := store.Queue.Jobs(ctx, dlq.JobFilter{State: c.f.State, Queue: c.f.Queue, Task: c.f.Task, Limit: 4, After: c.want[len(c.want)-1]})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(c.want) - 1; !reflect.DeepEqual(ids(last.Jobs), c.want[max(0, n-4):n]) {
				t.Errorf("newer page %v, want %v", ids(last.Jobs), c.want[max(0, n-4):n])
			}
			total, err := store.Queue.CountJobs(ctx, c.f)
			if err != nil || total != (dlq.JobTotal{N: int64(len(c.want))}) {
				t.Fatalf("count %+v, %v; want %d", total, err, len(c.want))
			}
		})
	}

	t.Run("TaskAcrossStates", func(t *testing.T) {
		t.Parallel()
		page, err := store.Queue.Jobs(ctx, dlq.JobFilter{Task: "t.ok", Queue: "payments", Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) != len(paymentsOK)+4 {
			t.Fatalf("payments t.ok jobs %v, want the %d succeeded and 4 dead", ids(page.Jobs), len(paymentsOK))
		}
		counts, err := store.Queue.JobCounts(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := []dlq.JobCount{
			{Queue: "default", State: dlq.StateSucceeded, N: 9},
			{Queue: "payments", State: dlq.StateDead, N: 4},
			{Queue: "payments", State: dlq.StateSucceeded, N: 9},
		}
		if !reflect.DeepEqual(counts, want) {
			t.Fatalf("counts %+v, want %+v", counts, want)
		}
	})
}

// TestSucceededJobListCostIsFlat checks a page of succeeded jobs reads a
// page from each (queue, task) range of jobs_succeeded_idx, however many
// succeeded jobs there are and however rare the filter's: a scan of the
// primary key that filtered them would read all 20,000 for the rare task.
func TestSucceededJobListCostIsFlat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, finished_at)
		SELECT CASE WHEN g % 2 = 0 THEN 'default' ELSE 'payments' END,
			CASE WHEN g % 4 < 2 THEN 't.ok' ELSE 't.other' END, 'succeeded', 1, now()
		FROM generate_series(1, 20000) g`)
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, finished_at)
		SELECT 'rare', 't.rare', 'succeeded', 1, now() FROM generate_series(1, 20)`)
	db.MustExec(`INSERT INTO jobs (queue, task, state, attempt, finished_at)
		SELECT 'default', 't.ok', 'succeeded', 1, now() FROM generate_series(1, 5000)`)
	db.MustExec(`ANALYZE jobs`)

	const limit = 50
	for _, f := range []dlq.JobFilter{
		{State: dlq.StateSucceeded},
		{State: dlq.StateSucceeded, Task: "t.rare"},
		{State: dlq.StateSucceeded, Queue: "payments"},
		{State: dlq.StateSucceeded, Queue: "default", Task: "t.ok"},
		{Task: "t.rare"},
		{Queue: "rare"},
	} {
		f.Limit = limit
		query, args := queue.JobsQuery(f)
		read, _ := explainRead(t, db, "jobs", query, args...)
		// Five pairs: a page of limit+1 from each, and a probe each.
		if read > 5*(limit+1)+20 {
			t.Errorf("%+v: a page read %.0f rows of jobs among 25,020 succeeded; want at most a page a pair", f, read)
		}
	}
	// A count stops at the cap, read the same way: the rare pair's 20.
	store := storetest.NewStores(db.DB)
	for _, f := range []dlq.JobFilter{{State: dlq.StateSucceeded, Task: "t.rare"}, {Queue: "rare"}} {
		total, err := store.Queue.CountJobs(ctx, f)
		if err != nil || total != (dlq.JobTotal{N: 20}) {
			t.Errorf("%+v: count %+v, %v; want 20", f, total, err)
		}
	}
}

// insertJobs inserts n jobs of one queue, task and state straight into the
// table (the worker's transitions are tested elsewhere) and returns their
// ids in insertion order.
func insertJobs(t *testing.T, db *storetest.DB, n int, queue, task string, state dlq.State) []int64 {
	t.Helper()
	var ids []int64
	err := db.SelectContext(context.Background(), &ids, `
		INSERT INTO jobs (queue, task, state, attempt, lease_owner, lease_expires_at)
		SELECT $2, $3, $4, CASE WHEN $4 = 'available' THEN 0 ELSE 1 END,
			CASE WHEN $4 = 'running' THEN 'w1' END,
			CASE WHEN $4 = 'running' THEN now() + interval '30 seconds' END
		FROM generate_series(1, $1)
		RETURNING id`, n, queue, task, string(state))
	if err != nil {
		t.Fatalf("insert jobs: %v", err)
	}
	return ids
}

package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
)

// copyBatch is a batch big enough for COPY, without idempotency keys, with
// every column a job can set varied across it.
func copyBatch(n int, later time.Time) []dlq.EnqueueParams {
	batch := make([]dlq.EnqueueParams, n)
	for i := range batch {
		batch[i] = dlq.EnqueueParams{Task: "t.ok", Args: json.RawMessage(fmt.Sprintf(`[%d, "tab\there", "back\\\\slash"]`, i)),
			Kwargs: json.RawMessage(fmt.Sprintf(`{"i": %d, "line": "a\nb"}`, i))}
		switch i % 4 {
		case 1:
			batch[i].Queue, batch[i].Task, batch[i].MaxAttempts = "emails", "t.other", 9
		case 2:
			batch[i].RunAt, batch[i].Timeout = later, 90*time.Second
		}
	}
	return batch
}

// A batch without idempotency keys goes in with COPY: every job as asked
// for, ids in input order, defaults as an INSERT gives them, and workers
// notified.
func TestEnqueueManyByCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EveryColumnAsAskedIdsInOrder", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		batch := copyBatch(500, later)
		ids, err := store.Queue.EnqueueMany(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(batch) {
			t.Fatalf("%d ids for %d jobs", len(ids), len(batch))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("ids not rising in input order at %d: %d then %d", i, ids[i-1], ids[i])
			}
		}
		for i, id := range ids {
			j, err := store.Queue.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}

			var args []any
			var kwargs map[string]any
			if err := json.Unmarshal(j.Args, &args); err != nil || args[0] != float64(i) || args[1] != "tab\there" || args[2] != `back\\slash` {
				t.Fatalf("job %d (input %d) has args %s (%v)", id, i, j.Args, err)
			}
			if err := json.Unmarshal(j.Kwargs, &kwargs); err != nil || kwargs["i"] != float64(i) || kwargs["line"] != "a\nb" {
				t.Fatalf("job %d (input %d) has kwargs %s (%v)", id, i, j.Kwargs, err)
			}
			wantQueue, wantTask, wantMax := "default", "t.ok", dlq.DefaultMaxAttempts
			if i%4 == 1 {
				wantQueue, wantTask, wantMax = "emails", "t.other", 9
			}
			if j.Queue != wantQueue || j.Task != wantTask || j.MaxAttempts != wantMax || j.State != dlq.StateAvailable ||
				j.Attempt != 0 || j.IdempotencyKey != nil || j.ReplayOf != nil || len(j.Errors) != 0 {
				t.Fatalf("job %d (input %d) is %+v", id, i, j)
			}
			if i%4 == 2 {
				if !j.RunAt.Equal(later) || j.Timeout() != 90*time.Second {
					t.Fatalf("job %d: run_at %s timeout %s, want %s and 1m30s", id, j.RunAt, j.Timeout(), later)
				}
			} else if !j.RunAt.Equal(j.CreatedAt) || j.Timeout() != 0 {
				// What DEFAULT now() gives: the transaction's clock, the
				// same for run_at and created_at.
				t.Fatalf("job %d: run_at %s created_at %s timeout %s; want run_at = created_at, no timeout",
					id, j.RunAt, j.CreatedAt, j.Timeout())
			}
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != len(batch) {
			t.Fatalf("%d jobs in the table (%v)", n, err)
		}
	})

	t.Run("UnknownTaskAddsNothing", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		batch := copyBatch(200, time.Now())
		batch[150].Task = "t.nobody"
		_, err := store.Queue.EnqueueMany(ctx, batch)
		var ve *dlq.ValidationError
		if !errors.As(err, &ve) || ve.Fields["task"] == "" {
			t.Fatalf("want a validation error naming the task, got %v", err)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 0 {
			t.Fatalf("a refused batch left %d jobs (%v)", n, err)
		}
	})

	t.Run("InsideTheProducersTransaction", func(t *testing.T) {
		t.Parallel()
		_, db := setup(t)
		tx := db.MustBegin()
		ids, err := queue.EnqueueMany(ctx, tx, copyBatch(100, time.Now()))
		if err != nil || len(ids) != 100 {
			t.Fatalf("enqueue in a transaction: %d ids, %v", len(ids), err)
		}
		var seen int
		if err := tx.Get(&seen, `SELECT count(*) FROM jobs WHERE id = ANY($1)`, ids); err == nil && seen != 100 {
			t.Fatalf("the transaction sees %d of its 100 jobs", seen)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 0 {
			t.Fatalf("a rolled-back producer left %d jobs (%v)", n, err)
		}
	})

	t.Run("NotifiesIdleWorkers", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		l := pq.NewListener(db.DSN, 10*time.Millisecond, time.Second, nil)
		defer l.Close()
		if err := l.Listen("redrive_jobs"); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Queue.EnqueueMany(ctx, copyBatch(100, time.Now())); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		timeout := time.After(10 * time.Second)
		for !got["default"] || !got["emails"] {
			select {
			case n := <-l.Notify:
				if n != nil {
					got[n.Extra] = true
				}
			case <-timeout:
				t.Fatalf("notified of queues %v; want default and emails", got)
			}
		}
	})
}

// COPY runs inside the batch's transaction, so a transaction pooler keeps
// it on one server connection: batches from many clients over a pool of
// few connections all land whole.
func TestEnqueueManyByCopyThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	ps := throughPooler(t, db)
	var mu sync.Mutex
	seen := map[int64]bool{}
	var errs []error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				ids, err := ps.Queue.EnqueueMany(ctx, copyBatch(100, time.Now()))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, id := range ids {
					seen[id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 40 batches failed through the pooler, e.g. %v", len(errs), errs[0])
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 4000 || len(seen) != 4000 {
		t.Fatalf("%d jobs in the table, %d distinct ids returned; want 4,000 of each (%v)", n, len(seen), err)
	}
}

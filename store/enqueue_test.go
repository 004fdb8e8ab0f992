package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func setup(t *testing.T) (*storetest.Stores, *storetest.DB) {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(context.Background(), []string{"t.ok", "t.other"}); err != nil {
		t.Fatal(err)
	}
	return store, db
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DefaultsApplied", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok"})
		if err != nil {
			t.Fatal(err)
		}
		j := res.Job
		if j.Queue != "default" || j.MaxAttempts != 5 || string(j.Args) != "[]" || string(j.Kwargs) != "{}" || j.State != dlq.StateAvailable {
			t.Fatalf("defaults not applied: %+v", j)
		}
	})

	t.Run("SameKeyTwiceIsOneJob", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		var wg sync.WaitGroup
		ids := make([]int64, 10)
		for i := range ids {
			wg.Go(func() {
				res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok", IdempotencyKey: "order-42"})
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = res.Job.ID
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("different jobs for one key: %v", ids)
			}
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 1 {
			t.Fatalf("want 1 job, have %d (%v)", n, err)
		}
		res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok", IdempotencyKey: "order-42"})
		if err != nil || !res.Existing {
			t.Fatalf("second enqueue should report the existing job: %+v %v", res, err)
		}
	})

	t.Run("BadInputRefusedWithClearError", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		cases := []struct {
			name  string
			p     dlq.EnqueueParams
			field string
		}{
			{"unknown task", dlq.EnqueueParams{Task: "no.such.task"}, "task"},
			{"empty task", dlq.EnqueueParams{}, "task"},
			{"malformed args", dlq.EnqueueParams{Task: "t.ok", Args: json.RawMessage(`[1,`)}, "args"},
			{"args not an array", dlq.EnqueueParams{Task: "t.ok", Args: json.RawMessage(`{"a":1}`)}, "args"},
			{"kwargs not an object", dlq.EnqueueParams{Task: "t.ok", Kwargs: json.RawMessage(`[1]`)}, "kwargs"},
			{"negative max attempts", dlq.EnqueueParams{Task: "t.ok", MaxAttempts: -1}, "max_attempts"},
			{"bad queue", dlq.EnqueueParams{Task: "t.ok", Queue: "has space"}, "queue"},
		}
		for _, c := range cases {
			_, err := store.Queue.Enqueue(ctx, c.p)
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, dlq.ErrInvalid) {
				t.Errorf("%s: want a validation error, got %v", c.name, err)
				continue
			}
			if ve.Fields[c.field] == "" {
				t.Errorf("%s: error does not name field %q: %v", c.name, c.field, err)
			}
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 0 {
			t.Fatalf("bad input left %d jobs behind (%v)", n, err)
		}
	})

	t.Run("BatchIsAllOrNothingAndKeepsOrder", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		first, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok", IdempotencyKey: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		batch := []dlq.EnqueueParams{
			{Task: "t.ok", Args: json.RawMessage(`[1]`)},
			{Task: "t.ok", IdempotencyKey: "k1"},
			{Task: "t.other", IdempotencyKey: "k2"},
			{Task: "t.ok", Args: json.RawMessage(`[4]`)},
		}
		ids, err := store.Queue.EnqueueMany(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 4 || ids[1] != first.Job.ID || ids[0] == 0 || ids[2] == 0 || ids[3] <= ids[0] {
			t.Fatalf("ids out of order or missing: %v (first %d)", ids, first.Job.ID)
		}
		var args string
		if err := db.Get(&args, `SELECT args::text FROM jobs WHERE id = $1`, ids[3]); err != nil || args != "[4]" {
			t.Fatalf("job %d has args %s (%v)", ids[3], args, err)
		}
		_, err = store.Queue.EnqueueMany(ctx, []dlq.EnqueueParams{{Task: "t.ok"}, {Task: "t.ok", MaxAttempts: -3}})
		if !errors.Is(err, dlq.ErrInvalid) {
			t.Fatalf("want invalid, got %v", err)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM jobs`); err != nil || n != 4 {
			t.Fatalf("a refused batch must add nothing: %d jobs (%v)", n, err)
		}
	})

	t.Run("BatchOfTenThousand", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		batch := make([]dlq.EnqueueParams, dlq.MaxBatch)
		for i := range batch {
			batch[i] = dlq.EnqueueParams{Task: "t.ok", IdempotencyKey: fmt.Sprintf("k%d", i%5000)}
		}
		ids, err := store.Queue.EnqueueMany(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != ids[5000] || ids[4999] != ids[9999] || ids[0] == ids[1] {
			t.Fatalf("duplicate keys inside one batch must share a job")
		}
	})
}

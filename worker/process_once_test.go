package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

func TestProcessOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DuplicateIsANoOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		calls := 0
		apply := func(tx *sqlx.Tx) error { calls++; return nil }
		first, err := worker.ProcessOnce(ctx, b.db.DB, "evt_1", apply)
		if err != nil || !first {
			t.Fatalf("first delivery: applied %v, err %v", first, err)
		}
		again, err := worker.ProcessOnce(ctx, b.db.DB, "evt_1", apply)
		if err != nil || again {
			t.Fatalf("duplicate: applied %v, err %v", again, err)
		}
		if calls != 1 {
			t.Fatalf("effect ran %d times", calls)
		}
	})

	t.Run("FailedEffectLeavesNoMarkSoARetryApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		boom := errors.New("constraint violated")
		if _, err := b.db.Exec(`CREATE TABLE effects (event_id text)`); err != nil {
			t.Fatal(err)
		}
		applied, err := worker.ProcessOnce(ctx, b.db.DB, "evt_2", func(tx *sqlx.Tx) error {
			if _, err := tx.Exec(`INSERT INTO effects VALUES ('evt_2')`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || applied {
			t.Fatalf("applied %v err %v, want the effect's error", applied, err)
		}
		if n := b.count(t, `SELECT count(*) FROM processed_events`) + b.count(t, `SELECT count(*) FROM effects`); n != 0 {
			t.Fatal("a failed effect left its mark or its rows")
		}
		applied, err = worker.ProcessOnce(ctx, b.db.DB, "evt_2", func(tx *sqlx.Tx) error {
			_, err := tx.Exec(`INSERT INTO effects VALUES ('evt_2')`)
			return err
		})
		if err != nil || !applied || b.count(t, `SELECT count(*) FROM effects`) != 1 {
			t.Fatalf("retry: applied %v err %v", applied, err)
		}
	})

	t.Run("ThousandEventsOverFourWorkersTakeEffectExactlyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if _, err := b.db.Exec(`CREATE TABLE effects (event_id text NOT NULL, job_id bigint NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		const events, dupes = 1000, 100
		var calls, applied atomic.Int64
		var perWorker [4]atomic.Int64
		for i := range perWorker {
			reg := worker.NewRegistry()
			reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
				calls.Add(1)
				perWorker[i].Add(1)
				var kw struct {
					EventID string `json:"event_id"`
					N       int    `json:"n"`
				}
				if err := json.Unmarshal(job.Kwargs, &kw); err != nil {
					return worker.Permanent(err)
				}
				ok, err := worker.ProcessOnce(ctx, b.db.DB, kw.EventID, func(tx *sqlx.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id, job_id) VALUES ($1, $2)`, kw.EventID, job.ID)
					return err
				})
				if err != nil {
					return err
				}
				if ok {
					applied.Add(1)
				}
				// Every tenth event "crashes" after its effect committed but
				// before the job was acknowledged: it is delivered again.
				if kw.N%10 == 0 && job.Attempt == 1 {
					return fmt.Errorf("connection reset after commit of %s", kw.EventID)
				}
				return nil
			}, worker.TaskOptions{})
			cfg := b.config(fmt.Sprintf("w-fleet-%d", i))
			cfg.Registry, cfg.Concurrency = reg, 8
			cfg.RetryPolicy = worker.RetryPolicy{Base: time.Millisecond, Cap: 5 * time.Millisecond}
			b.start(t, cfg)
		}
		// Each of the first 100 events is enqueued twice in a row under two
		// idempotency keys, as an upstream that redelivers would: the two
		// copies are claimed together and race each other.
		var params []dlq.EnqueueParams
		for n := range events {
			p := dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3,
				IdempotencyKey: fmt.Sprintf("delivery-%d-a", n),
				Kwargs:         kwargs(map[string]any{"event_id": fmt.Sprintf("evt_%04d", n), "n": n})}
			params = append(params, p)
			if n < dupes {
				p.IdempotencyKey = fmt.Sprintf("delivery-%d-b", n)
				params = append(params, p)
			}
		}
		if _, err := b.store.Queue.EnqueueMany(ctx, params); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 45*time.Second, "every job to finish", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE state IN ('succeeded', 'dead')`) == events+dupes
		})

		if n := b.count(t, `SELECT count(*) FROM jobs WHERE state = 'succeeded'`); n != events+dupes {
			t.Fatalf("%d of %d jobs succeeded", n, events+dupes)
		}
		if n, d := b.count(t, `SELECT count(*) FROM effects`), b.count(t, `SELECT count(DISTINCT event_id) FROM effects`); n != events || d != events {
			t.Fatalf("%d effects for %d distinct events, want %d of each", n, d, events)
		}
		if n := b.count(t, `SELECT count(*) FROM processed_events`); n != events {
			t.Fatalf("%d processed events, want %d", n, events)
		}
		if applied.Load() != events || calls.Load() <= events+dupes {
			t.Fatalf("applied %d in %d calls: duplicates and redeliveries must be no-ops", applied.Load(), calls.Load())
		}
		for i := range perWorker {
			if perWorker[i].Load() == 0 {
				t.Errorf("worker %d handled no job", i)
			}
		}
		t.Logf("%d handler calls over workers %d/%d/%d/%d", calls.Load(),
			perWorker[0].Load(), perWorker[1].Load(), perWorker[2].Load(), perWorker[3].Load())
	})
}

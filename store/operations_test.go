package store_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
)

// runToEnd runs an operation's batches until it stops being runnable.
func runToEnd(t *testing.T, store *storetest.Stores, opID int64, batch int) dlq.BatchResult {
	t.Helper()
	for range 10_000 {
		res, err := store.Operations.RunOperationBatch(context.Background(), opID, batch, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished || res.State != dlq.OpRunning {
			return res
		}
	}
	t.Fatal("operation did not finish")
	return dlq.BatchResult{}
}

func filterOf(t *testing.T, q string) *dlq.Filter {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	f, err := handlers.ParseFilter(v, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &f
}

func assertEachReplayedOnce(t *testing.T, db *storetest.DB, want int) {
	t.Helper()
	if n := count(t, db, `SELECT count(*) FROM (SELECT replay_of FROM jobs GROUP BY replay_of HAVING count(*) > 1) x`); n != 0 {
		t.Fatalf("%d letters were replayed more than once", n)
	}
	if n := count(t, db, `SELECT count(*) FROM jobs WHERE replay_of IS NOT NULL`); n != want {
		t.Fatalf("%d replay jobs, want %d", n, want)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters d JOIN jobs j ON j.id = d.replay_job_id AND j.replay_of = d.id`); n != want {
		t.Fatalf("%d letters point at their replay job, want %d", n, want)
	}
}

func TestBulkOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ByFilterIsBoundedByTheConfirmedMaxID", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 250)
		preview, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: filterOf(t, "task=t.ok")}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if preview.Matched != 250 || len(preview.Sample) != 5 || len(preview.ByTask) != 1 || preview.ByTask[0].N != 250 {
			t.Fatalf("preview wrong: matched %d sample %d bytask %+v", preview.Matched, len(preview.Sample), preview.ByTask)
		}
		insertLetters(t, db, 10) // arrive after the engineer confirmed
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok"), MaxID: preview.MaxID}})
		if err != nil {
			t.Fatal(err)
		}
		if op.Matched != 250 {
			t.Fatalf("matched %d, want 250", op.Matched)
		}
		runToEnd(t, store, op.ID, 100)
		assertEachReplayedOnce(t, db, 250)
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 10 {
			t.Fatalf("%d letters pending, want the 10 that arrived later", n)
		}
		op, _ = store.Operations.Operation(ctx, op.ID)
		// Every letter is handed to the queue; the replays settle later.
		if op.State != dlq.OpSettling || op.Done != 250 || op.Skipped != 0 {
			t.Fatalf("final operation wrong: %+v", op)
		}
		if n := count(t, db, `SELECT count(*) FROM audit_event_letters WHERE audit_event_id = $1`, *op.AuditEventID); n != 250 {
			t.Fatalf("audit links %d letters, want 250", n)
		}
		// The closing entry comes once the replays settle.
		workReplays(t, store, 0, never)
		follow(t, store, op.ID)
		if n := count(t, db, `SELECT count(*) FROM audit_events WHERE operation_id = $1`, op.ID); n != 2 {
			t.Fatalf("%d audit entries for the operation, want start and finish", n)
		}
	})

	t.Run("APendingFilterCountsOnlyItsPendingLetters", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 20)
		// The five newest are discarded: the highest ids are then not pending.
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
			Reason: "never to run", Selection: dlq.Selection{IDs: ids[15:]}})
		if err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 100)
		for _, q := range []string{"status=pending", "status=pending&task=t.ok", "status=pending&reason=exhausted"} {
			preview, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: filterOf(t, q)}, 3)
			if err != nil {
				t.Fatal(err)
			}
			if preview.Matched != 15 || preview.Other != 0 || preview.MaxID != ids[14] {
				t.Fatalf("%s: matched %d other %d max id %d, want 15, 0 and %d", q, preview.Matched, preview.Other, preview.MaxID, ids[14])
			}
		}
		// Every status: the discarded five are in the selection, to be skipped.
		preview, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: filterOf(t, "status=all")}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if preview.Matched != 15 || preview.Other != 5 || preview.MaxID != ids[19] {
			t.Fatalf("all: matched %d other %d max id %d, want 15, 5 and %d", preview.Matched, preview.Other, preview.MaxID, ids[19])
		}
		op, err = store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "status=pending&task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if op.Matched != 15 || op.MaxID != ids[14] {
			t.Fatalf("operation matched %d up to %d, want 15 up to %d", op.Matched, op.MaxID, ids[14])
		}
	})

	t.Run("OverlappingBulkReplaysReplayEachLetterOnce", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 400)
		var ops []int64
		for range 2 {
			op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
				Selection: dlq.Selection{Filter: filterOf(t, "status=pending")}})
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op.ID)
		}
		var wg sync.WaitGroup
		for _, id := range ops {
			wg.Go(func() { runToEnd(t, store, id, 37) })
		}
		wg.Wait()
		assertEachReplayedOnce(t, db, 400)
		var done int64
		for _, id := range ops {
			op, _ := store.Operations.Operation(ctx, id)
			done += op.Done
			if op.Done+op.Skipped != 400 {
				t.Errorf("operation %d: done %d + skipped %d != 400", id, op.Done, op.Skipped)
			}
		}
		if done != 400 {
			t.Fatalf("the two operations replayed %d letters between them, want 400", done)
		}
	})

	// The batch's UPDATE is its claim: a letter another transaction handles
	// while the batch waits for its row lock is re-checked when the lock is
	// granted, and gets neither a job nor an audit link.
	for _, kind := range []dlq.OperationKind{dlq.OpReplay, dlq.OpDiscard} {
		t.Run("LetterHandledWhileTheBatchWaitsIsSkipped/"+string(kind), func(t *testing.T) {
			t.Parallel()
			store, db := setup(t)
			ids := insertLetters(t, db, 20)
			op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: kind, Actor: alice, Now: time.Now(),
				Reason: "cleanup", Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
			if err != nil {
				t.Fatal(err)
			}
			other, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback()
			storetest.Settle(t, other, storetest.Outcome{Status: "discarded", By: "bob", Reason: "by hand"}, "id = $1", ids[7])
			done := make(chan dlq.BatchResult, 1)
			go func() {
				res, err := store.Operations.RunOperationBatch(ctx, op.ID, 100, time.Now())
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			// Wait until the batch is blocked on the letter's row lock.
			storetest.WaitFor(t, 10*time.Second, "the batch to wait for the letter", func() bool {
				return count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
					AND wait_event_type = 'Lock' AND query LIKE '%batch AS%'`) > 0
			})
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.Acted != 19 || res.Skipped != 1 {
				t.Fatalf("batch acted on %d and skipped %d, want 19 and 1", res.Acted, res.Skipped)
			}
			if n := count(t, db, `SELECT count(*) FROM jobs WHERE replay_of = $1`, ids[7]); n != 0 {
				t.Fatalf("the letter discarded by hand got %d replay jobs", n)
			}
			if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND discarded_by = 'bob'`, ids[7]); n != 1 {
				t.Fatal("the bulk operation overwrote the discard made by hand")
			}
			if n := count(t, db, `SELECT count(*) FROM audit_event_letters WHERE audit_event_id = $1 AND dead_letter_id = $2`,
				*op.AuditEventID, ids[7]); n != 0 {
				t.Fatal("the skipped letter is linked to the operation's audit entry")
			}
			if n := count(t, db, `SELECT count(*) FROM audit_event_letters WHERE audit_event_id = $1`, *op.AuditEventID); n != 19 {
				t.Fatalf("audit links %d letters, want 19", n)
			}
			if kind == dlq.OpReplay {
				assertEachReplayedOnce(t, db, 19)
			}
		})
	}

	t.Run("KilledBetweenBatchesResumesWithoutReplayingTwice", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 300)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.RunOperationBatch(ctx, op.ID, 100, time.Now()); err != nil {
			t.Fatal(err)
		}
		// A batch that dies mid-way (context cancelled) commits nothing.
		dead, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := store.Operations.RunOperationBatch(dead, op.ID, 100, time.Now()); err == nil {
			t.Fatal("a batch on a cancelled context succeeded")
		}
		// A new process picks the operation up again.
		fresh := storetest.NewStores(db.DB)
		runToEnd(t, fresh, op.ID, 100)
		assertEachReplayedOnce(t, db, 300)
	})

	t.Run("PacedReplaySpreadsRunAt", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 100)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			RatePerSecond: 10, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 30)
		var spread float64
		if err := db.Get(&spread, `SELECT extract(epoch FROM max(run_at) - min(run_at)) FROM jobs`); err != nil {
			t.Fatal(err)
		}
		if spread < 9 || spread > 10.5 {
			t.Fatalf("100 jobs at 10/s should spread over ~9.9 s, spread %.2f s", spread)
		}
	})

	t.Run("CanaryWaitsForRelease", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 50)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Canary: 5, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		res := runToEnd(t, store, op.ID, 100)
		if res.State != dlq.OpCanary {
			t.Fatalf("state %s after canary, want canary", res.State)
		}
		assertEachReplayedOnce(t, db, 5)
		jobs, err := store.Operations.OperationJobs(ctx, op.ID, 10)
		if err != nil || len(jobs) != 5 {
			t.Fatalf("canary jobs: %d %v", len(jobs), err)
		}
		if _, err := store.Operations.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 100)
		assertEachReplayedOnce(t, db, 50)
	})

	t.Run("PacingResumesFromNowAfterACanaryWait", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 25)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			RatePerSecond: 1, Canary: 5, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if res := runToEnd(t, store, op.ID, 100); res.State != dlq.OpCanary {
			t.Fatalf("state %s, want canary", res.State)
		}
		// The engineer watches the canary for half an hour (as if: the
		// operation's pace origin moves back by that much).
		if _, err := db.Exec(`UPDATE operations SET pace_origin = pace_origin - interval '30 minutes' WHERE id = $1`, op.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 7) // several batches, each continuing the last one's pace
		var first, spread, minGap float64
		if err := db.QueryRow(`SELECT extract(epoch FROM min(run_at) - now()), extract(epoch FROM max(run_at) - min(run_at)),
				extract(epoch FROM min(gap))
			FROM (SELECT j.run_at, j.run_at - lag(j.run_at) OVER (ORDER BY j.run_at) AS gap
				FROM jobs j JOIN dead_letters d ON d.replay_job_id = j.id
				WHERE d.id > (SELECT min(id) + 4 FROM dead_letters)) x`).Scan(&first, &spread, &minGap); err != nil {
			t.Fatal(err)
		}
		// The 20 letters after the canary go at 1/s from the release, one
		// second apart: not a burst of those whose slots passed while the
		// canary waited.
		if spread < 18.5 || spread > 20.5 || first < -5 || first > 5 || minGap < 0.9 {
			t.Fatalf("after release the 20 jobs start %.1f s from now, spread over %.1f s, at least %.2f s apart; want ~0, ~19, ~1",
				first, spread, minGap)
		}
	})

	t.Run("CanaryCountsLettersReplayedNotSeen", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 20)
		// Two of the first five were replayed by someone else already.
		storetest.Settle(t, db, storetest.Outcome{Status: "replayed", By: "bob", ReplayJobID: 999999},
			"id = ANY($1)", []int64{ids[0], ids[2]})
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Canary: 5, Selection: dlq.Selection{IDs: ids}})
		if err != nil {
			t.Fatal(err)
		}
		if res := runToEnd(t, store, op.ID, 100); res.State != dlq.OpCanary {
			t.Fatalf("state %s, want canary", res.State)
		}
		var replayed int
		if err := db.Get(&replayed, `SELECT count(*) FROM dead_letters WHERE replayed_by = 'alice'`); err != nil || replayed != 5 {
			t.Fatalf("the canary replayed %d letters (%v), want 5", replayed, err)
		}
		if _, err := store.Operations.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Released once, it runs to the end: it never stops for a canary again.
		if res := runToEnd(t, store, op.ID, 4); res.Finished || res.State != dlq.OpSettling {
			t.Fatalf("after release: %+v, want settling", res)
		}
		if err := db.Get(&replayed, `SELECT count(*) FROM dead_letters WHERE replayed_by = 'alice'`); err != nil || replayed != 18 {
			t.Fatalf("replayed %d (%v), want 18", replayed, err)
		}
	})

	t.Run("FailOperationStopsAndAudits", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 10)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Operations.FailOperation(ctx, op.ID, "pq: interval out of range", time.Now()); err != nil {
			t.Fatal(err)
		}
		got, err := store.Operations.Operation(ctx, op.ID)
		if err != nil || got.State != dlq.OpFailed || got.Error == nil || *got.Error != "pq: interval out of range" || got.FinishedAt == nil {
			t.Fatalf("after FailOperation: %+v %v", got, err)
		}
		var audited int
		if err := db.Get(&audited, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND details->>'state' = 'failed'`, op.ID); err != nil || audited != 1 {
			t.Fatalf("%d failure entries (%v), want 1", audited, err)
		}
		// Failing a finished operation changes nothing.
		if err := store.Operations.FailOperation(ctx, op.ID, "again", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := db.Get(&audited, `SELECT count(*) FROM audit_events WHERE operation_id = $1`, op.ID); err != nil || audited != 2 {
			t.Fatalf("%d entries after a second FailOperation (%v), want start + failure", audited, err)
		}
	})

	t.Run("CancelStopsTheRest", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 100)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Reason: "bad batch",
			Now: time.Now(), Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.RunOperationBatch(ctx, op.ID, 40, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.CancelOperation(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		res, err := store.Operations.RunOperationBatch(ctx, op.ID, 40, time.Now())
		if err != nil || !res.Finished || res.Acted != 0 {
			t.Fatalf("a cancelled operation kept working: %+v %v", res, err)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`); n != 40 {
			t.Fatalf("%d discarded, want the first batch of 40", n)
		}
		if _, err := store.Operations.CancelOperation(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); !errors.Is(err, dlq.ErrConflict) {
			t.Fatalf("cancel twice: want conflict, got %v", err)
		}
	})

	t.Run("DiscardNeedsAReason", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 3)
		_, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{IDs: ids}})
		if !errors.Is(err, dlq.ErrInvalid) {
			t.Fatalf("want invalid, got %v", err)
		}
		if n := count(t, db, `SELECT count(*) FROM operations`); n != 0 {
			t.Fatal("a refused operation was recorded")
		}
	})

	t.Run("SelectedIDsSkipWhatIsNotPending", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 3)
		if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{IDs: append(ids, 99999)}, Key: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		// The same request again (a key is bound to its selection).
		again, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{IDs: []int64{99999, ids[2], ids[1], ids[0]}}, Key: "k1"})
		if err != nil || again.ID != op.ID {
			t.Fatalf("same key must return the same operation: %d vs %d (%v)", again.ID, op.ID, err)
		}
		runToEnd(t, store, op.ID, 10)
		op, _ = store.Operations.Operation(ctx, op.ID)
		if op.Done != 2 || op.Skipped != 1 || op.Matched != 3 {
			t.Fatalf("done %d skipped %d matched %d; want 2, 1, 3", op.Done, op.Skipped, op.Matched)
		}
		assertEachReplayedOnce(t, db, 3)
	})
}

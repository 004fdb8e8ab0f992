package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/storetest"
)

// runLanes runs every lane of an operation, each batch after batch, until
// each lane stops, as the runner does; procs copies of the lanes run side
// by side, as in that many console processes.
func runLanes(t *testing.T, stores []*storetest.Stores, opID int64, batch int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, store := range stores {
		for lane := range dlq.OperationLanes {
			wg.Go(func() {
				for range 10_000 {
					res, err := store.Operations.RunOperationLane(context.Background(), opID, lane, dlq.OperationLanes, batch, time.Now())
					if err != nil {
						t.Error(err)
						return
					}
					if res.Finished || res.State != dlq.OpRunning || res.Acted+res.Skipped == 0 {
						return
					}
				}
				t.Error("lane did not finish")
			})
		}
	}
	wg.Wait()
}

func TestOperationLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("TwoProcessesOfTwoLanesReplayEachLetterOnce", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 600)
		// Some letters are already handled: they are skipped, not counted twice.
		storetest.Settle(t, db, storetest.Outcome{Status: "discarded", By: "bob", Reason: "x"}, "id = ANY($1)", ids[100:110])
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok&status=all")}})
		if err != nil {
			t.Fatal(err)
		}
		runLanes(t, []*storetest.Stores{store, storetest.NewStores(db.DB)}, op.ID, 23)
		assertEachReplayedOnce(t, db, 590)
		op, _ = store.Operations.Operation(ctx, op.ID)
		if op.State != dlq.OpSettling || op.Done != 590 || op.Matched != 600 || op.Skipped != 10 {
			t.Fatalf("final operation: state %s done %d matched %d skipped %d; want settling, 590, 600, 10",
				op.State, op.Done, op.Matched, op.Skipped)
		}
		if n := count(t, db, `SELECT count(*) FROM audit_event_letters WHERE audit_event_id = $1`, *op.AuditEventID); n != 590 {
			t.Fatalf("audit links %d letters, want 590", n)
		}
		workReplays(t, store, 0, never)
		follow(t, store, op.ID)
		if n := count(t, db, `SELECT count(*) FROM audit_events WHERE operation_id = $1`, op.ID); n != 2 {
			t.Fatalf("%d audit entries for the operation, want start and one finish", n)
		}
		if n := count(t, db, `SELECT n FROM dead_letter_counts WHERE status = 'replayed'`); n != 590 {
			t.Fatalf("summary counts %d replayed, want 590", n)
		}
	})

	t.Run("CancelStopsEveryLane", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		// Half the letters in the first block of ids (lane 0), half in the second (lane 1).
		if _, err := db.Exec(`SELECT setval(pg_get_serial_sequence('dead_letter_records', 'id'), $1)`, operations.LaneBlock-51); err != nil {
			t.Fatal(err)
		}
		insertLetters(t, db, 100)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Reason: "bad batch",
			Now: time.Now(), Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.RunOperationLane(ctx, op.ID, 1, dlq.OperationLanes, 10, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Operations.CancelOperation(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		runLanes(t, []*storetest.Stores{store}, op.ID, 10)
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`); n != 10 {
			t.Fatalf("%d discarded, want the one batch of 10 before the cancel", n)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded' AND id / $1 % 2 <> 1`, operations.LaneBlock); n != 0 {
			t.Fatalf("lane 1 took %d letters of lane 0", n)
		}
	})

	// A lane does not hold the operation's row while it works: a cancel
	// that commits while a batch runs rolls that batch back.
	t.Run("CancelWhileALaneWorksUndoesItsBatch", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 40)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Reason: "bad batch",
			Now: time.Now(), Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		cancelling, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cancelling.Rollback()
		if _, err := cancelling.ExecContext(ctx, `UPDATE operations SET state = 'cancelled', finished_at = now() WHERE id = $1`, op.ID); err != nil {
			t.Fatal(err)
		}
		done := make(chan dlq.BatchResult, 1)
		go func() {
			res, err := store.Operations.RunOperationLane(ctx, op.ID, 0, dlq.OperationLanes, 100, time.Now())
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		storetest.WaitFor(t, 10*time.Second, "the lane to reach the operation's row", func() bool {
			return count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%lane_cursors = jsonb_set%'`) > 0
		})
		if err := cancelling.Commit(); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.State != dlq.OpCancelled || res.Acted != 0 {
			t.Fatalf("lane after the cancel: %+v, want cancelled with nothing acted on", res)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status <> 'pending'`); n != 0 {
			t.Fatalf("%d letters changed by a batch that a cancel overtook", n)
		}
		if n := count(t, db, `SELECT count(*) FROM audit_event_letters`); n != 0 {
			t.Fatalf("%d audit links from a batch that a cancel overtook", n)
		}
	})

	t.Run("PacedAndCanaryRunInOneStream", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 30)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Canary: 5, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		runLanes(t, []*storetest.Stores{store}, op.ID, 100)
		if op, _ = store.Operations.Operation(ctx, op.ID); op.State != dlq.OpCanary || op.Done != 5 {
			t.Fatalf("after the canary: %s, %d done; want canary, 5", op.State, op.Done)
		}
		if _, err := store.Operations.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		runLanes(t, []*storetest.Stores{store}, op.ID, 4)
		assertEachReplayedOnce(t, db, 30)
		if op, _ = store.Operations.Operation(ctx, op.ID); op.State != dlq.OpSettling || op.Done != 30 {
			t.Fatalf("after release: %s, %d done; want settling, 30", op.State, op.Done)
		}
	})
}

package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// workReplays does what a worker does with the due jobs, through the
// store's own claim and acknowledgement: up to n of them (0: all), in id
// order; a job for which die says so is dead-lettered (it died again),
// the others succeed.
func workReplays(t *testing.T, store *storetest.Stores, n int, die func(dlq.Job) bool) (succeeded, died int) {
	t.Helper()
	ctx := context.Background()
	limit := n
	if limit == 0 {
		limit = 100_000
	}
	jobs, err := store.Queue.Claim(ctx, "w1", []string{"default"}, limit, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ok []dlq.Lease
	var dead []dlq.DeadOutcome
	for _, j := range jobs {
		if die(j) {
			dead = append(dead, dlq.DeadOutcome{Lease: dlq.LeaseOf("w1", j), Task: j.Task, Reason: dlq.ReasonExhausted,
				Attempt: dlq.Attempt{Attempt: j.Attempt, At: time.Now(), Class: "E", Message: "boom again", Outcome: dlq.OutcomeDead}})
		} else {
			ok = append(ok, dlq.LeaseOf("w1", j))
		}
	}
	if len(dead) > 0 {
		if _, err := store.Queue.DeadLetterMany(ctx, "w1", dead); err != nil {
			t.Fatal(err)
		}
	}
	if len(ok) > 0 {
		if _, err := store.Queue.CompleteMany(ctx, "w1", ok); err != nil {
			t.Fatal(err)
		}
	}
	return len(ok), len(dead)
}

func never(dlq.Job) bool { return false }

// runBatches runs batches until one acts on nothing or the operation
// leaves running.
func runBatches(t *testing.T, store *storetest.Stores, opID int64, batch int) dlq.BatchResult {
	t.Helper()
	for range 1000 {
		res, err := store.Operations.RunOperationBatch(context.Background(), opID, batch, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.State != dlq.OpRunning || res.Acted+res.Skipped == 0 {
			return res
		}
	}
	t.Fatal("operation never stopped")
	return dlq.BatchResult{}
}

func follow(t *testing.T, store *storetest.Stores, opID int64) dlq.Operation {
	t.Helper()
	if _, err := store.Operations.FollowOperations(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	op, err := store.Operations.Operation(context.Background(), opID)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func replays(t *testing.T, store *storetest.Stores, opID int64) dlq.ReplayCounts {
	t.Helper()
	c, err := store.Operations.OperationReplays(context.Background(), opID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lastAudit(t *testing.T, store *storetest.Stores, opID int64, action string) (dlq.AuditEntry, map[string]int64) {
	t.Helper()
	entries, err := store.Audit.ListAudit(context.Background(), dlq.AuditFilter{Action: action, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries.Entries {
		if e.OperationID != nil && *e.OperationID == opID {
			var counts map[string]int64
			_ = json.Unmarshal(e.Counts, &counts)
			return e, counts
		}
	}
	t.Fatalf("no %s audit entry for operation %d", action, opID)
	return dlq.AuditEntry{}, nil
}

func TestOperationFollowThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DoneOnlyOnceEveryReplaySettled", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 10)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{IDs: ids}})
		if err != nil {
			t.Fatal(err)
		}
		if res := runBatches(t, store, op.ID, 100); res.State != dlq.OpSettling || res.Finished {
			t.Fatalf("after enqueueing: %+v, want settling, not finished", res)
		}
		if c := replays(t, store, op.ID); c != (dlq.ReplayCounts{Waiting: 10}) {
			t.Fatalf("replays %+v, want 10 waiting", c)
		}
		// Six run: four succeed, two die again; four still wait.
		if s, d := workReplays(t, store, 6, func(j dlq.Job) bool { return j.ID%3 == 0 }); s+d != 6 {
			t.Fatalf("worked %d", s+d)
		}
		c := replays(t, store, op.ID)
		if c.Waiting != 4 || c.Settled() != 6 || c.DiedAgain == 0 {
			t.Fatalf("replays %+v, want 4 waiting and 6 settled, some died", c)
		}
		if op = follow(t, store, op.ID); op.State != dlq.OpSettling {
			t.Fatalf("state %s with 4 replays waiting, want settling", op.State)
		}
		// What pages read: the counts as the runner last kept them.
		if op.Replays == nil || *op.Replays != c {
			t.Fatalf("kept counts %+v, want %+v", op.Replays, c)
		}
		if n := count(t, db, `SELECT count(*) FROM notification_events WHERE subject = $1::text`, op.ID); n != 0 {
			t.Fatalf("%d notifications before the operation ended", n)
		}
		workReplays(t, store, 0, never)
		if op = follow(t, store, op.ID); op.State != dlq.OpDone || op.FinishedAt == nil {
			t.Fatalf("state %s once every replay settled, want done", op.State)
		}
		final := replays(t, store, op.ID)
		_, counts := lastAudit(t, store, op.ID, dlq.ActionBulkFinish)
		if counts["succeeded"] != final.Succeeded || counts["died_again"] != final.DiedAgain || counts["replayed"] != 10 ||
			final.Settled() != 10 {
			t.Fatalf("closing entry counts %v, replays %+v", counts, final)
		}
		if n := count(t, db, `SELECT count(*) FROM notification_events WHERE kind = 'operation_done' AND subject = $1::text`, op.ID); n != 1 {
			t.Fatalf("%d operation_done notifications, want 1 once done", n)
		}
		// What became of each letter: a replay that died again names its new letter.
		out, err := store.Operations.ReplayOutcomes(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		died := 0
		for _, o := range out {
			if o.JobState == dlq.StateDead {
				died++
				if o.DiedAgainAs == nil || *o.DiedAgainAs <= ids[len(ids)-1] {
					t.Fatalf("died replay %+v names no new letter", o)
				}
			}
		}
		if len(out) != 10 || int64(died) != final.DiedAgain {
			t.Fatalf("%d outcomes, %d died; want 10, %d", len(out), died, final.DiedAgain)
		}
	})

	t.Run("StopFollowing", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 5)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{IDs: ids}})
		if err != nil {
			t.Fatal(err)
		}
		// Not while letters are still handed to the queue.
		if _, err := store.Operations.StopFollowing(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err == nil {
			t.Fatal("stopped following a running operation")
		}
		runBatches(t, store, op.ID, 100)
		bob := dlq.Actor{Name: "bob", RequestID: "req-9"}
		op, err = store.Operations.StopFollowing(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: bob, Now: time.Now()})
		if err != nil || op.State != dlq.OpDone || op.StoppedFollowingBy == nil || *op.StoppedFollowingBy != "bob" {
			t.Fatalf("stop following: %+v %v", op, err)
		}
		e, counts := lastAudit(t, store, op.ID, dlq.ActionBulkStopFollowing)
		if e.Actor != "bob" || e.RequestID != "req-9" || counts["waiting"] != 5 {
			t.Fatalf("stop-following entry by %s (%s), counts %v; want bob, 5 waiting", e.Actor, e.RequestID, counts)
		}
		if n := count(t, db, `SELECT count(*) FROM notification_events WHERE kind = 'operation_done' AND subject = $1::text`, op.ID); n != 1 {
			t.Fatalf("%d operation_done notifications, want 1", n)
		}
		if _, err := store.Operations.StopFollowing(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: bob, Now: time.Now()}); err == nil {
			t.Fatal("stopped following twice")
		}
	})

	t.Run("GuardPausesAndResumes", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, dlq.GuardWindow+200)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			DiedAgainPercent: 20, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		// Until the guard judges, at most GuardWindow replays are in flight.
		if res := runBatches(t, store, op.ID, 150); res.State != dlq.OpRunning {
			t.Fatalf("state %s, want running (held at the window)", res.State)
		}
		if op, _ = store.Operations.Operation(ctx, op.ID); op.Done != dlq.GuardWindow {
			t.Fatalf("%d enqueued before the guard judged, want %d", op.Done, dlq.GuardWindow)
		}
		// The first 100 to settle: 30 die again (more than 20%).
		workReplays(t, store, 30, func(dlq.Job) bool { return true })
		workReplays(t, store, 70, never)
		if op = follow(t, store, op.ID); op.State != dlq.OpAutoPaused || op.GuardVerdict == nil || *op.GuardVerdict != "tripped" {
			t.Fatalf("state %s, want auto_paused", op.State)
		}
		e, counts := lastAudit(t, store, op.ID, dlq.ActionBulkAutoPause)
		var details map[string]any
		_ = json.Unmarshal(e.Details, &details)
		if counts["died_again"] != 30 || details["sample_died_again"] != 30.0 || details["died_again_percent"] != 20.0 {
			t.Fatalf("auto-pause entry counts %v details %v", counts, details)
		}
		if n := count(t, db, `SELECT count(*) FROM notification_events WHERE kind = 'operation_auto_paused' AND subject = $1::text`, op.ID); n != 1 {
			t.Fatalf("%d auto-paused notifications, want 1", n)
		}
		// Paused: no batch releases more.
		if res, err := store.Operations.RunOperationBatch(ctx, op.ID, 100, time.Now()); err != nil || res.Acted != 0 {
			t.Fatalf("a batch of a paused operation: %+v %v", res, err)
		}
		if _, err := store.Operations.ResumeOperation(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		lastAudit(t, store, op.ID, dlq.ActionBulkResume)
		// Resumed, the guard has judged: the rest goes, and the operation is followed to its end.
		if res := runBatches(t, store, op.ID, 150); res.State != dlq.OpSettling {
			t.Fatalf("after resume: %+v, want settling", res)
		}
		workReplays(t, store, 0, never)
		if op = follow(t, store, op.ID); op.State != dlq.OpDone || op.Done != dlq.GuardWindow+200 {
			t.Fatalf("after resume: %s with %d, want done with all", op.State, op.Done)
		}
	})

	t.Run("GuardPasses", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, dlq.GuardWindow+50)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			DiedAgainPercent: 20, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		runBatches(t, store, op.ID, 500)
		workReplays(t, store, 20, func(dlq.Job) bool { return true }) // exactly 20%: not more
		workReplays(t, store, 80, never)
		if op = follow(t, store, op.ID); op.State != dlq.OpRunning || op.GuardVerdict == nil || *op.GuardVerdict != "passed" {
			t.Fatalf("state %s verdict %v, want running, passed", op.State, op.GuardVerdict)
		}
		if res := runBatches(t, store, op.ID, 500); res.State != dlq.OpSettling {
			t.Fatalf("after the guard passed: %+v, want every letter enqueued", res)
		}
	})

	t.Run("DeadCanaryWaitsForADecision", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 20)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Canary: 3, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		if res := runBatches(t, store, op.ID, 100); res.State != dlq.OpCanary {
			t.Fatalf("state %s, want canary", res.State)
		}
		if op = follow(t, store, op.ID); op.State != dlq.OpCanary || op.CanaryVerdict != nil {
			t.Fatalf("no replay ran yet: %s %v", op.State, op.CanaryVerdict)
		}
		workReplays(t, store, 1, func(dlq.Job) bool { return true })
		if op = follow(t, store, op.ID); op.State != dlq.OpCanaryFailed || op.CanaryVerdict == nil || *op.CanaryVerdict != "died" {
			t.Fatalf("state %s, want canary_failed", op.State)
		}
		_, counts := lastAudit(t, store, op.ID, dlq.ActionCanaryVerdict)
		if counts["died_again"] != 1 || counts["waiting"] != 2 {
			t.Fatalf("verdict entry counts %v", counts)
		}
		// Release anyway.
		if op, err = store.Operations.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: alice, Now: time.Now()}); err != nil || op.State != dlq.OpRunning {
			t.Fatalf("release anyway: %+v %v", op, err)
		}
		if res := runBatches(t, store, op.ID, 100); res.State != dlq.OpSettling {
			t.Fatalf("after release: %s", res.State)
		}
	})

	t.Run("GoodCanaryIsAudited", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 20)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Canary: 3, Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}})
		if err != nil {
			t.Fatal(err)
		}
		runBatches(t, store, op.ID, 100)
		workReplays(t, store, 0, never)
		if op = follow(t, store, op.ID); op.State != dlq.OpCanary || op.CanaryVerdict == nil || *op.CanaryVerdict != "succeeded" {
			t.Fatalf("state %s verdict %v, want canary, succeeded", op.State, op.CanaryVerdict)
		}
		if _, counts := lastAudit(t, store, op.ID, dlq.ActionCanaryVerdict); counts["succeeded"] != 3 {
			t.Fatalf("verdict counts %v", counts)
		}
		follow(t, store, op.ID)
		if n := count(t, db, `SELECT count(*) FROM audit_events WHERE action = 'canary_verdict'`); n != 1 {
			t.Fatalf("%d verdict entries, want 1", n)
		}
	})

	t.Run("ThresholdIsAPercentage", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 2)
		for _, p := range []float64{-1, 100, 150} {
			if _, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
				DiedAgainPercent: p, Selection: dlq.Selection{IDs: ids}}); err == nil {
				t.Errorf("threshold %g accepted", p)
			}
		}
	})
}

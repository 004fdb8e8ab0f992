package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func pauseParams(kind, name string) dlq.PauseParams {
	return dlq.PauseParams{Kind: kind, Name: name, Reason: "provider down", Actor: dlq.Actor{Name: "alice"}, Now: time.Now()}
}

func TestPauseWork(t *testing.T) {
	t.Parallel()

	t.Run("RefusesBadInputWithWords", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		past, far := time.Now().Add(-time.Minute), time.Now().Add(40*24*time.Hour)
		for name, tc := range map[string]struct {
			p     dlq.PauseParams
			field string
		}{
			"NoReason":    {dlq.PauseParams{Kind: "task", Name: "payments.charge", Reason: "  "}, "reason"},
			"BadKind":     {dlq.PauseParams{Kind: "worker", Name: "x", Reason: "r"}, "kind"},
			"BadTask":     {dlq.PauseParams{Kind: "task", Name: "no spaces", Reason: "r"}, "task"},
			"BadQueue":    {dlq.PauseParams{Kind: "queue", Name: "", Reason: "r"}, "queue"},
			"LongTask":    {dlq.PauseParams{Kind: "task", Name: strings.Repeat("a", dlq.MaxTaskNameLen+1), Reason: "r"}, "task"},
			"LongQueue":   {dlq.PauseParams{Kind: "queue", Name: strings.Repeat("q", dlq.MaxQueueNameLen+1), Reason: "r"}, "queue"},
			"UntilPassed": {dlq.PauseParams{Kind: "task", Name: "t", Reason: "r", Until: &past}, "until"},
			"UntilTooFar": {dlq.PauseParams{Kind: "task", Name: "t", Reason: "r", Until: &far}, "until"},
		} {
			tc.p.Now = time.Now()
			_, err := store.Queue.PauseWork(context.Background(), tc.p)
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tc.field] == "" {
				t.Errorf("%s: got %v, want a validation error on %q", name, err, tc.field)
			}
		}
		// A microsecond ahead passed the check and then broke the table's
		// CHECK (the database's clock is a little later), answering in the
		// database's own words instead of saying what to change.
		now := time.Now()
		blink := now.Add(time.Microsecond)
		_, err := store.Queue.PauseWork(context.Background(), dlq.PauseParams{Kind: "task", Name: "t", Reason: "r", Until: &blink, Now: now})
		if ve := (*dlq.ValidationError)(nil); !errors.As(err, &ve) || !strings.Contains(ve.Fields["until"], "at least a second") {
			t.Errorf("a pause until a microsecond from now: %v, want a validation error on until", err)
		}
		if open, _, err := store.Queue.OpenPauses(context.Background()); err != nil || len(open) != 0 {
			t.Fatalf("refused pauses left %d open (%v)", len(open), err)
		}
	})

	t.Run("SecondPauseIsAConflictNamingTheFirst", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		first, err := store.Queue.PauseWork(context.Background(), pauseParams("task", "payments.charge"))
		if err != nil {
			t.Fatal(err)
		}
		second := pauseParams("task", "payments.charge")
		second.Actor.Name, second.Reason = "bob", "something else"
		_, err = store.Queue.PauseWork(context.Background(), second)
		var pc *dlq.PauseConflictError
		if !errors.As(err, &pc) || !errors.Is(err, dlq.ErrConflict) || pc.Pause.ID != first.Pause.ID || pc.Pause.PausedBy != "alice" {
			t.Fatalf("second pause: %v, want a conflict naming pause %d by alice", err, first.Pause.ID)
		}
		// The same name as a queue is another thing to pause.
		if _, err := store.Queue.PauseWork(context.Background(), pauseParams("queue", "payments.charge")); err != nil {
			t.Fatalf("pausing a queue of the same name: %v", err)
		}
	})

	t.Run("SameKeyTwicePausesOnce", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		p := pauseParams("queue", "payments")
		p.Key = "k-1"
		a, err := store.Queue.PauseWork(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := store.Queue.PauseWork(context.Background(), p)
		if err != nil || !b.Repeated || b.Pause.ID != a.Pause.ID {
			t.Fatalf("retry with the same key: %+v, %v; want the first answer repeated", b, err)
		}
	})

	// Many operators pausing and resuming the same task at once: each
	// pause either opens the one pause or is told it exists; each resume
	// ends it or is told it ended; the chain holds one entry per change.
	t.Run("ConcurrentPausesAndResumesAreSafe", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		ctx := context.Background()
		var mu sync.Mutex
		opened, resumed := map[int64]bool{}, map[int64]int{}
		for round := range 5 {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					res, err := store.Queue.PauseWork(ctx, pauseParams("task", "payments.charge"))
					switch {
					case err == nil:
						mu.Lock()
						opened[res.Pause.ID] = true
						mu.Unlock()
					case !errors.Is(err, dlq.ErrConflict):
						t.Errorf("round %d: pause: %v", round, err)
					}
				})
			}
			wg.Wait()
			open, _, err := store.Queue.OpenPauses(ctx)
			if err != nil || len(open) != 1 {
				t.Fatalf("round %d: %d open pauses (%v), want exactly 1", round, len(open), err)
			}
			for range 8 {
				wg.Go(func() {
					_, err := store.Queue.ResumeWork(ctx, dlq.ResumeParams{ID: open[0].ID, Actor: dlq.Actor{Name: "bob"}, Now: time.Now()})
					switch {
					case err == nil:
						mu.Lock()
						resumed[open[0].ID]++
						mu.Unlock()
					case !errors.Is(err, dlq.ErrConflict):
						t.Errorf("round %d: resume: %v", round, err)
					}
				})
			}
			wg.Wait()
		}
		if len(opened) != 5 {
			t.Fatalf("%d pauses opened over 5 rounds, want 5", len(opened))
		}
		for id, n := range resumed {
			if n != 1 {
				t.Fatalf("pause %d resumed %d times, want once", id, n)
			}
		}
		var pauses, resumes int
		_ = db.Get(&pauses, `SELECT count(*) FROM audit_events WHERE action = 'pause'`)
		_ = db.Get(&resumes, `SELECT count(*) FROM audit_events WHERE action = 'resume'`)
		if pauses != 5 || resumes != 5 {
			t.Fatalf("audit: %d pauses, %d resumes, want 5 and 5", pauses, resumes)
		}
		if _, problem, err := store.Audit.VerifyAudit(ctx); err != nil || problem != nil {
			t.Fatalf("audit chain: %+v, %v", problem, err)
		}
	})

	t.Run("ResumeOfAnEndedPauseSaysHowItEnded", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		ctx := context.Background()
		res, err := store.Queue.PauseWork(ctx, pauseParams("task", "payments.charge"))
		if err != nil {
			t.Fatal(err)
		}
		// Its time ran out an hour ago, and nobody noticed.
		db.MustExec(`UPDATE pauses SET paused_at = now() - interval '2 hours', until = now() - interval '1 hour' WHERE id = $1`, res.Pause.ID)
		_, err = store.Queue.ResumeWork(ctx, dlq.ResumeParams{ID: res.Pause.ID, Actor: dlq.Actor{Name: "bob"}, Now: time.Now()})
		var pc *dlq.PauseConflictError
		if !errors.As(err, &pc) || !pc.Ended || !pc.Pause.Expired {
			t.Fatalf("resume of an expired pause: %v, want a conflict saying it expired", err)
		}
		// A new pause is not blocked by the lapsed one.
		if _, err := store.Queue.PauseWork(ctx, pauseParams("task", "payments.charge")); err != nil {
			t.Fatalf("pause after the old one lapsed: %v", err)
		}
		expired, err := store.Queue.ExpirePauses(ctx, time.Now())
		if err != nil || len(expired) != 0 {
			t.Fatalf("expiry recorded again: %v, %v", expired, err)
		}
		var entries int
		_ = db.Get(&entries, `SELECT count(*) FROM audit_events WHERE action = 'pause_expired'`)
		if entries != 1 {
			t.Fatalf("%d expiry entries, want 1", entries)
		}
		if _, err := store.Queue.ResumeWork(ctx, dlq.ResumeParams{ID: 999, Actor: dlq.Actor{Name: "bob"}, Now: time.Now()}); !errors.Is(err, dlq.ErrNotFound) {
			t.Fatalf("resume of a missing pause: %v, want not found", err)
		}
	})

	t.Run("ClaimSkipsPausedWorkAndLeavesItUntouched", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		ctx := context.Background()
		if err := store.Queue.RegisterTasks(ctx, []string{"payments.charge", "emails.send"}); err != nil {
			t.Fatal(err)
		}
		enqueue := func(task, queue string) dlq.EnqueueResult {
			res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: queue, MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		held, other, onQueue := enqueue("payments.charge", "default"), enqueue("emails.send", "default"), enqueue("emails.send", "bulk")
		if _, err := store.Queue.PauseWork(ctx, pauseParams("task", "payments.charge")); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Queue.PauseWork(ctx, pauseParams("queue", "bulk")); err != nil {
			t.Fatal(err)
		}
		claimed, err := store.Queue.Claim(ctx, "w", []string{"default", "bulk"}, 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != other.Job.ID {
			t.Fatalf("claim: %v, %v; want only job %d", claimed, err, other.Job.ID)
		}
		for _, id := range []int64{held.Job.ID, onQueue.Job.ID} {
			if j, _ := store.Queue.Job(ctx, id); j.State != dlq.StateAvailable || j.Attempt != 0 {
				t.Fatalf("held job %d: %s at attempt %d", id, j.State, j.Attempt)
			}
		}
		backlog, err := store.Queue.PausesWithBacklog(ctx)
		if err != nil || len(backlog) != 2 || backlog[0].Waiting != 1 || backlog[1].Waiting != 1 {
			t.Fatalf("pauses with backlog: %+v, %v; want two pauses with one job waiting each", backlog, err)
		}
	})
}

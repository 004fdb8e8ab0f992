package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// A replay sent somewhere else or later: its job runs in the queue asked,
// from the time asked, with the attempts asked, and the audit entry says
// so; a letter of another system keeps its own queue and attempts (only
// its start can be chosen), and a target that cannot be honoured is
// refused with nothing changed.
func TestReplayElsewhereOrLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now().Add(2 * time.Hour).Truncate(time.Second)

	t.Run("OneLetter", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		target := dlq.ReplayTarget{Queue: "sandbox", StartAt: start, MaxAttempts: 1}
		res, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now(), Target: target, Reason: "try the fix"})
		if err != nil {
			t.Fatal(err)
		}
		var job struct {
			Queue       string    `db:"queue"`
			RunAt       time.Time `db:"run_at"`
			MaxAttempts int       `db:"max_attempts"`
			ReplayOf    int64     `db:"replay_of"`
		}
		if err := db.Get(&job, `SELECT queue, run_at, max_attempts, replay_of FROM jobs WHERE id = $1`, res.JobID); err != nil {
			t.Fatal(err)
		}
		if job.Queue != "sandbox" || !job.RunAt.Equal(start) || job.MaxAttempts != 1 || job.ReplayOf != id {
			t.Fatalf("replayed job %+v; want queue sandbox, run at %s, 1 attempt, replay of %d", job, start, id)
		}
		var details json.RawMessage
		if err := db.Get(&details, `SELECT details FROM audit_events WHERE id = $1`, res.AuditID); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(details, &got); err != nil {
			t.Fatal(err)
		}
		if got["queue"] != "sandbox" || got["start_at"] != start.UTC().Format(time.RFC3339) || got["max_attempts"] != float64(1) {
			t.Errorf("audit details %s; want the queue, start and attempts asked", details)
		}
	})

	t.Run("ABadTargetChangesNothing", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		for _, target := range []dlq.ReplayTarget{
			{Queue: "no spaces allowed"},
			{StartAt: time.Now().Add(-time.Hour)},
			{MaxAttempts: 101},
		} {
			_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now(), Target: target})
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("target %+v: %v; want a validation error", target, err)
			}
			if n := count(t, db, `SELECT count(*) FROM jobs`); n != 0 {
				t.Fatalf("target %+v made %d jobs", target, n)
			}
		}
		if n := count(t, db, `SELECT count(*) FROM pending_dead_letters WHERE id = $1`, id); n != 1 {
			t.Fatal("the letter is no longer pending after refused replays")
		}
	})

	t.Run("AnotherSystemsLetterKeepsItsQueue", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "shop", Kind: dlq.SourceKindCelery}}); err != nil {
			t.Fatal(err)
		}
		got, err := store.Sources.Ingest(ctx, "shop", []dlq.IngestLetter{sentLetter(t, "task-1", "ledger down"), sentLetter(t, "task-2", "ledger down")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: got[0].ID, Actor: alice, Now: time.Now(),
			Target: dlq.ReplayTarget{Queue: "sandbox"}})
		if !errors.Is(err, dlq.ErrConflict) {
			t.Fatalf("a Celery letter replayed into another queue: %v; want a conflict", err)
		}
		if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: got[1].ID, Actor: alice, Now: time.Now(),
			Target: dlq.ReplayTarget{StartAt: start}}); err != nil {
			t.Fatal(err)
		}
		var runAt time.Time
		if err := db.Get(&runAt, `SELECT run_at FROM source_replays WHERE dead_letter_id = $1`, got[1].ID); err != nil {
			t.Fatal(err)
		}
		if !runAt.Equal(start) {
			t.Errorf("the Celery replay is due at %s; want %s", runAt, start)
		}
		if n := count(t, db, `SELECT count(*) FROM pending_dead_letters WHERE id = $1`, got[0].ID); n != 1 {
			t.Error("the refused letter is no longer pending")
		}
	})

	t.Run("AGroupPacedFromItsStart", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 30)
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}, RatePerSecond: 10,
			Target: dlq.ReplayTarget{Queue: "sandbox", StartAt: start, MaxAttempts: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if got := op.Target(); got.Queue != "sandbox" || !got.StartAt.Equal(start) || got.MaxAttempts != 2 {
			t.Fatalf("the operation keeps %+v", got)
		}
		runToEnd(t, store, op.ID, 7)
		var jobs struct {
			N, Sandbox, TwoAttempts int
			First, Last             time.Time
		}
		if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE queue = 'sandbox'), count(*) FILTER (WHERE max_attempts = 2),
			min(run_at), max(run_at) FROM jobs WHERE operation_id = $1`, op.ID).
			Scan(&jobs.N, &jobs.Sandbox, &jobs.TwoAttempts, &jobs.First, &jobs.Last); err != nil {
			t.Fatal(err)
		}
		if jobs.N != 30 || jobs.Sandbox != 30 || jobs.TwoAttempts != 30 {
			t.Fatalf("%d jobs, %d in sandbox, %d with 2 attempts; want 30 of each", jobs.N, jobs.Sandbox, jobs.TwoAttempts)
		}
		// 30 letters at 10 a second from the start: 0.1 s to 3 s after it.
		if jobs.First.Before(start) || jobs.Last.Before(start.Add(2900*time.Millisecond)) || jobs.Last.After(start.Add(3100*time.Millisecond)) {
			t.Errorf("jobs run from %s to %s; want paced over 3 s from %s", jobs.First, jobs.Last, start)
		}
	})

	t.Run("ADiscardHasNoTarget", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		insertLetters(t, db, 3)
		_, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
			Reason: "never", Selection: dlq.Selection{Filter: filterOf(t, "task=t.ok")}, Target: dlq.ReplayTarget{Queue: "sandbox"}})
		var ve *dlq.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("a discard with a queue: %v; want a validation error", err)
		}
		if n := count(t, db, `SELECT count(*) FROM operations`); n != 0 {
			t.Fatalf("%d operations stored", n)
		}
	})
}

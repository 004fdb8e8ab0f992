package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func pqInt64s(ids []int64) any { return pq.Array(ids) }

// insertLetters makes n pending dead letters of task t.ok and returns their ids.
// lettersGroup is the error group of the letters insertLetters makes.
const lettersGroup = "00000000000000f0"

func insertLetters(t *testing.T, db *storetest.DB, n int) []int64 {
	t.Helper()
	var ids []int64
	err := db.Select(&ids, `
		INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
			max_attempts, reason, fingerprint, enqueued_at)
		SELECT 1000000 + g + (SELECT coalesce(max(id), 0) FROM dead_letter_records), 'default', 't.ok', '[1]', '{"a":1}',
			'E', 'boom', 3, 3, 'exhausted', $2, now()
		FROM generate_series(1, $1) g
		RETURNING id`, n, lettersGroup)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func count(t *testing.T, db *storetest.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

var alice = dlq.Actor{Name: "alice", RequestID: "req-1", RemoteAddr: "127.0.0.1", UserAgent: "test"}

func TestReplayDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ConcurrentReplaysMakeExactlyOneJob", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		for range 20 {
			wg.Go(func() {
				_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()})
				mu.Lock()
				defer mu.Unlock()
				var se *dlq.StateError
				switch {
				case err == nil:
					wins++
				case errors.As(err, &se) && errors.Is(err, dlq.ErrConflict) && se.Letter.ReplayJobID != nil:
					conflicts++
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		if wins != 1 || conflicts != 19 {
			t.Fatalf("wins %d, conflicts %d; want 1 and 19", wins, conflicts)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs WHERE replay_of = $1`, id); n != 1 {
			t.Fatalf("%d replay jobs, want 1", n)
		}
		if n := count(t, db, `SELECT count(*) FROM audit_events WHERE dead_letter_id = $1`, id); n != 1 {
			t.Fatalf("%d audit entries, want 1", n)
		}
	})

	t.Run("ReplayCopiesTheJobAndResetsAttempts", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		res, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		job, err := store.Queue.Job(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if job.Task != "t.ok" || string(job.Args) != "[1]" || job.Attempt != 0 || job.MaxAttempts != 3 ||
			job.ReplayOf == nil || *job.ReplayOf != id || job.State != dlq.StateAvailable {
			t.Fatalf("replay job wrong: %+v", job)
		}
	})

	t.Run("EditAndReplayKeepsBeforeAndAfter", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		res, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now(),
			Kwargs: json.RawMessage(`{"a": 2}`)})
		if err != nil {
			t.Fatal(err)
		}
		var action, details string
		if err := db.QueryRow(`SELECT action, details::text FROM audit_events WHERE id = $1`, res.AuditID).Scan(&action, &details); err != nil {
			t.Fatal(err)
		}
		var d struct {
			Before, After struct{ Kwargs map[string]int }
		}
		if err := json.Unmarshal([]byte(details), &d); err != nil {
			t.Fatal(err)
		}
		if action != dlq.ActionEditReplay || d.Before.Kwargs["a"] != 1 || d.After.Kwargs["a"] != 2 {
			t.Fatalf("audit of edit wrong: %s %s", action, details)
		}
	})

	t.Run("DiscardedLetterIsRefused", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "bad data", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()})
		if !errors.Is(err, dlq.ErrConflict) {
			t.Fatalf("replay of a discarded letter: want conflict, got %v", err)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatalf("a refused replay enqueued %d jobs", n)
		}
	})

	// An edit that still shows the placeholder where the letter has no
	// value is the editor's mistake: invalid input on that argument, and
	// nothing replayed.
	t.Run("PlaceholderWithNothingBehindItIsInvalid", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now(),
			Kwargs: json.RawMessage(`{"a": 1, "password": "•••"}`)})
		var verr *dlq.ValidationError
		if !errors.As(err, &verr) || !errors.Is(err, dlq.ErrInvalid) || !strings.Contains(verr.Fields["kwargs"], "kwargs.password") {
			t.Fatalf("want invalid kwargs naming kwargs.password, got %v", err)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatalf("a refused replay enqueued %d jobs", n)
		}
	})

	t.Run("UnknownLetterIsNotFound", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: 999, Actor: alice, Now: time.Now()})
		if !errors.Is(err, dlq.ErrNotFound) {
			t.Fatalf("want not found, got %v", err)
		}
	})
}

func TestDiscardAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	id := insertLetters(t, db, 1)[0]

	_, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Now: time.Now()})
	if !errors.Is(err, dlq.ErrInvalid) {
		t.Fatalf("discard without reason: want invalid, got %v", err)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 1 {
		t.Fatal("a refused discard changed the letter")
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "test data", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "again", Now: time.Now()}); !errors.Is(err, dlq.ErrConflict) {
		t.Fatalf("second discard: want conflict, got %v", err)
	}
	if _, err := store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: id, Actor: alice, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending' AND discard_reason IS NULL`); n != 1 {
		t.Fatal("restore did not make the letter pending")
	}
	if n := count(t, db, `SELECT count(*) FROM audit_events WHERE dead_letter_id = $1`, id); n != 2 {
		t.Fatalf("%d audit entries, want one per successful action (2)", n)
	}
}

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AppendOnly", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`UPDATE audit_events SET actor = 'mallory'`,
			`DELETE FROM audit_events`,
			`TRUNCATE audit_events CASCADE`,
		} {
			if _, err := db.Exec(q); err == nil {
				t.Errorf("%s succeeded on an append-only table", q)
			}
		}
	})

	t.Run("VerifyFindsTheFirstTamperedEntry", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 5)
		for _, id := range ids {
			if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		n, problem, err := store.Audit.VerifyAudit(ctx)
		if err != nil || problem != nil || n != 5 {
			t.Fatalf("intact chain: n=%d problem=%v err=%v", n, problem, err)
		}
		// Tamper the way an attacker with superuser rights would: around the trigger.
		var third int64
		if err := db.Get(&third, `SELECT id FROM audit_events ORDER BY id OFFSET 2 LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE audit_events SET actor = 'mallory' WHERE id = $1`, third); err != nil {
			t.Fatal(err)
		}
		_, problem, err = store.Audit.VerifyAudit(ctx)
		if err != nil || problem == nil || problem.EntryID != third {
			t.Fatalf("altered entry %d not found: %+v %v", third, problem, err)
		}
		// A removed entry breaks the chain at the one after it.
		if _, err := db.Exec(`UPDATE audit_events SET actor = 'alice' WHERE id = $1`, third); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`DELETE FROM audit_events WHERE id = $1`, third); err != nil {
			t.Fatal(err)
		}
		_, problem, err = store.Audit.VerifyAudit(ctx)
		if err != nil || problem == nil || problem.EntryID <= third {
			t.Fatalf("removed entry %d not found: %+v %v", third, problem, err)
		}
	})
}

func TestActionKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SameKeyTwiceIsOneReplayWithTheSameAnswer", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		var wg sync.WaitGroup
		results := make([]dlq.ReplayResult, 5)
		for i := range results {
			wg.Go(func() {
				res, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now(), Key: "form-123"})
				if err != nil {
					t.Errorf("replay with a used key must return the first result, got %v", err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		repeats := 0
		for _, r := range results {
			if r.JobID != results[0].JobID || r.AuditID != results[0].AuditID {
				t.Fatalf("different answers for one key: %+v", results)
			}
			if r.Repeated {
				repeats++
			}
		}
		if repeats != 4 {
			t.Fatalf("%d repeats, want 4", repeats)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs`); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})

	t.Run("AFailedActionDoesNotConsumeItsKey", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Key: "k"}); err == nil {
			t.Fatal("discard without a reason succeeded")
		}
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Key: "k", Reason: "r"}); err != nil {
			t.Fatalf("retry with the same key after a failure: %v", err)
		}
	})
}

func TestPurgeSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 30)
	for _, id := range ids[:10] {
		if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: id, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[10:20] {
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "r", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`UPDATE dead_letter_outcomes SET replayed_at = now() - interval '40 days' WHERE dead_letter_id = ANY($1)`, pqInt64s(ids[:5])); err != nil {
		t.Fatal(err)
	}
	// Two hours on, so that the letters' group (they failed just now) is
	// no longer growing: TestPurgeHoldsGrowingGroups has those.
	n, _, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: 30 * 24 * time.Hour, Actor: alice, Now: time.Now().Add(2 * time.Hour), BatchSize: 2})
	if err != nil || n != 5 {
		t.Fatalf("purged %d (%v), want the 5 settled 40 days ago", n, err)
	}
	if c := count(t, db, `SELECT count(*) FROM dead_letters`); c != 25 {
		t.Fatalf("%d letters left, want 25", c)
	}
	if c := count(t, db, `SELECT coalesce(sum((counts->>'purged')::int), 0) FROM audit_events WHERE action = 'purge'`); c != 5 {
		t.Fatalf("audit counts %d purged, want 5", c)
	}
	if c := count(t, db, `SELECT count(*) FROM jobs WHERE replay_of IS NULL`); c != 5 {
		t.Fatalf("replay jobs of purged letters should lose their link: %d", c)
	}
	if _, _, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{Actor: alice, Now: time.Now()}); !errors.Is(err, dlq.ErrInvalid) {
		t.Fatalf("purge without a duration: want invalid, got %v", err)
	}
}

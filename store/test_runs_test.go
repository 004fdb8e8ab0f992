package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// A test run enqueues one job from a letter's arguments, as edited, on the
// queue asked, with one attempt unless asked: linked to the letter (not as
// its replay), audited, and leaving the letter pending. When the test job
// dies, its letter is settled at once as a test of the letter tried, so
// nothing new waits to be replayed beside it.
func TestTestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	run := func(t *testing.T, store *storetest.Stores, p dlq.TestRunParams) dlq.TestRunResult {
		t.Helper()
		res, err := store.Operations.TestRunDeadLetter(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("EnqueuesOneLinkedJobAndLeavesTheLetterPending", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		res := run(t, store, dlq.TestRunParams{LetterID: id, Actor: alice, Now: time.Now(), Reason: "try the fix",
			Kwargs: json.RawMessage(`{"a":2}`), Target: dlq.ReplayTarget{Queue: "sandbox"}})
		var job struct {
			Queue       string          `db:"queue"`
			Task        string          `db:"task"`
			Kwargs      json.RawMessage `db:"kwargs"`
			MaxAttempts int             `db:"max_attempts"`
			ReplayOf    *int64          `db:"replay_of"`
		}
		if err := db.Get(&job, `SELECT queue, task, kwargs, max_attempts, replay_of FROM jobs WHERE id = $1`, res.JobID); err != nil {
			t.Fatal(err)
		}
		if job.Queue != "sandbox" || job.Task != "t.ok" || string(job.Kwargs) != `{"a": 2}` || job.MaxAttempts != 1 || job.ReplayOf != nil {
			t.Fatalf("test job %+v; want t.ok on sandbox with the edited kwargs, 1 attempt, no replay_of", job)
		}
		if n := count(t, db, `SELECT count(*) FROM pending_dead_letters WHERE id = $1`, id); n != 1 {
			t.Fatal("the letter is no longer pending after a test run")
		}
		var action string
		var details json.RawMessage
		if err := db.QueryRow(`SELECT action, details FROM audit_events WHERE id = $1`, res.AuditID).Scan(&action, &details); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(details, &got); err != nil {
			t.Fatal(err)
		}
		if action != dlq.ActionTestRun || got["test_job_id"] != float64(res.JobID) || got["queue"] != "sandbox" || got["after"] == nil {
			t.Errorf("audit %s %s; want a test_run naming job %d on sandbox with the edit", action, details, res.JobID)
		}
		runs, err := store.Operations.TestRuns(ctx, id, 10)
		if err != nil || len(runs) != 1 || runs[0].JobID != res.JobID || runs[0].State != dlq.StateAvailable || runs[0].RequestedBy != "alice" {
			t.Fatalf("test runs %+v, %v; want job %d available, by alice", runs, err, res.JobID)
		}
	})

	t.Run("ADeadTestJobsLetterIsSettledAsATest", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		res := run(t, store, dlq.TestRunParams{LetterID: id, Actor: alice, Now: time.Now(), Target: dlq.ReplayTarget{Queue: "sandbox"}})
		jobs, err := store.Queue.Claim(ctx, "w1", []string{"sandbox"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 || jobs[0].ID != res.JobID {
			t.Fatalf("claimed %v, %v; want the test job", jobs, err)
		}
		dead, err := store.Queue.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: "t.ok",
			Reason: dlq.ReasonExhausted, Attempt: dlq.Attempt{Attempt: 1, At: time.Now(), Class: "E", Message: "still broken"}}})
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead-lettered %v, %v", dead, err)
		}
		var reason string
		if err := db.Get(&reason, `SELECT discard_reason FROM dead_letters WHERE id = $1 AND status = 'discarded'`, dead[0].LetterID); err != nil {
			t.Fatalf("the test job's letter is not discarded: %v", err)
		}
		if !strings.Contains(reason, "test run of dead letter "+strconv.FormatInt(id, 10)) {
			t.Errorf("its discard reason %q does not name letter %d", reason, id)
		}
		if n := count(t, db, `SELECT count(*) FROM pending_dead_letters`); n != 1 {
			t.Errorf("%d pending letters; want only the one tried", n)
		}
		storetest.AssertSummariesMatch(t, db)
		runs, err := store.Operations.TestRuns(ctx, id, 10)
		if err != nil || len(runs) != 1 || runs[0].State != dlq.StateDead || runs[0].DiedAsLetter == nil ||
			*runs[0].DiedAsLetter != dead[0].LetterID || runs[0].LastError == nil {
			t.Fatalf("test runs %+v, %v; want one dead, as letter %d, with its error", runs, err, dead[0].LetterID)
		}
	})

	t.Run("ASentAgainFormRunsOneJob", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		p := dlq.TestRunParams{LetterID: id, Actor: alice, Now: time.Now(), Key: "f-once"}
		first, again := run(t, store, p), run(t, store, p)
		if again.JobID != first.JobID || !again.Repeated {
			t.Fatalf("sent again: %+v; want job %d repeated", again, first.JobID)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs`); n != 1 {
			t.Fatalf("%d jobs; want 1", n)
		}
	})

	t.Run("RefusalsChangeNothing", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		for _, p := range []dlq.TestRunParams{
			{LetterID: id, Target: dlq.ReplayTarget{Queue: "no spaces"}},
			{LetterID: id, Target: dlq.ReplayTarget{MaxAttempts: 101}},
			{LetterID: id, Args: json.RawMessage(`{"not":"an array"}`)},
		} {
			p.Actor, p.Now = alice, time.Now()
			var ve *dlq.ValidationError
			if _, err := store.Operations.TestRunDeadLetter(ctx, p); !errors.As(err, &ve) {
				t.Fatalf("%+v: %v; want a validation error", p, err)
			}
		}
		if _, err := store.Operations.TestRunDeadLetter(ctx, dlq.TestRunParams{LetterID: id + 99, Actor: alice, Now: time.Now()}); !errors.Is(err, dlq.ErrNotFound) {
			t.Fatalf("a missing letter: %v; want not found", err)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs`) + count(t, db, `SELECT count(*) FROM test_runs`); n != 0 {
			t.Fatalf("refused test runs left %d rows", n)
		}
	})
}

package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// retryingJob makes a job of t.ok that failed twice and retries in an hour.
func retryingJob(t *testing.T, db *storetest.DB) int64 {
	t.Helper()
	var id int64
	err := db.Get(&id, `
		INSERT INTO jobs (task, state, attempt, max_attempts, run_at, last_error, errors)
		VALUES ('t.ok', 'retrying', 2, 10, now() + interval '1 hour', 'PoisonError: bad row 42',
			'[{"attempt":1,"at":"2026-01-01T00:00:00Z","class":"PoisonError","message":"bad row 42","outcome":"retry","version":"v1"},
			  {"attempt":2,"at":"2026-01-01T00:01:00Z","class":"PoisonError","message":"bad row 42","outcome":"retry","version":"v1"}]')
		RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func intp(n int) *int { return &n }

func TestActOnJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("KillMakesALetterWithReasonKilledAndHistory", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		res, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobKill, ID: id, SeenState: dlq.StateRetrying,
			SeenAttempt: intp(2), Actor: alice, Reason: "poison payload", Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if res.DeadLetterID == nil || res.State != dlq.StateDead {
			t.Fatalf("result %+v: want a letter and state dead", res)
		}
		l, err := store.Letters.GetDeadLetter(ctx, *res.DeadLetterID)
		if err != nil {
			t.Fatal(err)
		}
		if l.Reason != dlq.ReasonKilled || l.ErrorClass != "PoisonError" || l.Status != dlq.StatusPending {
			t.Errorf("letter reason %q class %q status %q; want killed, the job's last error, pending", l.Reason, l.ErrorClass, l.Status)
		}
		if len(l.History) != 3 {
			t.Fatalf("history has %d entries, want the 2 attempts and the kill", len(l.History))
		}
		last := l.History[2]
		if last.Outcome != dlq.OutcomeKilled || last.Message != "killed by alice: poison payload" || last.Attempt != 2 {
			t.Errorf("kill entry %+v", last)
		}
		job, _ := store.Queue.Job(ctx, id)
		if job.State != dlq.StateDead {
			t.Errorf("job state %s, want dead", job.State)
		}
		var action, reason string
		if err := db.QueryRow(`SELECT action, reason FROM audit_events WHERE id = $1`, res.AuditID).Scan(&action, &reason); err != nil {
			t.Fatal(err)
		}
		if action != dlq.ActionJobKill || reason != "poison payload" {
			t.Errorf("audit %s %q", action, reason)
		}
		if _, p, err := store.Audit.VerifyAudit(ctx); err != nil || p != nil {
			t.Errorf("audit chain: %v %+v", err, p)
		}
		// The letter replays like any other.
		if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: l.ID, Actor: alice, Now: time.Now()}); err != nil {
			t.Errorf("replay the killed letter: %v", err)
		}
	})

	t.Run("RaceJobFinishedMeanwhileIsReportedNotApplied", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		// A worker claimed and finished it between the page and the click.
		db.MustExec(`UPDATE jobs SET state = 'succeeded', attempt = 3, finished_at = now() WHERE id = $1`, id)
		for _, a := range []dlq.JobAction{dlq.JobKill, dlq.JobRunNow} {
			_, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: a, ID: id, SeenState: dlq.StateRetrying,
				SeenAttempt: intp(2), Actor: alice, Reason: "x", Now: time.Now()})
			var se *dlq.JobStateError
			if !errors.As(err, &se) || !errors.Is(err, dlq.ErrConflict) || !se.Changed {
				t.Fatalf("%s: err %v, want a JobStateError (changed)", a, err)
			}
			if !strings.Contains(err.Error(), "the job changed: it finished meanwhile and is now succeeded") {
				t.Errorf("%s: message %q", a, err)
			}
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Errorf("%d letters written", n)
		}
		if n := count(t, db, `SELECT count(*) FROM audit_events`); n != 0 {
			t.Errorf("%d audit entries written", n)
		}
	})

	t.Run("SeenAttemptMismatchIsAConflict", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		_, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobKill, ID: id, SeenState: dlq.StateRetrying,
			SeenAttempt: intp(1), Actor: alice, Now: time.Now()})
		if !errors.Is(err, dlq.ErrConflict) || !strings.Contains(err.Error(), "it is now retrying (attempt 2/10)") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("RunNowMovesRunAtAndRefusesADueJob", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		if _, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobRunNow, ID: id, Actor: alice, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs WHERE id = $1 AND run_at <= now() AND state = 'retrying'`, id); n != 1 {
			t.Fatal("run_at did not move to now")
		}
		_, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobRunNow, ID: id, Actor: alice, Now: time.Now()})
		var se *dlq.JobStateError
		if !errors.As(err, &se) || !se.NotDue {
			t.Fatalf("second run now: %v, want already due", err)
		}
	})

	t.Run("KeyMakesItHappenOnce", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		p := dlq.JobActionParams{Action: dlq.JobKill, ID: id, Actor: alice, Reason: "r", Now: time.Now(), Key: "k-1"}
		first, err := store.Operations.ActOnJob(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := store.Operations.ActOnJob(ctx, p)
		if err != nil || !again.Repeated || *again.DeadLetterID != *first.DeadLetterID {
			t.Fatalf("again: %+v %v", again, err)
		}
		p.Reason = "other"
		if _, err := store.Operations.ActOnJob(ctx, p); !errors.Is(err, dlq.ErrInvalid) {
			t.Fatalf("reused key with another body: %v", err)
		}
	})

	t.Run("CancelOfAJobNotRunningIsRefused", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := retryingJob(t, db)
		_, err := store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobCancel, ID: id, Actor: alice, Now: time.Now()})
		if !errors.Is(err, dlq.ErrConflict) || !strings.Contains(err.Error(), "only a running job can be cancelled") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestActOnJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("KillAllMatchingNeedsTheTypedCountAndStopsAtMaxID", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		db.MustExec(`INSERT INTO jobs (task, queue, state, attempt, run_at)
			SELECT 't.ok', 'poison', 'retrying', 1, now() + interval '1 hour' FROM generate_series(1, 1200)`)
		db.MustExec(`INSERT INTO jobs (task, queue) SELECT 't.ok', 'other' FROM generate_series(1, 5)`)
		f := dlq.JobFilter{Queue: "poison"}
		p, err := store.Operations.PreviewJobs(ctx, dlq.JobKill, dlq.JobSelection{Filter: &f}, 5)
		if err != nil {
			t.Fatal(err)
		}
		if p.Matched != 1200 || len(p.Sample) != 5 {
			t.Fatalf("preview %d matched, %d sampled", p.Matched, len(p.Sample))
		}
		// A job enqueued after the confirmation was shown is not swept in.
		db.MustExec(`INSERT INTO jobs (task, queue, state, attempt) VALUES ('t.ok', 'poison', 'retrying', 1)`)
		sel := dlq.JobSelection{Filter: &f, MaxID: p.MaxID}
		wrong := errors.New("type 1200")
		confirm := func(typed string) func(int64) error {
			return func(n int64) error {
				if typed != "1200" || n != 1200 {
					return wrong
				}
				return nil
			}
		}
		if _, err := store.Operations.ActOnJobs(ctx, dlq.BulkJobParams{Action: dlq.JobKill, Selection: sel, Actor: alice,
			Reason: "poison", Now: time.Now(), Confirm: confirm("1000")}); !errors.Is(err, wrong) {
			t.Fatalf("wrong typed count: %v", err)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Fatalf("%d letters after a refused confirmation", n)
		}
		res, err := store.Operations.ActOnJobs(ctx, dlq.BulkJobParams{Action: dlq.JobKill, Selection: sel, Actor: alice,
			Reason: "poison", Now: time.Now(), Confirm: confirm("1200"), Key: "bulk-1"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed != 1200 || res.Skipped != 0 {
			t.Fatalf("result %+v", res)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE reason = 'killed' AND queue = 'poison'`); n != 1200 {
			t.Errorf("%d killed letters, want 1200", n)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs WHERE queue = 'poison' AND state = 'retrying'`); n != 1 {
			t.Errorf("%d poison jobs still retrying, want the 1 enqueued after the preview", n)
		}
		if n := count(t, db, `SELECT count(*) FROM jobs WHERE queue = 'other' AND state = 'available'`); n != 5 {
			t.Errorf("other queue touched")
		}
		if n := count(t, db, `SELECT count(*) FROM audit_events WHERE action = 'job_kill' AND max_id = $1`, p.MaxID); n != 1 {
			t.Errorf("%d bulk audit entries", n)
		}
	})

	t.Run("RunNowByIDsSkipsJobsNotWaiting", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		a, b := retryingJob(t, db), retryingJob(t, db)
		db.MustExec(`UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = $1`, b)
		res, err := store.Operations.ActOnJobs(ctx, dlq.BulkJobParams{Action: dlq.JobRunNow,
			Selection: dlq.JobSelection{IDs: []int64{a, b}}, Actor: alice, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Matched != 1 || res.Changed != 1 {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("TooLargeASelectionIsRefusedWithWords", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		db.MustExec(`INSERT INTO jobs (task) SELECT 't.ok' FROM generate_series(1, $1)`, dlq.MaxBulkJobs+1)
		f := dlq.JobFilter{}
		_, err := store.Operations.ActOnJobs(ctx, dlq.BulkJobParams{Action: dlq.JobKill, Selection: dlq.JobSelection{Filter: &f},
			Actor: alice, Now: time.Now()})
		var ve *dlq.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Fields["selection"], "narrow the filter") {
			t.Fatalf("err %v", err)
		}
	})
}

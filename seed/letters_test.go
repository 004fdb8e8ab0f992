package seed_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

	t.Run("FiveThousandRealisticLetters", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		n, err := seed.DeadLetters(ctx, store.Letters, store.Groups, 5000, now, seed.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if n != 5000 {
			t.Fatalf("inserted %d, want 5000", n)
		}
		var letters []dlq.DeadLetter
		if err := db.Select(&letters, `SELECT `+seededColumns+` FROM dead_letters ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		if len(letters) != 5000 {
			t.Fatalf("table holds %d letters, want 5000", len(letters))
		}

		tasks, queues, fingerprints := map[string]bool{}, map[string]bool{}, map[string]bool{}
		statuses := map[dlq.Status]int{}
		for _, l := range letters {
			checkSeededLetter(t, l, now)
			tasks[l.Task], queues[l.Queue], fingerprints[l.Fingerprint] = true, true, true
			statuses[l.Status]++
		}
		if len(tasks) < 10 || len(queues) != 4 || len(fingerprints) < 40 {
			t.Errorf("not varied enough: %d tasks, %d queues, %d fingerprints", len(tasks), len(queues), len(fingerprints))
		}
		if statuses[dlq.StatusPending] < 3000 || statuses[dlq.StatusReplayed] < 300 || statuses[dlq.StatusDiscarded] < 300 {
			t.Errorf("want mostly pending and some replayed and discarded, have %v", statuses)
		}
		// The settled letters' outcomes go in before the letters: the
		// counts, groups, inflow and pending rows must still add up.
		storetest.AssertSummariesMatch(t, db)
	})

	t.Run("RecentFailuresOutnumberOldOnes", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		if _, err := seed.DeadLetters(ctx, storetest.NewStores(db.DB).Letters, storetest.NewStores(db.DB).Groups, 2000, now, seed.Options{}); err != nil {
			t.Fatal(err)
		}
		var lastDay, firstDay int
		err := db.QueryRow(`SELECT count(*) FILTER (WHERE failed_at > $1::timestamptz - interval '1 day'),
			count(*) FILTER (WHERE failed_at < $1::timestamptz - interval '13 days') FROM dead_letters`, now).
			Scan(&lastDay, &firstDay)
		if err != nil {
			t.Fatal(err)
		}
		if lastDay <= 2*firstDay {
			t.Errorf("failures are not weighted toward recent: %d in the last day, %d on the oldest day", lastDay, firstDay)
		}
	})

	// A worker dead-letters in time order, so ids rise with failed_at and
	// "everything since the incident began" is a run of neighbouring rows;
	// the seed used to scatter each batch's failure times over its ids.
	// The pending letters and the settled ones go in as batches of their
	// own, so 3,000 letters are two runs: in each, ids rise with failed_at.
	t.Run("IDsRiseWithFailureTime", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		if _, err := seed.DeadLetters(ctx, storetest.NewStores(db.DB).Letters, storetest.NewStores(db.DB).Groups, 3000, now, seed.Options{}); err != nil {
			t.Fatal(err)
		}
		var backwards, runs int
		err := db.QueryRow(`SELECT count(*) FILTER (WHERE back), count(DISTINCT settled) FROM (
			SELECT status <> 'pending' AS settled,
			       failed_at < lag(failed_at) OVER (PARTITION BY status = 'pending' ORDER BY id) AS back
			FROM dead_letters) x`).Scan(&backwards, &runs)
		if err != nil {
			t.Fatal(err)
		}
		if backwards != 0 || runs != 2 {
			t.Errorf("%d of 3000 letters failed before the previous letter of their kind by id (%d kinds)", backwards, runs)
		}
	})

	t.Run("JobIDsNeverCollideWithLaterJobs", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		for range 2 { // seeding twice must not reuse job ids either
			if _, err := seed.DeadLetters(ctx, store.Letters, store.Groups, 50, now, seed.Options{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Queue.RegisterTasks(ctx, []string{"t.ok"}); err != nil {
			t.Fatal(err)
		}
		res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok"})
		if err != nil {
			t.Fatal(err)
		}
		var count int
		var maxJob int64
		if err := db.QueryRow(`SELECT count(*), max(greatest(job_id, coalesce(replay_job_id, 0))) FROM dead_letters`).
			Scan(&count, &maxJob); err != nil {
			t.Fatal(err)
		}
		if count != 100 || res.Job.ID <= maxJob {
			t.Fatalf("%d letters; new job %d must come after seeded job ids (max %d)", count, res.Job.ID, maxJob)
		}
	})

	t.Run("NothingOrNegative", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		if n, err := seed.DeadLetters(ctx, store.Letters, store.Groups, 0, now, seed.Options{}); n != 0 || err != nil {
			t.Errorf("seed 0: %d, %v", n, err)
		}
		if _, err := seed.DeadLetters(ctx, store.Letters, store.Groups, -1, now, seed.Options{}); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("seed -1: want ErrInvalid, got %v", err)
		}
	})
}

// seededColumns are the columns of dlq.DeadLetter.
const seededColumns = `id, job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at,
	replay_of, replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason, status`

// checkSeededLetter asserts what every seeded letter must satisfy to look
// like one the worker wrote.
func checkSeededLetter(t *testing.T, l dlq.DeadLetter, now time.Time) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("letter %d (%s %s): "+format, append([]any{l.ID, l.Task, l.ErrorClass}, args...)...)
	}
	if len(l.Fingerprint) != 16 || strings.Trim(l.Fingerprint, "0123456789abcdef") != "" {
		fail("group id %q, want 16 hex digits", l.Fingerprint)
	}
	for _, s := range []string{l.ErrorMessage, l.Traceback, string(l.Args), string(l.Kwargs)} {
		if strings.Contains(s, "%!") || strings.Contains(s, "$s") || strings.Contains(s, "{order}") {
			fail("unfilled template in %q", s)
		}
	}
	var args []any
	var kwargs map[string]any
	if json.Unmarshal(l.Args, &args) != nil || json.Unmarshal(l.Kwargs, &kwargs) != nil || len(kwargs) == 0 {
		fail("args %s / kwargs %s are not a JSON array and a non-empty object", l.Args, l.Kwargs)
	}

	switch l.Reason {
	case dlq.ReasonPermanent:
		if l.Attempts != 1 {
			fail("permanent failure after %d attempts", l.Attempts)
		}
	case dlq.ReasonExhausted, dlq.ReasonLeaseExpired:
		if l.Attempts != l.MaxAttempts {
			fail("%s with %d of %d attempts", l.Reason, l.Attempts, l.MaxAttempts)
		}
	default:
		fail("unknown reason %q", l.Reason)
	}
	if (l.Reason == dlq.ReasonLeaseExpired) != (l.ErrorClass == dlq.LeaseExpiredClass) {
		fail("reason %s with class %s", l.Reason, l.ErrorClass)
	}
	if l.Reason == dlq.ReasonLeaseExpired {
		if l.Traceback != "" {
			fail("a rescued job has no traceback")
		}
	} else if !strings.HasPrefix(l.Traceback, "Traceback (most recent call last):\n") || strings.Count(l.Traceback, "\n") < 4 {
		fail("traceback is not a multi-line traceback: %q", l.Traceback)
	}

	if len(l.History) != l.Attempts {
		fail("%d history entries for %d attempts", len(l.History), l.Attempts)
	}
	prev := l.EnqueuedAt
	for i, a := range l.History {
		last := i == len(l.History)-1
		if a.Attempt != i+1 || a.Class != l.ErrorClass || a.Worker == "" || a.Host == "" || a.Version == "" || a.At.Before(prev) {
			fail("history entry %d out of shape or order: %+v", i, a)
		}
		prev = a.At
		switch {
		case last && a.Outcome != dlq.OutcomeDead,
			!last && l.Reason == dlq.ReasonExhausted && (a.Outcome != dlq.OutcomeRetry || a.RetryInMS <= 0),
			!last && l.Reason == dlq.ReasonLeaseExpired && a.Outcome != dlq.OutcomeLeaseExpired:
			fail("history entry %d has outcome %s", i, a.Outcome)
		}
		if !strings.HasPrefix(a.Message, l.ErrorMessage) {
			fail("history entry %d message %q does not match the letter's", i, a.Message)
		}
	}
	if lastAttempt, ok := l.History.Last(); ok {
		if !lastAttempt.At.Equal(l.FailedAt) || lastAttempt.Version != l.WorkerVersion {
			fail("last attempt %+v disagrees with the letter", lastAttempt)
		}
	}
	if l.FailedAt.After(now) || l.FailedAt.Before(now.Add(-14*24*time.Hour)) {
		fail("failed at %s, outside the 14 days before %s", l.FailedAt, now)
	}

	switch l.Status {
	case dlq.StatusPending:
		if l.ReplayedAt != nil || l.DiscardedAt != nil {
			fail("pending but acted on")
		}
	case dlq.StatusReplayed:
		if l.ReplayedAt == nil || l.ReplayedBy == nil || l.ReplayJobID == nil || l.ReplayedAt.Before(l.FailedAt) || l.ReplayedAt.After(now) {
			fail("replayed without a consistent replay: %v %v %v", l.ReplayedAt, l.ReplayedBy, l.ReplayJobID)
		}
	case dlq.StatusDiscarded:
		if l.DiscardedAt == nil || l.DiscardedBy == nil || l.DiscardReason == nil || *l.DiscardReason == "" || l.DiscardedAt.Before(l.FailedAt) {
			fail("discarded without who, when and why")
		}
	}
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// loadedLetter is the i-th letter of a small bulk load.
func loadedLetter(i int, failedAt time.Time) dlq.DeadLetter {
	return dlq.DeadLetter{Queue: "payments", Task: "billing.charge", Args: []byte(`[1]`), Kwargs: []byte(`{}`),
		ErrorClass: "CardDeclined", ErrorMessage: "card declined", Traceback: "Traceback: ...", Attempts: 1, MaxAttempts: 1,
		Reason: dlq.ReasonPermanent, Fingerprint: "fp-card-declined", WorkerVersion: "v1",
		EnqueuedAt: failedAt.Add(-time.Minute), FailedAt: failedAt.Add(time.Duration(i) * time.Second),
		History: dlq.Attempts{{Attempt: 1, At: failedAt, Outcome: dlq.OutcomeDead, Class: "CardDeclined", Message: "card declined"}}}
}

// A load's letters keep the outcomes they are given: each is pending,
// replayed (with a replay job id from the jobs' sequence) or discarded,
// and every summary counts it as such.
func TestLoadDeadLettersKeepsTheirOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	failedAt := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	acted, ana, tom, why := failedAt.Add(time.Hour), "ana", "tom", "a test order"
	n, err := store.Letters.LoadDeadLetters(ctx, 4, func(i int) dlq.DeadLetter {
		l := loadedLetter(i, failedAt)
		switch i {
		case 1:
			l.ReplayedAt, l.ReplayedBy = &acted, &ana
		case 2:
			l.DiscardedAt, l.DiscardedBy, l.DiscardReason = &acted, &tom, &why
		}
		return l
	})
	if err != nil || n != 4 {
		t.Fatalf("loaded %d: %v", n, err)
	}
	var letters []dlq.DeadLetter
	if err := db.Select(&letters, `SELECT id, status, replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason
		FROM dead_letters ORDER BY failed_at`); err != nil {
		t.Fatal(err)
	}
	want := []dlq.Status{dlq.StatusPending, dlq.StatusReplayed, dlq.StatusDiscarded, dlq.StatusPending}
	for i, l := range letters {
		if l.Status != want[i] {
			t.Errorf("letter %d: %s, want %s", i, l.Status, want[i])
		}
	}
	if r := letters[1]; r.ReplayedAt == nil || !r.ReplayedAt.Equal(acted) || *r.ReplayedBy != ana || r.ReplayJobID == nil || r.DiscardedAt != nil {
		t.Errorf("replayed letter: %+v", r)
	}
	if d := letters[2]; d.DiscardedAt == nil || !d.DiscardedAt.Equal(acted) || *d.DiscardedBy != tom || *d.DiscardReason != why || d.ReplayedAt != nil {
		t.Errorf("discarded letter: %+v", d)
	}
	storetest.AssertSummariesMatch(t, db)
}

// A load writes every text as given, whatever COPY's text format would
// read as a delimiter, an escape or a NULL, across many COPY chunks, and
// its times to the microsecond; a bad letter fails the load and leaves
// nothing behind.
func TestLoadDeadLettersWritesTextAsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	failedAt := time.Date(2026, 12, 1, 10, 0, 0, 123456000, zone)
	key := `key\twith\N`
	tricky := "tab\there, line\nbreak, crlf\r\nend, backslash \\ and \\N and \\\\n, naïve ünïcode ✓"
	const n = 300 // with the long tracebacks, several COPY chunks
	long := strings.Repeat("  File \"shop/charge.py\", line 42, in charge\n\tC:\\path\\to\\file\r\n", 20)
	letter := func(i int) dlq.DeadLetter {
		l := loadedLetter(i, failedAt)
		l.ErrorMessage = fmt.Sprintf("%s #%d", tricky, i)
		l.Traceback = long + tricky
		l.Args = []byte(`["tab\there", "back\\slash", "\\N"]`)
		l.Kwargs = []byte(`{"line": "a\nb", "nul": null}`)
		l.History[0].Message = tricky
		if i%2 == 0 {
			l.IdempotencyKey = &key
		}
		return l
	}
	if got, err := store.Letters.LoadDeadLetters(ctx, n, letter); err != nil || got != n {
		t.Fatalf("loaded %d of %d: %v", got, n, err)
	}
	var rows []struct {
		ErrorMessage   string  `db:"error_message"`
		Traceback      string  `db:"traceback"`
		Args           string  `db:"args"`
		Kwargs         string  `db:"kwargs"`
		History        string  `db:"history"`
		IdempotencyKey *string `db:"idempotency_key"`
		EnqueuedAt     time.Time
		FailedAt       time.Time `db:"failed_at"`
	}
	if err := db.Select(&rows, `SELECT error_message, traceback, args::text, kwargs::text, history->0->>'message' AS history,
		idempotency_key, enqueued_at AS "enqueuedat", failed_at FROM dead_letters ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d letters in the table, want %d", len(rows), n)
	}
	for i, r := range rows {
		want := letter(i)
		if r.ErrorMessage != want.ErrorMessage || r.Traceback != want.Traceback || r.History != tricky {
			t.Fatalf("letter %d's texts changed on the way:\n%q\n%q\n%q", i, r.ErrorMessage, r.Traceback, r.History)
		}
		if r.Args != `["tab\there", "back\\slash", "\\N"]` || r.Kwargs != `{"nul": null, "line": "a\nb"}` {
			t.Fatalf("letter %d's arguments changed on the way: %s %s", i, r.Args, r.Kwargs)
		}
		if (i%2 == 0) != (r.IdempotencyKey != nil) || (r.IdempotencyKey != nil && *r.IdempotencyKey != key) {
			t.Fatalf("letter %d's idempotency key: %v", i, r.IdempotencyKey)
		}
		if !r.FailedAt.Equal(want.FailedAt) || !r.EnqueuedAt.Equal(want.EnqueuedAt) {
			t.Fatalf("letter %d's times: %s, %s, want %s, %s", i, r.EnqueuedAt, r.FailedAt, want.EnqueuedAt, want.FailedAt)
		}
	}

	// Letter 250 of the next load is not JSON: the server refuses it when
	// its chunk arrives, and the whole load is gone.
	_, err := store.Letters.LoadDeadLetters(ctx, n, func(i int) dlq.DeadLetter {
		l := letter(i)
		if i == 250 {
			l.Args = []byte(`not json`)
		}
		return l
	})
	if err == nil || !strings.Contains(err.Error(), "json") {
		t.Fatalf("a letter with arguments that are not JSON: %v, want the server's refusal", err)
	}
	if got := count(t, db, `SELECT count(*) FROM dead_letter_records`); got != n {
		t.Fatalf("%d letters after the failed load, want the first load's %d", got, n)
	}
	storetest.AssertSummariesMatch(t, db)
}

// A load of settled letters writes them replayed or discarded without a
// pending row, and every summary counts them as an action would have; a
// letter in it that is still pending fails the whole load.
func TestLoadSettledDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	failedAt := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	acted, ana, why := failedAt.Add(time.Hour), "ana", "a test order"
	settledLetter := func(i int) dlq.DeadLetter {
		l := loadedLetter(i, failedAt)
		if i%3 == 0 {
			l.DiscardedAt, l.DiscardedBy, l.DiscardReason = &acted, &ana, &why
		} else {
			l.ReplayedAt, l.ReplayedBy = &acted, &ana
		}
		return l
	}
	// Pending letters first, as a seed mixes them.
	if n, err := store.Letters.LoadDeadLetters(ctx, 5, func(i int) dlq.DeadLetter { return loadedLetter(i, failedAt) }); err != nil || n != 5 {
		t.Fatalf("loaded %d pending letters: %v", n, err)
	}
	if n, err := store.Letters.LoadSettledDeadLetters(ctx, 9, settledLetter); err != nil || n != 9 {
		t.Fatalf("loaded %d settled letters: %v", n, err)
	}
	var byStatus []struct {
		Status  string `db:"status"`
		N       int    `db:"n"`
		Pending int    `db:"pending_rows"`
		Jobs    int    `db:"replay_jobs"`
	}
	if err := db.Select(&byStatus, `SELECT status, count(*) AS n, count(p.id) AS pending_rows, count(replay_job_id) AS replay_jobs
		FROM dead_letters d LEFT JOIN pending_dead_letters p USING (id) GROUP BY status ORDER BY status`); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]any{"{discarded 3 0 0}", "{pending 5 5 0}", "{replayed 6 0 6}"})
	got := make([]any, len(byStatus))
	for i, s := range byStatus {
		got[i] = fmt.Sprintf("{%s %d %d %d}", s.Status, s.N, s.Pending, s.Jobs)
	}
	if fmt.Sprint(got) != want {
		t.Errorf("letters by status (count, pending rows, replay jobs): %v, want %v", got, want)
	}
	storetest.AssertSummariesMatch(t, db)

	// The setting that spares the pending rows lasts only for its load: a
	// plain load after it writes pending rows again.
	if n, err := store.Letters.LoadDeadLetters(ctx, 2, func(i int) dlq.DeadLetter { return loadedLetter(i, failedAt) }); err != nil || n != 2 {
		t.Fatalf("loaded %d pending letters: %v", n, err)
	}
	if got := count(t, db, `SELECT count(*) FROM pending_dead_letters`); got != 7 {
		t.Fatalf("%d pending rows, want 7", got)
	}

	_, err := store.Letters.LoadSettledDeadLetters(ctx, 9, func(i int) dlq.DeadLetter {
		if i == 4 {
			return loadedLetter(i, failedAt)
		}
		return settledLetter(i)
	})
	var ve *dlq.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "letter 4") {
		t.Fatalf("a pending letter in a load of settled ones: %v, want a validation error naming it", err)
	}
	if got := count(t, db, `SELECT count(*) FROM dead_letter_records`); got != 16 {
		t.Fatalf("%d letters after the refused load, want 16", got)
	}
	storetest.AssertSummariesMatch(t, db)
}

package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
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
	n, err := store.LoadDeadLetters(ctx, 4, func(i int) dlq.DeadLetter {
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
	dlqtest.AssertSummariesMatch(t, db)
}

package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestPurgeHoldsGrowingGroups checks a retention purge never deletes the
// settled letters of a group that had a new letter in the last hour: it
// holds them, audited once, says so in the forecast, and deletes them
// only when an operator confirms (audited) or once the group has stopped
// growing.
func TestPurgeHoldsGrowingGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	now := time.Now()
	old := now.Add(-40 * 24 * time.Hour)
	// Three letters of each group failed 40 days ago and were discarded
	// then; the growing group has had a new letter ten minutes ago.
	for range 3 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "growing", FailedAt: old, Status: "discarded"})
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "mail.send", Fingerprint: "quiet", FailedAt: old, Status: "discarded"})
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "growing", FailedAt: now.Add(-10 * time.Minute)})
	retain := 30 * 24 * time.Hour

	f, err := store.Operations.PurgeForecast(ctx, now, retain, now)
	if err != nil || f.Removes != 3 || f.Capped || len(f.Holds) != 0 {
		t.Fatalf("forecast %+v (%v): want 3 to remove (the quiet group's), no hold yet", f, err)
	}
	n, holds, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: retain, Now: now, Actor: dlq.Actor{Name: "retention"}})
	if err != nil || n != 3 {
		t.Fatalf("purged %d (%v), want the quiet group's 3", n, err)
	}
	if len(holds) != 1 || holds[0].Fingerprint != "growing" || holds[0].Letters != 3 || holds[0].Task != "billing.charge" {
		t.Fatalf("holds %+v, want the growing group's 3 letters", holds)
	}
	// A second purge keeps the hold and does not audit it again.
	if n, holds, err = store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: retain, Now: now.Add(time.Minute), Actor: dlq.Actor{Name: "retention"}}); err != nil || n != 0 || len(holds) != 1 {
		t.Fatalf("second purge: %d purged, holds %+v (%v)", n, holds, err)
	}
	if c := count(t, db, `SELECT count(*) FROM audit_events WHERE action = 'purge_held'`); c != 1 {
		t.Errorf("%d purge_held entries, want 1: a hold is audited when first made", c)
	}
	if f, err = store.Operations.PurgeForecast(ctx, now, retain, now); err != nil || f.Removes != 0 || len(f.Holds) != 1 {
		t.Fatalf("forecast after the purge %+v (%v): want nothing to remove and the hold", f, err)
	}

	// An operator confirms: the group's letters go, audited, and the hold.
	n, err = store.Operations.ConfirmPurgeHold(ctx, "growing", dlq.Actor{Name: "olga"}, now)
	if err != nil || n != 3 {
		t.Fatalf("confirmed: %d purged (%v), want 3", n, err)
	}
	if c := count(t, db, `SELECT count(*) FROM dead_letters WHERE fingerprint = 'growing'`); c != 1 {
		t.Errorf("%d letters of the growing group left, want the pending one", c)
	}
	if c := count(t, db, `SELECT coalesce(sum((counts->>'purged')::int), 0) FROM audit_events WHERE action = 'purge_confirm' AND actor = 'olga'`); c != 3 {
		t.Errorf("olga's confirmation audited %d purged, want 3", c)
	}
	if _, err := store.Operations.ConfirmPurgeHold(ctx, "growing", dlq.Actor{Name: "olga"}, now); !errors.Is(err, dlq.ErrNotFound) {
		t.Errorf("confirming twice: %v, want not found", err)
	}

	// A hold lapses once the group is quiet: the next purge takes its
	// letters and drops the hold.
	for range 2 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "growing", FailedAt: old, Status: "replayed"})
	}
	if _, holds, err = store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: retain, Now: now, Actor: dlq.Actor{Name: "retention"}}); err != nil || len(holds) != 1 {
		t.Fatalf("held again: %+v (%v)", holds, err)
	}
	n, holds, err = store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: retain, Now: now.Add(2 * time.Hour), Actor: dlq.Actor{Name: "retention"}})
	if err != nil || n != 2 || len(holds) != 0 {
		t.Fatalf("two hours on: %d purged, holds %+v (%v); want the 2 and no hold", n, holds, err)
	}
	if c := count(t, db, `SELECT count(*) FROM purge_holds`); c != 0 {
		t.Errorf("%d holds left", c)
	}
	storetest.AssertSummariesMatch(t, db)
}

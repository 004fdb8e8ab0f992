package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// recordVersions is each letter's row version in dead_letter_records: its
// ctid and xmin change whenever the row is rewritten or locked.
func recordVersions(t *testing.T, db *storetest.DB) map[int64]string {
	t.Helper()
	var rows []struct {
		ID      int64  `db:"id"`
		Version string `db:"version"`
	}
	if err := db.Select(&rows, `SELECT id, ctid::text || '/' || xmin::text || '/' || xmax::text AS version FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Version
	}
	return out
}

// Replaying, discarding and restoring, one by one or in bulk, write the
// letter's outcome beside it and never rewrite (or lock) the letter's own
// wide row: that rewrite was most of a bulk action's cost (00101_letters.sql).
func TestActionsLeaveTheLetterRowAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 300)
	before := recordVersions(t, db)

	now := time.Now()
	if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[1], Actor: alice, Reason: "noise", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[2], Actor: alice, Reason: "noise", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: ids[2], Actor: alice, Now: now}); err != nil {
		t.Fatal(err)
	}
	for kind, sel := range map[dlq.OperationKind][]int64{dlq.OpReplay: ids[10:60], dlq.OpDiscard: ids[110:160]} {
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: kind, Actor: alice, Now: now, Reason: "bulk",
			Selection: dlq.Selection{IDs: sel}})
		if err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 7)
	}

	after := recordVersions(t, db)
	for id, v := range before {
		if after[id] != v {
			t.Fatalf("letter %d's row was written: %s, then %s", id, v, after[id])
		}
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'replayed'`); n != 51 {
		t.Fatalf("%d replayed letters, want 51", n)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`); n != 51 {
		t.Fatalf("%d discarded letters, want 51", n)
	}
	var restored dlq.DeadLetter
	if err := db.Get(&restored, `SELECT status FROM dead_letters WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if restored.Status != dlq.StatusPending {
		t.Fatalf("restored letter is %s, want pending", restored.Status)
	}
	storetest.AssertSummariesMatch(t, db)
}

// A single action that loses the race for a letter says what the winner
// made of it, not what the loser read before.
func TestSecondActionOnALetterConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 1)
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[0], Actor: alice, Reason: "noise", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: time.Now()})
	var se *dlq.StateError
	if !errors.As(err, &se) || se.Letter.Status != dlq.StatusDiscarded {
		t.Fatalf("replay of a discarded letter: %v, want a StateError naming it discarded", err)
	}
	if _, err := store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: ids[0], Actor: alice, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err = store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: ids[0], Actor: alice, Now: time.Now()})
	if !errors.As(err, &se) || se.Letter.Status != dlq.StatusPending {
		t.Fatalf("second restore: %v, want a StateError naming it pending", err)
	}
	if n := count(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d jobs enqueued by a refused replay", n)
	}
	storetest.AssertSummariesMatch(t, db)
}

// A purge deletes a settled letter with its outcome, and the job that
// replayed it and the letter of that replay's failure forget the link
// (neither jobs.replay_of nor the letters' replay_of has a foreign key:
// 00101_letters.sql).
func TestPurgeTakesTheOutcomeAndUnlinksTheReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 3)
	res, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// The replay failed again: its letter is pending, and stays.
	again := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "t.ok", ReplayOf: &ids[0]})
	// A letter replaying one that stays keeps its link.
	kept := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "t.ok", ReplayOf: &ids[2]})
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[1], Actor: alice, Reason: "noise", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	n, _, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: time.Hour, Actor: alice, Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("purged %d, want the 2 settled letters", n)
	}
	if left := count(t, db, `SELECT count(*) FROM dead_letter_outcomes`); left != 0 {
		t.Fatalf("%d outcomes left behind", left)
	}
	if left := count(t, db, `SELECT count(*) FROM dead_letters`); left != 3 {
		t.Fatalf("%d letters left, want the 3 pending ones", left)
	}
	if linked := count(t, db, `SELECT count(*) FROM jobs WHERE id = $1 AND replay_of IS NOT NULL`, res.JobID); linked != 0 {
		t.Fatal("the replay job still names its purged letter")
	}
	if linked := count(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replay_of IS NOT NULL`, again); linked != 0 {
		t.Fatal("the replay's letter still names its purged letter")
	}
	if linked := count(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replay_of = $2`, kept, ids[2]); linked != 1 {
		t.Fatal("a letter lost its link to a letter the purge kept")
	}
	storetest.AssertSummariesMatch(t, db)
}

// A selection's pending letters are counted, sampled and acted on from
// wherever its filter reads best (the pending table, or the letters' own
// index with a pending probe), and a selection of another status has none.
func TestSelectionsCountTheirPendingLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 30)
	storetest.Settle(t, db, storetest.Outcome{Status: "replayed"}, "id = ANY($1)", ids[:10])
	storetest.Settle(t, db, storetest.Outcome{Status: "discarded"}, "id = ANY($1)", ids[10:15])
	for _, c := range []struct {
		query          string
		matched, other int64
	}{
		{"", 15, 0},                                                             // pending by default: the pending table, newest first
		{"task=t.ok", 15, 0},                                                    // the task's index, probing pending rows
		{"status=all&task=t.ok", 15, 15},                                        // every letter of the task
		{"reason=exhausted", 15, 0},                                             // the pending table by reason
		{"task=t.ok&error_class=E", 15, 0},                                      // the error class's index
		{"status=replayed", 0, 10},                                              // none pending
		{"status=discarded&task=t.ok", 0, 5},                                    // none pending
		{"status=all&fingerprint=" + lettersGroup, 15, 15},                      // the group's index
		{"status=all&fingerprint=00000000000000ff," + lettersGroup, 15, 15},     // a walk per group
		{"status=pending&fingerprint=00000000000000ff", 0, 0},                   // nothing
		{"status=discarded&fingerprint=00000000000000ff," + lettersGroup, 0, 5}, // none pending
		{"status=pending&task=t.ok&queue=other", 0, 0},
	} {
		p, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: filterOf(t, c.query)}, 3)
		if err != nil {
			t.Fatalf("%q: %v", c.query, err)
		}
		if p.Matched != c.matched || p.Other != c.other {
			t.Errorf("%q: matched %d, other %d; want %d, %d", c.query, p.Matched, p.Other, c.matched, c.other)
		}
		for _, l := range p.Sample {
			if l.Status != dlq.StatusPending {
				t.Errorf("%q: the sample holds letter %d, %s", c.query, l.ID, l.Status)
			}
		}
	}
	// A discard of the replayed letters acts on none; one by task acts on
	// the pending ones only.
	for _, c := range []struct {
		query string
		done  int64
	}{{"status=replayed", 0}, {"task=t.ok", 15}} {
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
			Reason: "noise", Selection: dlq.Selection{Filter: filterOf(t, c.query)}})
		if err != nil {
			t.Fatal(err)
		}
		runToEnd(t, store, op.ID, 4)
		if op, _ = store.Operations.Operation(ctx, op.ID); op.Done != c.done {
			t.Errorf("%q: the discard acted on %d letters, want %d", c.query, op.Done, c.done)
		}
	}
	storetest.AssertSummariesMatch(t, db)
}

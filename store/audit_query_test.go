package store_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

func TestListAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 12)
	bob := dlq.Actor{Name: "bob"}
	t0 := time.Now().UTC().Add(-time.Hour)

	// Single actions on the first three letters, one each, a minute apart.
	if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[1], Actor: bob, Reason: "dup", Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: ids[1], Actor: bob, Now: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// A bulk replay of letters 4..12 (ids[3:]) links each letter to its start entry.
	op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: t0.Add(3 * time.Minute),
		Selection: dlq.Selection{IDs: ids[3:]}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		res, err := store.Operations.RunOperationBatch(ctx, op.ID, 4, t0.Add(4*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished || res.State != dlq.OpRunning {
			break
		}
	}
	// Its replays run, as a worker would run them; the operation then
	// settles, and its closing entry is written.
	if _, err := db.Exec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE state = 'available'`); err != nil {
		t.Fatal(err)
	}
	if op := follow(t, store, op.ID); op.State != dlq.OpDone {
		t.Fatalf("the bulk replay is %s once its replays ran, want done", op.State)
	}

	list := func(q string) []string {
		t.Helper()
		v, _ := url.ParseQuery(q)
		f, err := handlers.ParseAuditFilter(v, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		page, err := store.Audit.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range page.Entries {
			out = append(out, e.Action)
		}
		return out
	}

	t.Run("NewestFirst", func(t *testing.T) {
		want := []string{dlq.ActionBulkFinish, dlq.ActionBulkStart, dlq.ActionRestore, dlq.ActionDiscard, dlq.ActionReplay}
		if got := list(""); !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("ByActorAndAction", func(t *testing.T) {
		if got := list("actor=bob"); !slices.Equal(got, []string{dlq.ActionRestore, dlq.ActionDiscard}) {
			t.Fatalf("bob: %v", got)
		}
		if got := list("action=discard"); !slices.Equal(got, []string{dlq.ActionDiscard}) {
			t.Fatalf("discards: %v", got)
		}
	})
	t.Run("ByTime", func(t *testing.T) {
		since := t0.Add(30 * time.Second).Format(time.RFC3339Nano)
		until := t0.Add(150 * time.Second).Format(time.RFC3339Nano)
		got := list(url.Values{"since": {since}, "until": {until}}.Encode())
		if !slices.Equal(got, []string{dlq.ActionRestore, dlq.ActionDiscard}) {
			t.Fatalf("between: %v", got)
		}
	})
	t.Run("ByLetterFindsSingleAndBulkEntries", func(t *testing.T) {
		if got := list("dead_letter_id=" + itoa(ids[1])); !slices.Equal(got, []string{dlq.ActionRestore, dlq.ActionDiscard}) {
			t.Fatalf("letter 2: %v", got)
		}
		if got := list("dead_letter_id=" + itoa(ids[5])); !slices.Equal(got, []string{dlq.ActionBulkStart}) {
			t.Fatalf("letter 6, replayed in bulk: %v", got)
		}
		if got := list("dead_letter_id=999999"); len(got) != 0 {
			t.Fatalf("unknown letter: %v", got)
		}
	})
	t.Run("KeysetPagingVisitsEachOnce", func(t *testing.T) {
		f := dlq.AuditFilter{Limit: 2}
		var seen []int64
		for range 10 {
			page, err := store.Audit.ListAudit(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Entries {
				seen = append(seen, e.ID)
			}
			if page.Next == 0 {
				break
			}
			f.Before = page.Next
		}
		if len(seen) != 5 || !slices.IsSortedFunc(seen, func(a, b int64) int { return int(b - a) }) {
			t.Fatalf("paged ids %v: want 5, newest first, each once", seen)
		}
		var exported []int64
		if err := store.Audit.EachAuditEntry(ctx, dlq.AuditFilter{Limit: 1}, func(e dlq.AuditEntry) error {
			exported = append(exported, e.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(exported, seen) {
			t.Fatalf("export %v, list %v", exported, seen)
		}
	})
	t.Run("LettersOfAnEntry", func(t *testing.T) {
		start, err := store.Audit.GetAuditEntry(ctx, *op.AuditEventID)
		if err != nil {
			t.Fatal(err)
		}
		letters, total, err := store.Audit.AuditLetters(ctx, start.ID, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if total != 9 || len(letters) != 5 || letters[0].DeadLetterID != ids[3] || letters[0].Outcome != "replay" || letters[0].Status != dlq.StatusReplayed {
			t.Fatalf("bulk entry letters: total %d, %+v", total, letters)
		}
		rest, _, err := store.Audit.AuditLetters(ctx, start.ID, letters[4].DeadLetterID, 5)
		if err != nil || len(rest) != 4 || rest[3].DeadLetterID != ids[11] {
			t.Fatalf("second page: %+v %v", rest, err)
		}
		page, _ := store.Audit.ListAudit(ctx, dlq.AuditFilter{Action: dlq.ActionDiscard})
		one, total, err := store.Audit.AuditLetters(ctx, page.Entries[0].ID, 0, 5)
		if err != nil || total != 1 || len(one) != 1 || one[0].DeadLetterID != ids[1] {
			t.Fatalf("single entry letters: %d %+v %v", total, one, err)
		}
		if _, err := store.Audit.GetAuditEntry(ctx, 999999); !errors.Is(err, dlq.ErrNotFound) {
			t.Fatalf("missing entry: %v", err)
		}
	})
}

func TestOperationSkips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	all := insertLetters(t, db, 5)
	// An id that names nothing, below the bound: a letter purged since.
	gone, ids := all[0], all[1:]
	if _, err := db.Exec(`DELETE FROM dead_letter_records WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: ids[0], Actor: alice, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[1], Actor: alice, Reason: "x", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Two of four skipped, one id that names nothing (below the bound), one duplicate.
	sel := dlq.Selection{IDs: append([]int64{gone, ids[2]}, ids...)}
	op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(), Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	for {
		res, err := store.Operations.RunOperationBatch(ctx, op.ID, 100, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished || res.State == dlq.OpSettling {
			break
		}
	}
	op, _ = store.Operations.Operation(ctx, op.ID)
	got, err := store.Operations.OperationSkips(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if want := (dlq.SkipCounts{Replayed: 1, Discarded: 1, NotFound: 1}); got != want || op.Done != 2 {
		t.Fatalf("skips %+v (done %d), want %+v and 2 done", got, op.Done, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

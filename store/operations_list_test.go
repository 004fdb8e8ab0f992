package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/storetest"
)

var bob = dlq.Actor{Name: "Bob", RequestID: "req-2"}

// startOp starts a bulk operation over sel, bounded at the highest id that
// matches now.
func startOp(t *testing.T, store *storetest.Stores, kind dlq.OperationKind, who dlq.Actor, sel dlq.Selection) dlq.Operation {
	t.Helper()
	op, err := store.Operations.CreateOperation(context.Background(), dlq.OperationParams{Kind: kind, Actor: who, Reason: "test",
		Now: time.Now(), Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func cancelOp(t *testing.T, store *storetest.Stores, id int64) {
	t.Helper()
	if _, err := store.Operations.CancelOperation(context.Background(), dlq.ChangeOperationParams{ID: id, Actor: alice, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func opIDs(ops []dlq.Operation) []int64 {
	var out []int64
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

func TestListOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ids := insertLetters(t, db, 10)
	// 1 replay alice (done), 2 discard bob (open), 3 replay bob (cancelled),
	// 4 replay alice (open), 5 discard alice (cancelled).
	op1 := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{IDs: ids[:2]})
	runToEnd(t, store, op1.ID, 100)
	// Its replays run, as a worker would run them: then it is done.
	if _, err := db.Exec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE state = 'available'`); err != nil {
		t.Fatal(err)
	}
	if op := follow(t, store, op1.ID); op.State != dlq.OpDone {
		t.Fatalf("operation 1 is %s once its replays ran, want done", op.State)
	}
	op2 := startOp(t, store, dlq.OpDiscard, bob, dlq.Selection{IDs: ids[2:4]})
	op3 := startOp(t, store, dlq.OpReplay, bob, dlq.Selection{IDs: ids[4:6]})
	cancelOp(t, store, op3.ID)
	op4 := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{Filter: filterOf(t, "task=t.ok")}) // 8 pending: op1 replayed 2
	op5 := startOp(t, store, dlq.OpDiscard, alice, dlq.Selection{IDs: ids[8:]})
	cancelOp(t, store, op5.ID)

	list := func(t *testing.T, f dlq.OperationListFilter) dlq.OperationPage {
		t.Helper()
		page, err := store.Operations.ListOperations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	for _, c := range []struct {
		name string
		f    dlq.OperationListFilter
		want []int64
	}{
		{"AllNewestFirst", dlq.OperationListFilter{}, []int64{op5.ID, op4.ID, op3.ID, op2.ID, op1.ID}},
		{"OpenIsNotFinished", dlq.OperationListFilter{Phase: dlq.PhaseOpen}, []int64{op4.ID, op2.ID}},
		{"Finished", dlq.OperationListFilter{Phase: dlq.PhaseFinished}, []int64{op5.ID, op3.ID, op1.ID}},
		{"OneState", dlq.OperationListFilter{State: dlq.OpCancelled}, []int64{op5.ID, op3.ID}},
		{"Kind", dlq.OperationListFilter{Kind: dlq.OpDiscard}, []int64{op5.ID, op2.ID}},
		{"ActorInAnyCase", dlq.OperationListFilter{Actor: "bob"}, []int64{op3.ID, op2.ID}},
		{"Together", dlq.OperationListFilter{Actor: "ALICE", Kind: dlq.OpReplay, Phase: dlq.PhaseOpen}, []int64{op4.ID}},
		{"NothingMatches", dlq.OperationListFilter{Actor: "carol"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := list(t, c.f)
			if got := opIDs(page.Operations); !slices.Equal(got, c.want) || page.Next != 0 {
				t.Errorf("got %v next %d, want %v and no next page", got, page.Next, c.want)
			}
		})
	}

	t.Run("PagesWithAKeysetCursor", func(t *testing.T) {
		var seen []int64
		f := dlq.OperationListFilter{Limit: 2}
		for range 5 {
			page := list(t, f)
			seen = append(seen, opIDs(page.Operations)...)
			if page.Next == 0 {
				break
			}
			f.Before = page.Next
		}
		if want := []int64{op5.ID, op4.ID, op3.ID, op2.ID, op1.ID}; !slices.Equal(seen, want) {
			t.Errorf("pages of 2 gave %v, want %v", seen, want)
		}
		last := list(t, dlq.OperationListFilter{Limit: 2, Before: op2.ID})
		if got := opIDs(last.Operations); !slices.Equal(got, []int64{op1.ID}) || last.Next != 0 {
			t.Errorf("the last page: %v next %d", got, last.Next)
		}
		exact := list(t, dlq.OperationListFilter{Limit: 5})
		if exact.Next != 0 {
			t.Errorf("a page holding exactly the last operation says there is a next page (%d)", exact.Next)
		}
	})

	t.Run("FinishedAtIsSetExactlyWhenTheStateIsFinished", func(t *testing.T) {
		// The open-operation index and filters rely on it.
		for _, op := range list(t, dlq.OperationListFilter{}).Operations {
			if (op.FinishedAt != nil) != op.State.Finished() {
				t.Errorf("operation %d is %s with finished_at %v", op.ID, op.State, op.FinishedAt)
			}
		}
	})

	t.Run("InFlight", func(t *testing.T) {
		in, err := store.Operations.OperationsInFlight(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := opIDs(in.Operations); !slices.Equal(got, []int64{op4.ID}) || in.Open != 2 {
			t.Errorf("in flight %v of %d, want the newest open one (%d) of 2", got, in.Open, op4.ID)
		}
		if in.Operations[0].Actor != "alice" || in.Operations[0].Matched != 8 || in.Operations[0].Kind != dlq.OpReplay {
			t.Errorf("the banner's operation lacks what it shows: %+v", in.Operations[0])
		}
	})
}

// TestSelectionOverlaps: a confirmation learns how many of its letters an
// open operation already covers, for selections by ids, by filter and by
// error group, and never from finished operations or letters handled.
func TestSelectionOverlaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// 30 letters: 1-10 task t.ok / lettersGroup, 11-20 task t.other /
	// lettersGroup, 21-30 task t.ok / groupB.
	const groupB = "00000000000000fb"
	fixture := func(t *testing.T) (*storetest.Stores, *storetest.DB, []int64) {
		t.Helper()
		store, db := setup(t)
		ids := insertLetters(t, db, 30)
		// The letters are pending: their pending rows, which the
		// selections read, carry task and fingerprint too (00101_letters.sql).
		for _, table := range []string{"dead_letter_records", "pending_dead_letters"} {
			if _, err := db.Exec(`UPDATE `+table+` SET task = 't.other' WHERE id = ANY($1)`, pq.Array(ids[10:20])); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`UPDATE `+table+` SET fingerprint = $2 WHERE id = ANY($1)`, pq.Array(ids[20:]), groupB); err != nil {
				t.Fatal(err)
			}
		}
		return store, db, ids
	}
	overlaps := func(t *testing.T, store *storetest.Stores, sel dlq.Selection) map[int64]int64 {
		t.Helper()
		got, err := store.Operations.SelectionOverlaps(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]int64{}
		for _, o := range got {
			m[o.Operation.ID] = o.Letters
		}
		return m
	}
	check := func(t *testing.T, got, want map[int64]int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("overlaps %v, want %v", got, want)
			return
		}
		for id, n := range want {
			if got[id] != n {
				t.Errorf("overlaps %v, want %v", got, want)
				return
			}
		}
	}

	t.Run("IDsAgainstIDsFilterAndGroup", func(t *testing.T) {
		t.Parallel()
		store, _, ids := fixture(t)
		byIDs := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{IDs: ids[:8]})                                  // 1-8
		byFilter := startOp(t, store, dlq.OpReplay, bob, dlq.Selection{Filter: filterOf(t, "task=t.other")})          // 11-20
		byGroup := startOp(t, store, dlq.OpDiscard, alice, dlq.Selection{Filter: filterOf(t, "fingerprint="+groupB)}) // 21-30
		sel := dlq.Selection{IDs: append(slices.Clone(ids[5:13]), ids[25:27]...)}                                     // 6-13, 26-27
		check(t, overlaps(t, store, sel), map[int64]int64{byIDs.ID: 3, byFilter.ID: 3, byGroup.ID: 2})
		check(t, overlaps(t, store, dlq.Selection{IDs: ids[28:29]}), map[int64]int64{byGroup.ID: 1})
	})

	t.Run("FilterAndGroupSelections", func(t *testing.T) {
		t.Parallel()
		store, _, ids := fixture(t)
		byIDs := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{IDs: []int64{ids[0], ids[12], ids[22], ids[23]}})
		byFilter := startOp(t, store, dlq.OpReplay, bob, dlq.Selection{Filter: filterOf(t, "task=t.ok")}) // 1-10, 21-30
		// Every pending t.other letter: ids 11-20.
		check(t, overlaps(t, store, dlq.Selection{Filter: filterOf(t, "task=t.other")}), map[int64]int64{byIDs.ID: 1})
		// Group groupB: ids 21-30.
		check(t, overlaps(t, store, dlq.Selection{Filter: filterOf(t, "fingerprint="+groupB)}),
			map[int64]int64{byIDs.ID: 2, byFilter.ID: 10})
		// Group lettersGroup: ids 1-20.
		check(t, overlaps(t, store, dlq.Selection{Filter: filterOf(t, "fingerprint="+lettersGroup)}),
			map[int64]int64{byIDs.ID: 2, byFilter.ID: 10})
	})

	t.Run("BoundsOfBothSidesCount", func(t *testing.T) {
		t.Parallel()
		store, db, ids := fixture(t)
		byFilter := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{Filter: filterOf(t, "task=t.ok")}) // bound: id 30
		later := insertLetters(t, db, 5)                                                                    // t.ok too, after its bound
		check(t, overlaps(t, store, dlq.Selection{IDs: later}), map[int64]int64{})
		all := dlq.Selection{Filter: filterOf(t, "status=pending")}
		check(t, overlaps(t, store, all), map[int64]int64{byFilter.ID: 20})
		all.MaxID = ids[4] // this selection stops at id 5
		check(t, overlaps(t, store, all), map[int64]int64{byFilter.ID: 5})
	})

	t.Run("FinishedOperationsAndHandledLettersAreIgnored", func(t *testing.T) {
		t.Parallel()
		store, _, ids := fixture(t)
		cancelled := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{IDs: ids[:10]})
		cancelOp(t, store, cancelled.ID)
		done := startOp(t, store, dlq.OpReplay, alice, dlq.Selection{IDs: ids[10:12]})
		runToEnd(t, store, done.ID, 100)
		running := startOp(t, store, dlq.OpReplay, bob, dlq.Selection{Filter: filterOf(t, "fingerprint="+groupB)})
		if _, err := store.Operations.RunOperationBatch(ctx, running.ID, 4, time.Now()); err != nil { // replays 4 of its 10
			t.Fatal(err)
		}
		byIDs := startOp(t, store, dlq.OpDiscard, alice, dlq.Selection{IDs: ids[12:16]})
		if _, err := store.Operations.RunOperationBatch(ctx, byIDs.ID, 3, time.Now()); err != nil { // discards 3 of its 4
			t.Fatal(err)
		}
		check(t, overlaps(t, store, dlq.Selection{Filter: filterOf(t, "status=all")}), map[int64]int64{running.ID: 6, byIDs.ID: 1})
		check(t, overlaps(t, store, dlq.Selection{IDs: ids[:12]}), map[int64]int64{})
		check(t, overlaps(t, store, dlq.Selection{IDs: ids[:16]}), map[int64]int64{byIDs.ID: 1})
	})
}

// TestInFlightCostDoesNotGrowWithHistory measures the banner's query, which
// runs on every page: with 100,000 finished operations and 3 open ones it
// reads the partial index of open operations (00104_operations.sql) and a
// handful of blocks, not the history.
func TestInFlightCostDoesNotGrowWithHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	if _, err := db.Exec(`INSERT INTO operations (kind, state, actor, ids, max_id, matched, done_count, finished_at)
		SELECT 'replay', 'done', 'alice', '{1}', 1, 1, 1, now() FROM generate_series(1, 100000)`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		startOp(t, store, dlq.OpReplay, bob, dlq.Selection{IDs: []int64{1}})
	}
	if _, err := db.Exec(`ANALYZE operations`); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+operations.InFlightSQL, 3); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan bufferNode `json:"Plan"`
		Time float64    `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	p := plans[0]
	usesIndex := false
	var scanned float64
	p.Plan.walk(func(n bufferNode) {
		if n.RelationName == "operations" {
			usesIndex = usesIndex || n.IndexName == "operations_open_idx"
			scanned += (n.ActualRows + n.Removed) * n.Loops
		}
	})
	buffers := p.Plan.SharedHit + p.Plan.SharedRead
	t.Logf("in flight with 100,000 finished operations: %.3f ms, %v blocks, %v rows read", p.Time, buffers, scanned)
	if !usesIndex || scanned > 3 || buffers > 20 {
		t.Errorf("the banner's query reads the history: index %v, %v rows, %v blocks\n%s", usesIndex, scanned, buffers, raw)
	}
	in, err := store.Operations.OperationsInFlight(ctx, 3)
	if err != nil || len(in.Operations) != 3 || in.Open != 3 {
		t.Errorf("in flight: %+v, %v", in, err)
	}
}

package store_test

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
)

// A letter the worker writes gets its search row afterwards, from the
// indexer (00102_search.sql), not in the dead-lettering statement: until
// then search cannot find it by anything, masked or not, and says how many
// letters it cannot see yet; once indexed it is found by what the pages
// show and still not by what they hide.
func TestSearchIndexesNewLettersAfterwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Queue.EnqueueMany(ctx, []dlq.EnqueueParams{{Task: "billing.charge", MaxAttempts: 1,
		Kwargs: json.RawMessage(`{"order": "ord_needle", "password": "hunter2-secret"}`)}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := store.Queue.Claim(ctx, "w1", []string{"default"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claimed %d, err %v", len(jobs), err)
	}
	res, err := store.Queue.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: "billing.charge",
		Reason: dlq.ReasonPermanent, Attempt: dlq.Attempt{Attempt: 1, Class: "CardDeclined", Message: "card declined for ord_needle"}}})
	if err != nil || len(res) != 1 {
		t.Fatalf("dead-lettered %v, err %v", res, err)
	}
	id := res[0].LetterID

	search := func(q string) dlq.DeadLetterPage {
		t.Helper()
		f, err := handlers.ParseFilter(url.Values{"q": {q}, "status": {"all"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		page, err := store.Letters.ListDeadLetters(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	var rows int
	if err := db.Get(&rows, `SELECT count(*) FROM dead_letter_search`); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("the dead-lettering statement wrote %d search rows; want them left to the indexer", rows)
	}
	if p := search("ord_needle"); len(p.Letters) != 0 || p.NotYetSearchable != 1 {
		t.Fatalf("before indexing: found %d letters, %d not yet searchable; want 0 and 1", len(p.Letters), p.NotYetSearchable)
	}

	n, err := store.Letters.IndexSearch(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("indexed %d, err %v; want 1", n, err)
	}
	if p := search("ord_needle"); len(p.Letters) != 1 || p.Letters[0].ID != id || p.NotYetSearchable != 0 {
		t.Fatalf("after indexing: found %v, %d not yet searchable; want letter %d and 0", searchIDs(t, store, "ord_needle"), p.NotYetSearchable, id)
	}
	if got := searchIDs(t, store, "hunter2"); len(got) != 0 {
		t.Errorf("search found %v by a masked value", got)
	}
	if n, err := store.Letters.IndexSearch(ctx, 0); err != nil || n != 0 {
		t.Errorf("a second pass indexed %d, err %v; want nothing left", n, err)
	}
}

// The search queue holds each inserting statement's letters as one row
// (00102_search.sql). The indexer takes rows oldest first, splits the one
// that would overflow its batch, and locks only the rows it takes: a
// second indexer beside it finds the rest.
func TestSearchQueueTakesStatementsInPartsAndSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	failedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	for _, n := range []int{5, 3} {
		if got, err := store.Letters.LoadDeadLetters(ctx, n, func(i int) dlq.DeadLetter { return loadedLetter(i, failedAt) }); err != nil || got != n {
			t.Fatalf("loaded %d, err %v", got, err)
		}
	}
	queued := func() []int {
		t.Helper()
		var ns []int
		if err := db.Select(&ns, `SELECT n FROM dead_letter_search_queue ORDER BY first_id`); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	backlog := func() int64 {
		t.Helper()
		n, err := store.Letters.SearchBacklog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	index := func(q sqlx.QueryerContext, batch int) int64 {
		t.Helper()
		var n int64
		if err := sqlx.GetContext(ctx, q, &n, `SELECT dead_letter_search_index($1)`, batch); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := queued(); !slices.Equal(got, []int{5, 3}) || backlog() != 8 {
		t.Fatalf("queued %v (backlog %d); want one row per load, [5 3], and 8", got, backlog())
	}
	if n := index(db, 2); n != 2 || !slices.Equal(queued(), []int{3, 3}) || backlog() != 6 {
		t.Fatalf("a batch of 2 took %d and left %v; want 2 and [3 3]", n, queued())
	}

	// One indexer takes the first row whole inside its transaction; the
	// other, meanwhile, must find the second row, not nothing.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if n := index(tx, 3); n != 3 {
		t.Fatalf("the first indexer took %d; want 3", n)
	}
	if n := index(db, 100); n != 3 {
		t.Fatalf("beside it, a second indexer took %d; want the other row's 3", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := queued(); len(got) != 0 || backlog() != 0 {
		t.Fatalf("left queued %v; want nothing", got)
	}
	var rows, letters int
	if err := db.Get(&rows, `SELECT count(*) FROM dead_letter_search`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&letters, `SELECT count(*) FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	if rows != 8 || letters != 8 {
		t.Errorf("%d search rows for %d letters; want one each", rows, letters)
	}
}

package dlq_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// A letter the worker writes gets its search row afterwards, from the
// indexer (migration 00016), not in the dead-lettering statement: until
// then search cannot find it by anything, masked or not, and says how many
// letters it cannot see yet; once indexed it is found by what the pages
// show and still not by what they hide.
func TestSearchIndexesNewLettersAfterwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	if err := store.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.EnqueueMany(ctx, []dlq.EnqueueParams{{Task: "billing.charge", MaxAttempts: 1,
		Kwargs: json.RawMessage(`{"order": "ord_needle", "password": "hunter2-secret"}`)}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := store.Claim(ctx, "w1", []string{"default"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claimed %d, err %v", len(jobs), err)
	}
	res, err := store.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: "billing.charge",
		Reason: dlq.ReasonPermanent, Attempt: dlq.Attempt{Attempt: 1, Class: "CardDeclined", Message: "card declined for ord_needle"}}})
	if err != nil || len(res) != 1 {
		t.Fatalf("dead-lettered %v, err %v", res, err)
	}
	id := res[0].LetterID

	search := func(q string) dlq.DeadLetterPage {
		t.Helper()
		f, err := dlq.ParseFilter(url.Values{"q": {q}, "status": {"all"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		page, err := store.ListDeadLetters(ctx, f)
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

	n, err := store.IndexSearch(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("indexed %d, err %v; want 1", n, err)
	}
	if p := search("ord_needle"); len(p.Letters) != 1 || p.Letters[0].ID != id || p.NotYetSearchable != 0 {
		t.Fatalf("after indexing: found %v, %d not yet searchable; want letter %d and 0", searchIDs(t, store, "ord_needle"), p.NotYetSearchable, id)
	}
	if got := searchIDs(t, store, "hunter2"); len(got) != 0 {
		t.Errorf("search found %v by a masked value", got)
	}
	if n, err := store.IndexSearch(ctx, 0); err != nil || n != 0 {
		t.Errorf("a second pass indexed %d, err %v; want nothing left", n, err)
	}
}

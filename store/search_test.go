package store_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
)

// searchIDs lists the ids of the letters (any status) whose text holds q.
func searchIDs(t *testing.T, store *storetest.Stores, q string) []int64 {
	t.Helper()
	f, err := handlers.ParseFilter(url.Values{"q": {q}, "status": {"all"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	page, err := store.Letters.ListDeadLetters(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, l := range page.Letters {
		ids = append(ids, l.ID)
	}
	return ids
}

// The search text lives in a side table kept by triggers and the indexer
// (00102_search.sql): it must follow every way a letter comes
// and goes.
func TestSearchFollowsLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	now := time.Now()

	inMessage := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "card ch_needle declined"})
	inArgs := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Args: `["ch_needle"]`, Status: "replayed",
		FailedAt: now.Add(-48 * time.Hour)})
	inKwargs := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Kwargs: `{"charge": "ch_needle"}`})
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "unrelated"})

	if got := searchIDs(t, store, "CH_NEEDLE"); !sameIDs(got, inKwargs, inMessage, inArgs) {
		t.Fatalf("search found %v, want %v", got, []int64{inKwargs, inMessage, inArgs})
	}

	// A replay does not touch the search row, and search still finds it.
	if err := store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: inMessage, Actor: dlq.Actor{Name: "alice"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if got := searchIDs(t, store, "ch_needle"); !sameIDs(got, inKwargs, inMessage, inArgs) {
		t.Fatalf("after replay, search found %v", got)
	}

	// A purge deletes the settled letter's search row with it.
	// Two hours on: the letters failed just now, and a purge holds the
	// letters of a growing group.
	purged, _, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: 24 * time.Hour, Actor: dlq.Actor{Name: "ops"}, Now: now.Add(2 * time.Hour)})
	if err != nil || purged != 1 {
		t.Fatalf("purged %d, err %v", purged, err)
	}
	if got := searchIDs(t, store, "ch_needle"); !sameIDs(got, inKwargs, inMessage) {
		t.Fatalf("after purge, search found %v", got)
	}
	var orphans int
	if err := db.Get(&orphans, `SELECT count(*) FROM dead_letter_search s
		WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = s.dead_letter_id)`); err != nil {
		t.Fatal(err)
	}
	var missing int
	if err := db.Get(&missing, `SELECT count(*) FROM dead_letters d
		WHERE NOT EXISTS (SELECT 1 FROM dead_letter_search s WHERE s.dead_letter_id = d.id)`); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 || missing != 0 {
		t.Fatalf("%d search rows without a letter, %d letters without a search row", orphans, missing)
	}
}

func sameIDs(got []int64, want ...int64) bool { return slices.Equal(got, want) }

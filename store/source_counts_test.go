package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// pendingBySource reads SourcesPending as name → pending.
func pendingBySource(t *testing.T, store *storetest.Stores) map[string]int64 {
	t.Helper()
	srcs, err := store.Sources.SourcesPending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for i, s := range srcs {
		if i == 0 && s.Name != dlq.RedriveSource {
			t.Errorf("SourcesPending lists %s first, want Redrive's own queue", s.Name)
		}
		out[s.Name] = s.Pending
	}
	return out
}

// Each source's pending count is kept as its letters come and go: sent
// (once, however often), settled, purged once settled; the migration that
// keeps them counts the letters already there; and Sources, which counts
// the letters, agrees with SourcesPending.
func TestSourceCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP},
		{Name: "billing", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
	for source, n := range map[string]int{"legacy": 5, "billing": 2} {
		var batch []dlq.IngestLetter
		for i := range n {
			batch = append(batch, sentLetter(t, fmt.Sprintf("%s-%d", source, i), "connection to ledger-7 reset after 30s"))
		}
		for range 2 { // sent twice: the same letters
			if _, err := store.Sources.Ingest(ctx, source, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(step string, counts map[string]int64) {
		t.Helper()
		if got := pendingBySource(t, store); fmt.Sprint(got) != fmt.Sprint(counts) {
			t.Errorf("%s: pending %v, want %v", step, got, counts)
		}
		srcs, err := store.Sources.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			if s.Pending != counts[s.Name] {
				t.Errorf("%s: Sources counts %d pending in %s, want %d", step, s.Pending, s.Name, counts[s.Name])
			}
		}
		storetest.AssertSummariesMatch(t, db)
	}
	want("sent", map[string]int64{dlq.RedriveSource: 2, "legacy": 5, "billing": 2})

	// Settled as a bulk batch settles them: one statement, letters of
	// every source in it.
	storetest.Settle(t, db.DB, storetest.Outcome{Status: "discarded", At: time.Now().Add(-48 * time.Hour)},
		`id IN (SELECT id FROM dead_letter_records ORDER BY id LIMIT 1)
		 OR id IN (SELECT dead_letter_id FROM letter_sources WHERE external_id IN ('legacy-0', 'legacy-1', 'billing-0'))`)
	want("settled", map[string]int64{dlq.RedriveSource: 1, "legacy": 3, "billing": 1})

	// A purge takes settled letters only: nothing pending changes, and
	// the letters' counts go down with them.
	// Two hours on: the letters failed just now, and a purge holds the
	// letters of a growing group.
	purged, _, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: 24 * time.Hour, Now: time.Now().Add(2 * time.Hour), Actor: dlq.Actor{Name: "test"}})
	if err != nil || purged != 4 {
		t.Fatalf("purged %d, %v; want the 4 settled", purged, err)
	}
	want("purged", map[string]int64{dlq.RedriveSource: 1, "legacy": 3, "billing": 1})
	srcs, err := store.Sources.Sources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if srcs[0].Letters != 1 || srcs[1].Name != "billing" || srcs[1].Letters != 1 || srcs[2].Letters != 3 {
		t.Errorf("after the purge Sources reads %+v", srcs)
	}

	// Down and up again: the migration counts what is pending.
	p := migrationsOf(t, db)
	if _, err := p.DownTo(ctx, 111); err != nil {
		t.Fatalf("down to 111: %v", err)
	}
	if n := count(t, db, `SELECT count(*) FROM pg_class WHERE relname = 'source_counts'`); n != 0 {
		t.Fatal("source_counts left after its Down")
	}
	if _, err := postgres.Migrate(ctx, db.DB, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
	want("migrated again", map[string]int64{dlq.RedriveSource: 1, "legacy": 3, "billing": 1})
}

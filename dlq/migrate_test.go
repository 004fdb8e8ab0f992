package dlq_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
	"github.com/redrive/redrive/migrations"
)

// The baseline's Downs undo its Ups: all the way down, with letters in the
// tables, nothing of Redrive's is left but goose's own table; up again,
// letters are written, summarised and found as before.
func TestBaselineRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	dlqtest.InsertDeadLetter(t, db.DB, dlqtest.Letter{Message: "timeout talking to ledger-7"})
	dlqtest.InsertDeadLetter(t, db.DB, dlqtest.Letter{Message: "timeout talking to ledger-7", Status: "replayed"})

	p := migrationsOf(t, db)
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	var left []string
	if err := db.Select(&left, `
		SELECT c.relkind::text || ' ' || c.relname FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relname NOT LIKE 'goose_db_version%'
		UNION ALL
		SELECT 'function ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'extension ' || extname FROM pg_extension WHERE extname <> 'plpgsql'
		ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("after the Downs these are left: %v", left)
	}

	v, err := dlq.Migrate(ctx, db.DB, nil)
	if err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v < migrations.Baseline {
		t.Fatalf("up again at version %d, want the baseline's or later", v)
	}
	if err := store.Ready(ctx); err != nil {
		t.Fatalf("ready after the round trip: %v", err)
	}
	id := dlqtest.InsertDeadLetter(t, db.DB, dlqtest.Letter{Message: "timeout talking to ledger-7"})
	if got := searchIDs(t, store, "ledger-7"); !sameIDs(got, id) {
		t.Fatalf("search after a round trip found %v, want [%d]", got, id)
	}
	var pending int
	if err := db.Get(&pending, `SELECT n FROM dead_letter_counts WHERE status = 'pending'`); err != nil || pending != 1 {
		t.Fatalf("pending count %d, err %v; want 1", pending, err)
	}
}

package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/migrations"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// The baseline's Downs undo its Ups: all the way down, with letters in the
// tables, nothing of Redrive's is left but goose's own table; up again,
// letters are written, summarised and found as before.
func TestBaselineRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "timeout talking to ledger-7"})
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "timeout talking to ledger-7", Status: "replayed"})

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

	v, err := postgres.Migrate(ctx, db.DB, nil)
	if err != nil {
		t.Fatalf("up again: %v", err)
	}
	if v < migrations.Baseline {
		t.Fatalf("up again at version %d, want the baseline's or later", v)
	}
	if err := postgres.Ready(ctx, store.DB); err != nil {
		t.Fatalf("ready after the round trip: %v", err)
	}
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "timeout talking to ledger-7"})
	if got := searchIDs(t, store, "ledger-7"); !sameIDs(got, id) {
		t.Fatalf("search after a round trip found %v, want [%d]", got, id)
	}
	var pending int
	if err := db.Get(&pending, `SELECT n FROM dead_letter_counts WHERE status = 'pending'`); err != nil || pending != 1 {
		t.Fatalf("pending count %d, err %v; want 1", pending, err)
	}
}

// A database migrated by a build from before the baseline holds versions
// of the old history in goose_db_version: Migrate changes nothing and says
// so, and Ready reports it, instead of goose taking those versions for the
// baseline's or creating every table again.
func TestMigrateRefusesTheHistoryBeforeTheBaseline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	// What the last build before the baseline left: versions 1 to 43.
	db.MustExec(`DELETE FROM goose_db_version WHERE version_id >= $1`, migrations.Baseline)
	db.MustExec(`INSERT INTO goose_db_version (version_id, is_applied) SELECT v, true FROM generate_series(1, 43) v`)

	_, err := postgres.Migrate(ctx, db.DB, nil)
	if !errors.Is(err, postgres.ErrSchemaBeforeBaseline) || !strings.Contains(err.Error(), "nothing migrated") {
		t.Fatalf("migrate: %v, want ErrSchemaBeforeBaseline and nothing migrated", err)
	}
	var newer int
	if err := db.Get(&newer, `SELECT count(*) FROM goose_db_version WHERE version_id >= $1`, migrations.Baseline); err != nil || newer != 0 {
		t.Fatalf("%d baseline versions recorded (err %v); want none", newer, err)
	}
	if err := postgres.Ready(ctx, db.DB); !errors.Is(err, postgres.ErrSchemaBeforeBaseline) {
		t.Fatalf("ready: %v, want ErrSchemaBeforeBaseline", err)
	}

	// A database of the baseline is not mistaken for one: goose's own row
	// of version 0 is not the history.
	fresh := storetest.NewDB(t)
	if _, err := postgres.Migrate(ctx, fresh.DB, nil); err != nil {
		t.Fatalf("migrate a baseline database: %v", err)
	}
}

// Going back below River as a source is refused while a River source is
// configured: its letters would pass for Redrive's own, and a replay would
// enqueue them into Redrive's queue.
func TestRiverSourceDownRefusedWhileConfigured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "orders", Kind: dlq.SourceKindRiver}}); err != nil {
		t.Fatal(err)
	}
	p := migrationsOf(t, db)
	if _, err := p.DownTo(ctx, 109); err == nil || !strings.Contains(err.Error(), "a River source is configured") {
		t.Fatalf("down below River as a source: %v, want it refused", err)
	}
	if _, err := db.Exec(`DELETE FROM sources WHERE kind = 'river'`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 109); err != nil {
		t.Fatalf("down once no River source is left: %v", err)
	}
	if _, err := postgres.Migrate(ctx, db.DB, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

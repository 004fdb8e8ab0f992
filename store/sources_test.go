package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// sentLetter is a failure of another system, normalised as the API does.
func sentLetter(t *testing.T, id, message string) dlq.IngestLetter {
	t.Helper()
	l, err := dlq.IngestLetter{ExternalID: id, Task: "billing.charge", Queue: "payments", Args: []byte(`[7]`),
		ErrorClass: "ConnectionError", Message: message, Traceback: "Traceback (most recent call last):\n  ...",
		Attempts: 3, MaxAttempts: 3, FailedAt: time.Now().Add(-time.Minute)}.Normalise(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Letters from another system become letters like Redrive's own: pending,
// grouped by their failure (the same failure of two tasks' ids is one
// group), counted, and each written once however often it is sent.
func TestIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	batch := []dlq.IngestLetter{
		sentLetter(t, "task-1", "connection to ledger-7 reset after 30s"),
		sentLetter(t, "task-2", "connection to ledger-9 reset after 12s"),
		sentLetter(t, "task-1", "connection to ledger-7 reset after 30s"), // twice in one batch
	}
	got, err := store.Sources.Ingest(ctx, "legacy", batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Created || !got[1].Created || got[2].Created || got[2].ID != got[0].ID {
		t.Fatalf("first send: %+v; want two new letters, the repeat the first's", got)
	}
	again, err := store.Sources.Ingest(ctx, "legacy", batch[:2])
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Created || again[1].Created || again[0].ID != got[0].ID || again[1].ID != got[1].ID {
		t.Fatalf("sent again: %+v; want the same letters, none new", again)
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 2 {
		t.Fatalf("%d pending letters, want 2", n)
	}
	if n := count(t, db, `SELECT count(DISTINCT fingerprint) FROM dead_letter_records`); n != 1 {
		t.Errorf("the same failure with other hosts and times made %d groups, want 1", n)
	}
	d, err := store.Letters.GetDeadLetter(ctx, got[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Task != "billing.charge" || d.Queue != "payments" || d.Reason != dlq.ReasonExhausted || len(d.History) != 0 ||
		d.ErrorMessage != "connection to ledger-9 reset after 12s" {
		t.Errorf("the letter reads back as %+v", d.DeadLetter)
	}
	srcs, err := store.Sources.Sources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 || srcs[0].Name != dlq.RedriveSource || srcs[1].Imported != 2 || srcs[1].LastImportAt == nil {
		t.Errorf("sources %+v; want redrive first, then legacy with 2 imported", srcs)
	}
}

// A letter for a source nobody configured, or for Redrive's own queue, is
// refused with the field named, and nothing is written.
func TestIngestRefusesOtherSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	for _, source := range []string{"nobody", dlq.RedriveSource} {
		_, err := store.Sources.Ingest(ctx, source, []dlq.IngestLetter{sentLetter(t, "x", "boom")})
		var ve *dlq.ValidationError
		if !errors.As(err, &ve) || ve.Fields["source"] == "" {
			t.Errorf("%s: %v; want a problem with the source", source, err)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM dead_letter_records`); n != 0 {
		t.Fatalf("%d letters written", n)
	}
	// A source configured again under another kind is refused.
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE sources SET kind = 'redrive' WHERE name = 'legacy'`); err != nil {
		t.Fatal(err)
	}
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); !errors.Is(err, dlq.ErrConflict) {
		t.Errorf("configured as another kind: %v, want a conflict", err)
	}
}

// A batch of a thousand letters is one statement: its letters are written
// together, and a purge of them takes their identities along.
func TestIngestBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	batch := make([]dlq.IngestLetter, dlq.MaxIngestBatch)
	for i := range batch {
		batch[i] = sentLetter(t, fmt.Sprintf("task-%d", i), fmt.Sprintf("timeout after %dms", i))
	}
	got, err := store.Sources.Ingest(ctx, "legacy", batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if !r.Created || r.ExternalID != batch[i].ExternalID {
			t.Fatalf("letter %d: %+v", i, r)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM letter_sources WHERE source = 'legacy'`); n != dlq.MaxIngestBatch {
		t.Fatalf("%d identities, want %d", n, dlq.MaxIngestBatch)
	}
	if _, err := db.Exec(`DELETE FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM letter_sources`); n != 0 {
		t.Errorf("%d identities outlived their letters", n)
	}
}

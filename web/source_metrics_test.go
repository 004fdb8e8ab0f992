package web

import (
	"context"
	"log/slog"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// The source metrics, read from the sources room: letters brought in by
// each source other than Redrive's own, and for River when it was last read
// to the end and whether its import is failing.
func TestSourceCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	endpoint := "https://billing.internal/replay"
	if err := stores.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP},
		{Name: "orders", Kind: dlq.SourceKindRiver}, {Name: "shop", Kind: dlq.SourceKindRiver},
		{Name: "billing", Kind: dlq.SourceKindHTTP, ReplayURL: &endpoint}}); err != nil {
		t.Fatal(err)
	}
	// Two replays wait for billing's endpoint, one was sent.
	letter := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "invoice.charge"})
	if _, err := db.Exec(`INSERT INTO source_replays (dead_letter_id, source, external_id, state, run_at)
		VALUES ($1, 'billing', 'a', 'waiting', now()), ($1, 'billing', 'b', 'waiting', now() + interval '1 minute'),
		       ($1, 'billing', 'c', 'sent', now())`, letter); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE sources SET imported = 12 WHERE name = 'orders';
		UPDATE sources SET imported = 3 WHERE name = 'legacy'`); err != nil {
		t.Fatal(err)
	}
	if err := stores.Sources.ImportChecked(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := stores.Sources.ImportFailed(ctx, "shop", "river source shop: list discarded jobs: connection refused"); err != nil {
		t.Fatal(err)
	}
	got := gather(t, newSourceCollector(stores.Sources, slog.New(slog.DiscardHandler)))
	want := map[string]float64{
		"redrive_source_letters_imported_total,kind=http,source=legacy":  3,
		"redrive_source_letters_imported_total,kind=river,source=orders": 12,
		"redrive_source_letters_imported_total,kind=river,source=shop":   0,
		"redrive_source_import_failing,source=orders":                    0,
		"redrive_source_import_failing,source=shop":                      1,
		"redrive_source_replays_waiting,source=billing":                  2,
		"redrive_source_replays_waiting,source=orders":                   0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if age, ok := got["redrive_source_check_age_seconds,source=orders"]; !ok || age < 0 || age > 60 {
		t.Errorf("orders' check age %v (present %v), want a few seconds", age, ok)
	}
	if _, ok := got["redrive_source_check_age_seconds,source=shop"]; ok {
		t.Error("a source never read to the end has a check age")
	}
	for k := range got {
		if k == "redrive_source_letters_imported_total,kind=redrive,source=redrive" {
			t.Error("Redrive's own queue is exported as a source")
		}
		if k == "redrive_source_replays_waiting,source=legacy" {
			t.Error("a source that cannot replay has replays waiting")
		}
	}
}

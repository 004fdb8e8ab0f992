package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// With letters from two other systems beside Redrive's own, an admin sees
// on the overview each source's pending letters and health, follows one
// source's count to the list of its letters, and a failing River import to
// the sources page.
func TestOverviewPendingBySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := overviewFixture(t)
	store := storetest.NewStores(db.DB)
	must(t, store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}, {Name: "shop", Kind: dlq.SourceKindRiver}}))
	letter := func(id, task, class, message string) dlq.IngestLetter {
		l, err := dlq.IngestLetter{ExternalID: id, Task: task, Queue: "default", ErrorClass: class, Message: message,
			Attempts: 3, MaxAttempts: 3, FailedAt: time.Now().Add(-time.Hour)}.Normalise(time.Now())
		must(t, err)
		return l
	}
	var sent, imported []dlq.IngestLetter
	for i := range 4 {
		sent = append(sent, letter(fmt.Sprintf("celery-%d", i), "invoices.render", "TemplateNotFound", "invoice_v2.html not found"))
	}
	for i := range 2 {
		imported = append(imported, letter(fmt.Sprintf("%d/1", 500+i), "orders.ship", "TimeoutError", "carrier API timed out"))
	}
	_, err := store.Sources.Ingest(ctx, "legacy", sent)
	must(t, err)
	_, err = store.Sources.Import(ctx, "shop", imported, "", "c1")
	must(t, err)
	must(t, store.Sources.ImportChecked(ctx, "shop"))
	must(t, store.Sources.ImportFailed(ctx, "shop", "river source shop: list discarded jobs: dial tcp 10.0.3.7:5432: connection refused"))

	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleAdmin)
	_, err = page.Goto(base + "/")
	must(t, err)
	panel := byTestID(page, "overview-sources")
	must(t, expect.Locator(panel.Locator(`tr[data-testid="source-row"]`)).ToHaveCount(3))
	for name, want := range map[string]string{dlq.RedriveSource: "3", "legacy": "4", "shop": "2"} {
		must(t, expect.Locator(panel.Locator(fmt.Sprintf(`tr[data-source=%q]`, name)).GetByTestId("source-pending")).ToHaveText(want))
	}
	must(t, expect.Locator(panel.Locator(`tr[data-source="shop"]`).GetByTestId("source-error")).ToContainText("connection refused"))
	screenshot(t, page, "overview-sources")

	must(t, panel.Locator(`tr[data-source="legacy"]`).GetByTestId("source-pending").Click())
	must(t, expect.Locator(byTestID(page, "letter-count")).ToContainText("4 pending letters match"))

	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, panel.Locator(`tr[data-source="shop"]`).GetByTestId("source-health-link").Click())
	must(t, expect.Locator(page.Locator(`table[data-testid="sources"] tr[data-source="shop"]`).GetByTestId("source-error")).ToContainText("connection refused"))
}

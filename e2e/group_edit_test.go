package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// fileShipment dead-letters a job of orders.ship rejected by carrier, as
// a worker that has read every change to the groups does, and returns the
// letter's group.
func fileShipment(t *testing.T, db *storetest.DB, carrier string) string {
	t.Helper()
	ctx := context.Background()
	store := storetest.NewStores(db.DB)
	must(t, store.Queue.RegisterTasks(ctx, []string{"orders.ship"}))
	_, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "orders.ship", Queue: "shipping", MaxAttempts: 1})
	must(t, err)
	jobs, err := store.Queue.Claim(ctx, "w1", []string{"shipping"}, 1, time.Minute)
	must(t, err)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	res, err := store.Queue.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: "orders.ship",
		Reason: dlq.ReasonPermanent, Attempt: dlq.Attempt{Attempt: 1, At: time.Now(), Class: "CarrierError",
			Message: "shipment rejected by carrier " + carrier + ": address not verified", Outcome: dlq.OutcomeDead}}})
	must(t, err)
	var fp string
	must(t, db.Get(&fp, `SELECT fingerprint FROM dead_letter_records WHERE id = $1`, res[0].LetterID))
	return fp
}

// TestGroupEditMergeThenSplit: an operator merges two groups of one
// failure from the younger one's page (the older keeps its id, its
// template widens), then splits the merged group by the carrier, from the
// same page, and sees the parts.
func TestGroupEditMergeThenSplit(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var dhl, ups string
	for _, c := range []string{"dhl", "ups", "dhl", "ups", "dhl"} {
		if fp := fileShipment(t, db, c); c == "dhl" {
			dhl = fp
		} else {
			ups = fp
		}
	}
	if dhl == ups {
		t.Fatalf("two carriers are one group before the merge")
	}
	base := startServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/groups/" + ups + "/edit")
	must(t, err)
	row := page.Locator(`[data-testid="merge-row"][data-fingerprint="` + dhl + `"]`)
	must(t, expect.Locator(row).ToContainText("carrier dhl"))
	must(t, row.GetByRole("checkbox").Check())
	form := page.Locator(`[data-testid="merge-form"]`)
	must(t, form.GetByLabel("Why (required: the audit trail keeps it)").Fill("One carrier outage, two groups"))
	must(t, form.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Merge the ticked groups with this one"}).Click())

	// The older group kept its id; the younger is listed to split off.
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/groups/`+dhl+`/edit\?`)))
	must(t, expect.Locator(page.Locator(".alert.ok")).ToContainText("Merged 1 group into this one"))
	must(t, expect.Locator(page.Locator(`[data-testid="template-variable"]`)).ToHaveCount(1))
	must(t, expect.Locator(page.Locator(`[data-testid="unmerge-row"][data-fingerprint="`+ups+`"]`)).ToBeVisible())
	must(t, expect.Locator(page.Locator(`[data-testid="edit-total"]`)).ToHaveText("5"))

	// A third carrier arrives and joins the widened template.
	if fp := fileShipment(t, db, "fedex"); fp != dhl {
		t.Fatalf("a new carrier went to %s, want the merged group %s", fp, dhl)
	}
	_, err = page.Reload()
	must(t, err)
	words := page.Locator(`[data-testid="split-variable"] [data-testid="split-word"]`)
	must(t, expect.Locator(words).ToHaveCount(3))
	must(t, expect.Locator(words.First()).ToContainText("dhl"))
	must(t, expect.Locator(words.First()).ToContainText("keeps this group"))
	screenshot(t, page, "group-edit")

	split := page.Locator(`[data-testid="split-form"]`)
	must(t, split.GetByLabel("Why (required: the audit trail keeps it)").Fill("Each carrier rejects for its own reason"))
	must(t, split.GetByRole("button").Click())
	must(t, expect.Locator(page.Locator(".alert.ok")).ToContainText("Split this group in 3"))
	must(t, expect.Locator(page.Locator(`[data-testid="split-standing"] li`)).ToHaveCount(3))
	// The parts are groups of the task to merge back with.
	must(t, expect.Locator(page.Locator(`[data-testid="merge-row"]`)).ToHaveCount(2))
	must(t, expect.Locator(page.Locator(`[data-testid="edit-total"]`)).ToHaveText("3"))
	screenshot(t, page, "group-edit-after-split")

	var audited int
	must(t, db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action IN ('group_merge', 'group_split') AND actor = 'olga'`))
	if audited != 2 {
		t.Errorf("%d audit entries by olga, want the merge and the split", audited)
	}
}

package e2e

import (
	"context"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestPauseTaskFromItsGroup is the on-call move: from the failing group,
// pause its task in two clicks with a reason and an expiry, see the banner
// on every page, then resume.
func TestPauseTaskFromItsGroup(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	actionLetters(t, db, 3, "billing.charge")
	store := storetest.NewStores(db.DB)
	must(t, store.Queue.RegisterTasks(context.Background(), []string{"billing.charge"}))
	for range 4 {
		_, err := store.Queue.Enqueue(context.Background(), dlq.EnqueueParams{Task: "billing.charge", Queue: "default", MaxAttempts: 3})
		must(t, err)
	}
	base := startServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(base + "/groups")
	must(t, err)

	// Click one: the group's "Pause task".
	row := page.Locator(`[data-testid="group-row"]`).First()
	must(t, row.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Pause task"}).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/pauses/new?task=billing.charge"))
	must(t, expect.Locator(page.Locator(`[data-testid="pause-waiting"]`)).ToContainText("4 jobs"))
	must(t, page.GetByLabel("Why").Fill("Payment provider is down (incident #4711)"))
	_, err = page.GetByLabel("For").SelectOption(playwright.SelectOptionValues{Values: &[]string{"30m"}})
	must(t, err)
	screenshot(t, page, "pause-form")
	// Click two: pause.
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Pause task billing.charge"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Paused task billing.charge"))

	// Another page: the banner names what, who, why and until when.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	banner := page.Locator(`[data-testid="pause-banner"]`)
	must(t, expect.Locator(banner).ToContainText("billing.charge"))
	must(t, expect.Locator(banner.Locator(`[data-testid="pause-by"]`)).ToHaveText("olga"))
	must(t, expect.Locator(banner.Locator(`[data-testid="pause-reason"]`)).ToHaveText("Payment provider is down (incident #4711)"))
	must(t, expect.Locator(banner.Locator(`[data-testid="pause-until"]`)).ToContainText("UTC"))
	must(t, expect.Locator(banner).ToContainText("in 30 min"))
	screenshot(t, page, "pause-banner")

	// The overview shows the jobs waiting behind it.
	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="overview-pause-waiting"]`)).ToHaveText("4 waiting"))

	must(t, banner.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Resume task"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Resumed task billing.charge"))
	must(t, expect.Locator(page.Locator(`[data-testid="pause-banner"]`)).ToHaveCount(0))
	var entries int
	must(t, db.Get(&entries, `SELECT count(*) FROM audit_events WHERE action IN ('pause', 'resume')`))
	if entries != 2 {
		t.Fatalf("%d audit entries, want a pause and a resume", entries)
	}
}

package e2e

import (
	"context"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestThrottleFromThePausesPage is "slow down" instead of "stop": from the
// pauses page, throttle a task to two running at once with a reason and an
// expiry, see the banner on another page, change it from the banner to
// add a start rate, and lift it from the pauses page.
func TestThrottleFromThePausesPage(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	actionLetters(t, db, 3, "billing.charge")
	store := storetest.NewStores(db.DB)
	must(t, store.Queue.RegisterTasks(context.Background(), []string{"billing.charge"}))
	for range 5 {
		_, err := store.Queue.Enqueue(context.Background(), dlq.EnqueueParams{Task: "billing.charge", Queue: "default", MaxAttempts: 3})
		must(t, err)
	}
	base := startServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(base + "/pauses")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="no-throttles"]`)).ToBeVisible())

	form := page.Locator(`[data-testid="throttle-form"]`)
	// A throttle without a limit is refused in words, and nothing is set.
	must(t, form.Locator(`[data-testid="throttle-name"]`).Fill("billing.charge"))
	must(t, form.Locator(`[data-testid="throttle-reason-input"]`).Fill("Provider rate-limits us (incident #4712)"))
	must(t, form.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Throttle"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="throttle-problem"]`).First()).ToContainText("give a limit"))
	form = page.Locator(`[data-testid="throttle-form"]`)
	must(t, form.Locator(`[data-testid="throttle-max-running"]`).Fill("2"))
	_, err = form.Locator(`[data-testid="throttle-for"]`).SelectOption(playwright.SelectOptionValues{Values: &[]string{"30m"}})
	must(t, err)
	screenshot(t, page, "throttle-form")
	must(t, form.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Throttle"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Throttled task billing.charge to at most 2 running at once"))
	row := page.Locator(`[data-testid="throttle-row"]`).First()
	must(t, expect.Locator(row.Locator(`[data-testid="throttle-waiting-count"]`)).ToHaveText("5"))
	screenshot(t, page, "throttle-pauses-page")

	// Another page: the banner names what, the limits, who, why and until when.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	banner := page.Locator(`[data-testid="throttle-banner"]`)
	must(t, expect.Locator(banner.Locator(`[data-testid="throttle-limits"]`)).ToHaveText("at most 2 running at once"))
	must(t, expect.Locator(banner.Locator(`[data-testid="throttle-by"]`)).ToHaveText("olga"))
	must(t, expect.Locator(banner.Locator(`[data-testid="throttle-reason"]`)).ToHaveText("Provider rate-limits us (incident #4712)"))
	must(t, expect.Locator(banner).ToContainText("in 30 min"))
	screenshot(t, page, "throttle-banner")

	// Change it from the banner: the form comes filled in; add a rate.
	must(t, banner.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Change"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="throttle-max-running"]`)).ToHaveValue("2"))
	must(t, page.Locator(`[data-testid="throttle-max-per-second"]`).Fill("0.5"))
	screenshot(t, page, "throttle-change")
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Change the throttle"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("at most 2 running at once and 0.5 starts a second"))

	must(t, page.Locator(`[data-testid="throttle-row-lift"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Lifted the throttle of task billing.charge"))
	must(t, expect.Locator(page.Locator(`[data-testid="throttle-banner"]`)).ToHaveCount(0))
	must(t, expect.Locator(page.Locator(`[data-testid="throttle-row"]`).First()).ToContainText("lifted by olga"))
	var actions []string
	must(t, db.Select(&actions, `SELECT action FROM audit_events WHERE action LIKE 'throttle%' ORDER BY id`))
	if len(actions) != 3 {
		t.Fatalf("audit entries %v, want the throttle, its change and its lift", actions)
	}
}

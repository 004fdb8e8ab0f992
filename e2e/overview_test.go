package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// overviewFixture: 5 dead letters (3 pending, 1 replayed, 1 discarded) in
// two groups, a few jobs and two workers, one of them stale.
func overviewFixture(t *testing.T) *storetest.DB {
	t.Helper()
	ctx := context.Background()
	db := storetest.NewDB(t)
	now := time.Now().UTC()
	for i, l := range []storetest.Letter{
		{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined", FailedAt: now.Add(-10 * time.Minute)},
		{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined", FailedAt: now.Add(-2 * time.Hour)},
		{Task: "mail.send", Queue: "email", ErrorClass: "SMTPError", Message: "mailbox full", FailedAt: now.Add(-26 * time.Hour)},
		{Task: "mail.send", Queue: "email", ErrorClass: "SMTPError", Message: "mailbox full", FailedAt: now.Add(-3 * 24 * time.Hour), Status: "replayed"},
		{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined", FailedAt: now.Add(-5 * 24 * time.Hour), Status: "discarded"},
	} {
		l.ReplayJobID = int64(900 + i)
		storetest.InsertDeadLetter(t, db.DB, l)
	}
	_, err := db.ExecContext(ctx, `
		INSERT INTO jobs (queue, task, state, attempt, run_at, last_error)
		SELECT 'default', 'billing.charge', CASE WHEN g <= 4 THEN 'available' ELSE 'retrying' END,
			CASE WHEN g <= 4 THEN 0 ELSE 2 END, now() + interval '40 seconds', CASE WHEN g > 4 THEN 'TimeoutError: upstream' END
		FROM generate_series(1, 6) g;
		INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, in_flight, heartbeat_at) VALUES
			('worker-7f3a', 'ip-10-0-1-17', 4121, 'v1.4.2', '{default,email}', '{billing.charge,mail.send}', 8, 2, now()),
			('worker-old1', 'ip-10-0-1-18', 977, 'v1.4.1', '{default}', '{billing.charge}', 4, 0, now() - interval '10 minutes')`)
	must(t, err)
	return db
}

func TestOverviewCountsAndAutoRefresh(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)

	_, err := page.Goto(base + "/")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("count-pending")).ToHaveText("3"))
	must(t, expect.Locator(page.GetByTestId("count-replayed")).ToHaveText("1"))
	must(t, expect.Locator(page.GetByTestId("count-discarded")).ToHaveText("1"))
	must(t, expect.Locator(page.GetByTestId("workers-stale")).ToHaveText("1 stale"))
	must(t, expect.Locator(page.GetByTestId("top-group")).ToHaveCount(2))
	must(t, expect.Locator(page.GetByTestId("inflow-hourly-bar")).ToHaveCount(24))
	screenshot(t, page, "overview")

	// A new letter arrives; within one refresh the page shows it, without
	// a reload (the marker set on the window survives only without one).
	_, err = page.Evaluate(`() => { window.__noReload = true }`)
	must(t, err)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined"})
	must(t, expect.Locator(page.GetByTestId("count-pending")).ToHaveText("4", playwright.LocatorAssertionsToHaveTextOptions{
		Timeout: playwright.Float(12_000),
	}))
	still, err := page.Evaluate(`() => window.__noReload === true`)
	must(t, err)
	if still != true {
		t.Fatal("the page reloaded to show the new letter")
	}

	// The pending card opens the list of pending letters.
	must(t, page.GetByTestId("stat-pending").Click())
	must(t, expect.Page(page).ToHaveURL(base+"/dead-letters?status=pending"))
}

func TestOverviewLooks(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)

	for _, v := range []struct {
		name   string
		scheme *playwright.ColorScheme
		width  int
	}{
		{"overview-dark", playwright.ColorSchemeDark, 1280},
		{"overview-phone", playwright.ColorSchemeLight, 390},
	} {
		page := newPageWith(t, playwright.BrowserNewContextOptions{
			ColorScheme: v.scheme,
			Viewport:    &playwright.Size{Width: v.width, Height: 900},
		})
		signIn(t, page, base, db, dlq.RoleViewer)
		_, err := page.Goto(base + "/")
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("count-pending")).ToHaveText("3"))
		// Nothing may stick out sideways on a phone.
		wide, err := page.Evaluate(`() => document.documentElement.scrollWidth > window.innerWidth + 1`)
		must(t, err)
		if wide == true {
			t.Errorf("%s: the page scrolls sideways", v.name)
		}
		screenshot(t, page, v.name)
	}
	page := newPageWith(t, playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 1280, Height: 900}})
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/workers")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-worker="worker-old1"] [data-testid="worker-state"]`)).ToHaveText("stale"))
	screenshot(t, page, "workers")

	// An open task list stays open across refreshes; a worker that starts
	// shows up, and one that stops goes, without a reload.
	must(t, page.Locator(`[data-worker="worker-7f3a"] details summary`).Click())
	_, err = page.Evaluate(`() => { window.__noReload = true }`)
	must(t, err)
	_, err = db.Exec(`INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, in_flight, heartbeat_at)
		VALUES ('worker-new9', 'ip-10-0-1-19', 5120, 'v1.4.3', '{default}', '{billing.charge}', 4, 1, now());
		DELETE FROM workers WHERE id = 'worker-old1'`)
	must(t, err)
	refresh := playwright.LocatorAssertionsToHaveCountOptions{Timeout: playwright.Float(12_000)}
	must(t, expect.Locator(page.Locator(`[data-worker="worker-new9"]`)).ToHaveCount(1, refresh))
	must(t, expect.Locator(page.Locator(`[data-worker="worker-old1"]`)).ToHaveCount(0, refresh))
	must(t, expect.Locator(page.Locator(`[data-worker="worker-7f3a"] details[open]`)).ToHaveCount(1))
	if still, err := page.Evaluate(`() => window.__noReload === true`); err != nil || still != true {
		t.Fatalf("the workers page reloaded (%v)", err)
	}
}

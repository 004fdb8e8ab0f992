package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// TestOperationsInFlight is the incident journey of two engineers: alice's
// replay of a task is running; olga sees it named on every page, and when
// she confirms a replay of some of the same letters the confirmation says
// how many alice's operation already covers, with a link, and still lets
// her go ahead. /operations then lists both.
func TestOperationsInFlight(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 6, "billing.charge")
	other := actionLetters(t, db, 2, "email.send")
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := storetest.NewStores(db.DB)
	must(t, store.Queue.RegisterTasks(context.Background(), actionTasks))
	// The runner looks for work it was not woken for once an hour: alice's
	// operation, recorded straight in the store, stays running until
	// olga's confirmation wakes the runner.
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e", RunnerPollInterval: time.Hour})
	page := newPage(t)
	signInOlga(t, page, base, db)
	f, err := handlers.ParseFilter(map[string][]string{"task": {"billing.charge"}}, time.Now())
	must(t, err)
	alices, err := store.Operations.CreateOperation(context.Background(), dlq.OperationParams{Kind: dlq.OpReplay,
		Actor: dlq.Actor{Name: "alice"}, Reason: "INC-7 fix deployed", Now: time.Now(), Selection: dlq.Selection{Filter: &f}})
	must(t, err)

	// Alice's operation was started elsewhere (straight in the store, as
	// another console would): olga's console shows it once the banners it
	// read at her sign-in are older than web.BannerWindow.
	storetest.WaitFor(t, web.BannerWindow+10*time.Second, "a page to name alice's operation", func() bool {
		_, err := page.Goto(base + "/")
		must(t, err)
		n, err := byTestID(page, "ops-banner-op").Count()
		must(t, err)
		return n == 1
	})
	// Every page names it.
	for _, path := range []string{"/", "/audit", "/dead-letters"} {
		_, err = page.Goto(base + path)
		must(t, err)
		must(t, expect.Locator(byTestID(page, "ops-banner-op")).ToHaveText(fmt.Sprintf("Replay #%d by alice: 0 of 6 — view", alices.ID)))
	}
	screenshot(t, page, "operations-banner")

	// Olga ticks two of alice's letters and one other, and replays them.
	for _, id := range []int64{ids[1], ids[2], other[0]} {
		must(t, page.Locator(fmt.Sprintf(`[data-testid="letter-row"][data-id="%d"] input[name="id"]`, id)).Check())
	}
	must(t, byTestID(page, "bulk-replay").Click())
	must(t, expect.Locator(byTestID(page, "confirm-count")).ToHaveText("3"))
	warning := byTestID(page, "confirm-overlap")
	must(t, expect.Locator(warning).ToHaveText(fmt.Sprintf("Operation #%d (replay by alice, running) already covers 2 of these 3 letters.", alices.ID)))
	must(t, expect.Locator(warning.GetByRole("link")).ToHaveAttribute("href", fmt.Sprintf("/operations/%d", alices.ID)))
	screenshot(t, page, "operations-overlap-warning")

	// Only a warning: she goes ahead; the runner, woken, runs both, and a
	// letter is replayed once whichever operation reaches it first.
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	// No worker runs here: once both operations have handed their letters
	// to the queue, the test runs the replays as a worker would, and both
	// settle.
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	storetest.WaitFor(t, 30*time.Second, "the operations to hand their letters to the queue", func() bool {
		return countRows(t, db, `SELECT count(*) FROM operations WHERE state = 'running'`) == 0
	})
	succeedJobs(t, db)
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Done"))
	if n := countRows(t, db, `SELECT count(*) FROM (SELECT replay_of FROM jobs GROUP BY replay_of HAVING count(*) > 1) x`); n != 0 {
		t.Fatalf("%d letters replayed twice", n)
	}

	// The list: newest first, both done; nothing is in flight any more.
	must(t, page.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Operations"}).Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations$`)))
	rows := page.Locator(`[data-testid="op-row"]`)
	must(t, expect.Locator(rows).ToHaveCount(2))
	must(t, expect.Locator(rows.Nth(1).Locator(`[data-testid="op-link"]`)).ToHaveText(fmt.Sprintf("Replay #%d", alices.ID)))
	must(t, expect.Locator(rows.Nth(1).Locator(`[data-testid="op-row-selection"]`)).ToContainText("task billing.charge"))
	must(t, expect.Locator(rows.Nth(0).Locator(`[data-testid="op-row-selection"]`)).ToHaveText("3 letters by id"))
	must(t, expect.Locator(page.Locator(`[data-testid="op-row"][data-state="done"]`)).ToHaveCount(2))
	// The runner finished them outside any request this console answered:
	// the banner goes once what the pages read is older than the window.
	storetest.WaitFor(t, web.BannerWindow+10*time.Second, "the operations banner to go", func() bool {
		_, err := page.Goto(base + "/operations")
		must(t, err)
		n, err := byTestID(page, "ops-banner").Count()
		must(t, err)
		return n == 0
	})
	screenshot(t, page, "operations-list")

	// Filtered in the page: alice's only, then what is still open (none).
	must(t, page.GetByLabel("Who").Fill("alice"))
	must(t, byTestID(page, "ops-apply").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`actor=alice`)))
	must(t, expect.Locator(rows).ToHaveCount(1))
	_, err = byTestID(page, "filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"open"}})
	must(t, err)
	must(t, byTestID(page, "ops-apply").Click())
	must(t, expect.Locator(byTestID(page, "ops-empty")).ToBeVisible())
}

package e2e

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// TestSchedulesPage: a worker runs two schedules, one every second whose
// every other run dies; the on-call engineer finds the schedules from the
// navigation, follows a run's dead letter, and disables the noisy
// schedule with a reason, then enables it again.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ctx := context.Background()

	reg := worker.NewRegistry()
	var runs atomic.Int64
	reg.Register("reports.refresh", func(context.Context, *worker.Job) error {
		if runs.Add(1)%2 == 0 {
			return worker.Permanent(errors.New("report store unreachable: dial tcp 10.0.4.7:5432: connection refused"))
		}
		return nil
	}, worker.TaskOptions{})
	reg.Register("billing.invoice", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
	reg.Schedule("reports.refresh-every-second", worker.Schedule{Every: time.Second, Task: "reports.refresh", Queue: "default",
		Kwargs: []byte(`{"report": "revenue"}`), MaxAttempts: 1})
	reg.Schedule("billing.nightly-invoices", worker.Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin", Task: "billing.invoice"})
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- redrive.RunWorker(wctx, db.DB, worker.Config{Registry: reg, Concurrency: 2,
			PollInterval: 50 * time.Millisecond, Logger: logger, ShutdownGrace: 5 * time.Second})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	storetest.WaitFor(t, 30*time.Second, "a run of the schedule to die and one to succeed", func() bool {
		return countRows(t, db, `SELECT count(*) FROM dead_letters WHERE task = 'reports.refresh'`) >= 2 &&
			countRows(t, db, `SELECT count(*) FROM jobs WHERE task = 'reports.refresh' AND state = 'succeeded'`) >= 2
	})

	base := startServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)
	must(t, page.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).
		GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Schedules"}).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/schedules"))

	noisy := page.Locator(`[data-testid="schedule-row"][data-schedule="reports.refresh-every-second"]`)
	nightly := page.Locator(`[data-testid="schedule-row"][data-schedule="billing.nightly-invoices"]`)
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-when"]`)).ToHaveText("every 1s"))
	must(t, expect.Locator(nightly.Locator(`[data-testid="schedule-when"]`)).ToHaveText("cron 30 2 * * * (Europe/Berlin)"))
	must(t, expect.Locator(nightly.Locator(`[data-testid="schedule-last"]`)).ToHaveText("not yet"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-state"]`)).ToHaveText("enabled"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-runs"] .badge.dead`).First()).ToBeVisible())
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-runs"] .badge.succeeded`).First()).ToBeVisible())
	screenshot(t, page, "schedules")

	// A dead letter of the schedule leads to its page.
	must(t, noisy.Locator(`[data-testid="schedule-letter"]`).First().Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/dead-letters/\d+$`)))
	must(t, expect.Locator(page.Locator("body")).ToContainText("report store unreachable"))
	_, err := page.GoBack()
	must(t, err)

	// Disabling asks why, and says who did it and why on the row.
	must(t, noisy.GetByLabel("Why disable reports.refresh-every-second").Fill("report store is down, INC-2231"))
	must(t, noisy.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Disable"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Disabled schedule reports.refresh-every-second"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-state"]`)).ToHaveText("disabled"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-change"]`)).ToContainText("disabled by olga"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-change"]`)).ToContainText("INC-2231"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-next"]`)).ToHaveText("none: disabled"))
	screenshot(t, page, "schedules-disabled")

	must(t, noisy.GetByLabel("Why enable reports.refresh-every-second").Fill("report store is back"))
	must(t, noisy.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Enable"}).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="flash"]`)).ToContainText("Enabled schedule reports.refresh-every-second"))
	must(t, expect.Locator(noisy.Locator(`[data-testid="schedule-state"]`)).ToHaveText("enabled"))

	if n := countRows(t, db, `SELECT count(*) FROM audit_events WHERE action IN ('schedule_disable', 'schedule_enable') AND actor = 'olga'`); n != 2 {
		t.Errorf("%d audit entries of the schedule's changes by olga, want 2", n)
	}
}

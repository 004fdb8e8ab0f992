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
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// providerDown is the payments provider's outage as the handler reports
// it: the same charge succeeds once the provider is back.
type providerDown struct{}

func (providerDown) Error() string      { return "payments-provider returned 503 Service Unavailable" }
func (providerDown) ErrorClass() string { return "ServiceUnavailable" }

// TestRecoveryJourney is issue 13's journey from sign-in to the audit
// entry, with a real worker: charges died while the payments provider was
// down; the fix ships; from the overview, "what broke" is one click (the
// group's page) and a safe replay of the group is four more (replay this
// group, canary on, confirm, release); the operation page follows the
// replays until every one has settled, and the audit entry says what
// became of each letter.
func TestRecoveryJourney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e",
		RunnerPollInterval: 100 * time.Millisecond})

	// The worker as `redrive worker` runs it; the provider is down until
	// the fix ships.
	var fixed atomic.Bool
	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(context.Context, *worker.Job) error {
		if !fixed.Load() {
			return providerDown{}
		}
		return nil
	}, worker.TaskOptions{})
	wctx, stopWorker := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- redrive.RunWorker(wctx, store.DB, worker.Config{Registry: reg, Queues: []string{"payments"}, Concurrency: 4,
			PollInterval: 100 * time.Millisecond, ListenDSN: db.DSN, Logger: logger, ShutdownGrace: 5 * time.Second})
	}()
	t.Cleanup(func() {
		stopWorker()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	must(t, store.Queue.RegisterTasks(ctx, []string{"billing.charge"}))
	const charges = 6
	for range charges {
		_, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "billing.charge", Queue: "payments", MaxAttempts: 1})
		must(t, err)
	}
	storetest.WaitFor(t, 30*time.Second, "the charges to dead-letter", func() bool {
		return countRows(t, db, `SELECT count(*) FROM dead_letters`) >= charges
	})
	fixed.Store(true) // the fix ships

	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(base + "/")
	must(t, err)
	clicks := 0
	click := func(l playwright.Locator) {
		t.Helper()
		clicks++
		must(t, l.Click())
	}

	// What broke, since when: one click.
	click(byTestID(page, "top-group-link").First())
	must(t, expect.Locator(byTestID(page, "group-title")).ToContainText("ServiceUnavailable in billing.charge"))
	must(t, expect.Locator(byTestID(page, "group-first-seen")).ToBeVisible())
	if clicks != 1 {
		t.Fatalf("%d clicks to the group's page, want 1", clicks)
	}
	screenshot(t, page, "journey-1-group")

	// A safe replay of the group: replay this group, canary on, confirm.
	click(byTestID(page, "group-replay"))
	must(t, expect.Locator(byTestID(page, "confirm-count")).ToHaveText("6"))
	click(byTestID(page, "confirm-canary"))
	must(t, byTestID(page, "confirm-canary-size").Fill("2"))
	must(t, byTestID(page, "confirm-reason").Fill("payments-provider back; retry logic fixed in v2.3.1"))
	click(byTestID(page, "confirm"))
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	slow := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(45_000)}
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary succeeded: waiting for release", slow))
	screenshot(t, page, "journey-2-canary-succeeded")

	// Release: the rest go, and the page follows them until they settle.
	click(byTestID(page, "release"))
	if clicks > 5 {
		t.Fatalf("%d clicks from the overview to a released replay, want at most 5", clicks)
	}
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Done", slow))
	must(t, expect.Locator(byTestID(page, "op-settled-count")).ToHaveText("6 of 6 settled · 100%"))
	must(t, expect.Locator(byTestID(page, "replays-succeeded")).ToHaveText("6 succeeded"))
	// The banner of operations in flight never names the one whose page
	// this is: it would go stale above the live progress.
	must(t, expect.Locator(byTestID(page, "ops-banner-op")).ToHaveCount(0))
	screenshot(t, page, "journey-3-settled")
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of IS NOT NULL AND state = 'succeeded'`); n != charges {
		t.Fatalf("%d replays succeeded, want %d", n, charges)
	}
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 0 {
		t.Fatalf("%d letters still pending after the replay", n)
	}

	// The audit entry: who, why, and what became of every letter.
	click(byTestID(page, "op-letters"))
	must(t, expect.Locator(page.Locator("main")).ToContainText("payments-provider back; retry logic fixed in v2.3.1"))
	statuses := page.Locator(`[data-testid="entry-letter-status"]`)
	must(t, expect.Locator(statuses).ToHaveCount(charges))
	for i := range charges {
		must(t, expect.Locator(statuses.Nth(i)).ToHaveText("replay succeeded"))
	}
	screenshot(t, page, "journey-4-audit-entry")
	t.Logf("from the overview to the audit entry: %d clicks", clicks)
}

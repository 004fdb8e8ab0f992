package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// outageTasks are the demo's payments tasks, which the payments outage
// fails alike.
var outageTasks = []string{demo.TaskCharge, demo.TaskRefund}

// outageLetters runs the demo's payments outage as `redrive dev` does: the
// payments provider is down, and the demo's own tasks, run by a worker,
// dead-letter charges and refunds (one attempt each), grouped on the
// worker's path. The jobs alternate between the tasks (three charges, one
// refund) and run one at a time, so the letters keep that order. The
// worker stops once every job is a letter, so that what replays them later
// stays queued for the test to see. It returns each task's one group.
func outageLetters(t *testing.T, db *storetest.DB, charges, refunds int) map[string]string {
	t.Helper()
	ctx := context.Background()
	store := storetest.NewStores(db.DB)
	must(t, demo.EnsureSchema(ctx, db.DB))
	must(t, store.Queue.RegisterTasks(ctx, outageTasks))
	now := time.Now()
	must(t, demo.NewOutages(db.DB, store.Audit).Schedule(ctx, demo.PaymentsProvider, now.Add(-time.Minute), now.Add(4*time.Minute)))
	for n, c, r := 0, 0, 0; c < charges || r < refunds; n++ {
		task := demo.TaskCharge
		if (n%4 == 3 || c == charges) && r < refunds {
			task, r = demo.TaskRefund, r+1
		} else {
			c++
		}
		_, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: "payments", MaxAttempts: 1,
			Kwargs: json.RawMessage(fmt.Sprintf(`{"order": "ord_%d"}`, 7000+n))})
		must(t, err)
	}

	reg := worker.NewRegistry()
	demo.Register(reg, db.DB)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	wctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	stopped := make(chan error, 1)
	go func() {
		stopped <- redrive.RunWorker(wctx, store.DB, worker.Config{Registry: reg, Queues: []string{"payments"}, Concurrency: 1,
			PollInterval: 50 * time.Millisecond, Logger: logger, ShutdownGrace: 5 * time.Second})
	}()
	// Only the outage's own letters count: a fixture may hold others.
	storetest.WaitFor(t, time.Minute, "every outage job dead-lettered", func() bool {
		return countRows(t, db, `SELECT count(*) FROM dead_letters WHERE task = ANY($1)`, pq.Array(outageTasks)) >= charges+refunds
	})
	stop()
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("worker: %v", err)
	}

	var rows []struct {
		Task        string `db:"task"`
		Fingerprint string `db:"fingerprint"`
	}
	must(t, db.Select(&rows, `SELECT task, fingerprint FROM error_groups WHERE task = ANY($1) ORDER BY task`, pq.Array(outageTasks)))
	groups := map[string]string{}
	for _, r := range rows {
		groups[r.Task] = r.Fingerprint
	}
	if len(rows) != 2 || len(groups) != 2 {
		t.Fatalf("the outage made groups %v, want one per task", rows)
	}
	return groups
}

// TestIncidentAcrossTasks: the payments provider answers 503 to charges
// and refunds alike. The overview shows one incident, not two groups; its
// page shows both tasks; "Replay all" is one operation, started with a
// canary, whose letters are of both tasks.
func TestIncidentAcrossTasks(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	groups := outageLetters(t, db, 24, 8)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		RunnerPollInterval: 100 * time.Millisecond})
	page := newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800},
		// The console's CSP forbids inline scripts; axe is injected as one.
		BypassCSP: playwright.Bool(true),
	})
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/")
	must(t, err)
	incident := byTestID(page, "top-incident")
	must(t, expect.Locator(incident).ToHaveCount(1))
	must(t, expect.Locator(byTestID(page, "top-group")).ToHaveCount(0))
	must(t, expect.Locator(incident.Locator(`[data-testid="incident-tasks"]`)).ToHaveText("payments.charge 24, payments.refund 8"))
	must(t, expect.Locator(incident.Locator(`[data-testid="incident-pending"]`)).ToHaveText("32"))
	screenshot(t, page, "incident-overview")
	axeClean(t, page, "/")

	must(t, byTestID(page, "top-incident-link").Click())
	must(t, expect.Page(page).ToHaveURL(base+"/incidents/"+groups[demo.TaskCharge]))
	must(t, expect.Locator(byTestID(page, "incident-title")).ToHaveText("ServiceUnavailable in payments.charge, payments.refund"))
	must(t, expect.Locator(byTestID(page, "incident-group")).ToHaveCount(2))
	must(t, expect.Locator(byTestID(page, "incident-group-link").Nth(1)).ToHaveAttribute("href", "/groups/"+groups[demo.TaskRefund]))
	must(t, expect.Locator(byTestID(page, "letter-row")).ToHaveCount(25))
	screenshot(t, page, "incident-page")
	axeClean(t, page, "/incidents/"+groups[demo.TaskCharge])

	// On a phone, in the dark: nothing sticks out sideways, and axe finds
	// nothing serious either.
	phone := newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 390, Height: 844}, IsMobile: playwright.Bool(true),
		ColorScheme: playwright.ColorSchemeDark, BypassCSP: playwright.Bool(true),
	})
	signInOlga(t, phone, base, db)
	_, err = phone.Goto(base + "/incidents/" + groups[demo.TaskCharge])
	must(t, err)
	must(t, expect.Locator(byTestID(phone, "incident-group")).ToHaveCount(2))
	wide, err := phone.Evaluate(`() => document.documentElement.scrollWidth > document.documentElement.clientWidth`)
	must(t, err)
	if wide == true {
		t.Error("the incident page scrolls sideways on a phone")
	}
	screenshot(t, phone, "phone-incident-page")
	axeClean(t, phone, "/incidents/"+groups[demo.TaskCharge]+" (phone, dark)")

	must(t, byTestID(page, "incident-replay").Click())
	must(t, expect.Locator(byTestID(page, "confirm-title")).ToHaveText("Replay 32 dead letters?"))
	must(t, expect.Locator(byTestID(page, "confirm-canary")).ToBeChecked())
	must(t, expect.Locator(byTestID(page, "confirm-canary-size")).ToHaveValue("10"))
	must(t, expect.Locator(byTestID(page, "confirm-died-again")).ToHaveValue("20"))
	must(t, expect.Locator(byTestID(page, "confirm-by-task")).ToContainText("payments.charge"))
	must(t, expect.Locator(byTestID(page, "confirm-by-task")).ToContainText("payments.refund"))
	screenshot(t, page, "incident-replay-confirmation")
	must(t, byTestID(page, "confirm-reason").Fill("payments provider is back"))
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary running: waiting for its jobs"))
	expectOneReplayOfBothTasks(t, db, groups, 32)
}

// expectOneReplayOfBothTasks checks that exactly one operation was
// started, over the groups of both tasks (matched letters in all), and
// that its canary's jobs replay letters of both tasks.
func expectOneReplayOfBothTasks(t *testing.T, db *storetest.DB, groups map[string]string, matched int) {
	t.Helper()
	if n := countRows(t, db, `SELECT count(*) FROM operations`); n != 1 {
		t.Fatalf("%d operations, want 1", n)
	}
	var op struct {
		ID      int64  `db:"id"`
		Filter  string `db:"fingerprint"`
		Matched int    `db:"matched"`
		Canary  int    `db:"canary"`
	}
	must(t, db.Get(&op, `SELECT id, array_to_string(ARRAY(SELECT jsonb_array_elements_text(filter->'fingerprints')), ',') AS fingerprint, matched, canary FROM operations`))
	want := []string{groups[demo.TaskCharge], groups[demo.TaskRefund]}
	slices.Sort(want)
	if op.Filter != strings.Join(want, ",") || op.Matched != matched || op.Canary != 10 {
		t.Errorf("operation %d: groups %q, %d letters, canary %d; want %q, %d, 10", op.ID, op.Filter, op.Matched, op.Canary,
			strings.Join(want, ","), matched)
	}
	var tasks []string
	must(t, db.Select(&tasks, `SELECT DISTINCT task FROM jobs WHERE operation_id = $1 ORDER BY 1`, op.ID))
	if !slices.Equal(tasks, outageTasks) {
		t.Errorf("the canary replayed letters of %v, want both %v", tasks, outageTasks)
	}
}

// axeClean runs axe-core on the page as it is and fails on any serious or
// critical violation (as TestPagesAxeClean does for every other page).
func axeClean(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	_, err := page.AddScriptTag(playwright.PageAddScriptTagOptions{Path: playwright.String(axeScript(t))})
	must(t, err)
	got, err := page.Evaluate(`async () => {
		const r = await axe.run(document, {resultTypes: ['violations']});
		return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
			.map(v => v.impact + ' ' + v.id + ': ' + v.nodes.length + ' × ' +
				v.nodes.slice(0, 3).map(n => n.target.join(' ') + (n.any[0] ? ' (' + n.any[0].message + ')' : '')).join('; '));
	}`)
	must(t, err)
	for _, v := range got.([]any) {
		t.Errorf("%s: %s", what, v)
	}
}

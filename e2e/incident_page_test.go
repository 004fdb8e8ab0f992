package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
	"github.com/redrive/redrive/grouping"
	redrive "github.com/redrive/redrive/internal/cli"
	"github.com/redrive/redrive/worker/demo"
)

// outageTasks are the demo's payments tasks, which the payments outage
// fails alike.
var outageTasks = []string{demo.TaskCharge, demo.TaskRefund}

// outageLetters dead-letters charges and refunds of the payments outage as
// the demo's worker does: the message its payments tasks write (fresh job
// and request ids in each), grouped by the store's grouper, which keeps
// each task's template. The letters alternate between the tasks (three
// charges, one refund) over the last minutes, newest last. It registers
// the tasks, for their replays, and returns each task's group.
func outageLetters(t *testing.T, db *dlqtest.DB, charges, refunds int) map[string]string {
	t.Helper()
	ctx := context.Background()
	store := dlq.NewStore(db.DB)
	must(t, store.RegisterTasks(ctx, outageTasks))
	groups := map[string]string{}
	fail := func(task, path string, n int) {
		job := 4000 + n
		msg := fmt.Sprintf("%s for job %d: %v", task, job, &demo.ServiceUnavailableError{Service: demo.PaymentsProvider,
			Method: "POST", Path: path, RequestID: fmt.Sprintf("req_%08x", 0x10000000+n*7919)})
		fp, err := store.GroupLetter(ctx, grouping.Letter{Task: task, Class: "ServiceUnavailable", Message: msg})
		must(t, err)
		groups[task] = fp
		dlqtest.InsertDeadLetter(t, db.DB, dlqtest.Letter{JobID: int64(job), Task: task, Queue: "payments", ErrorClass: "ServiceUnavailable",
			Message: msg, Fingerprint: fp, Attempts: 3, MaxAttempts: 3, Kwargs: fmt.Sprintf(`{"order": "ord_%d"}`, 7000+n),
			WorkerVersion: "v2.4.0", FailedAt: time.Now().UTC().Add(-time.Duration(charges+refunds-n) * 20 * time.Second)})
	}
	for n, c, r := 0, 0, 0; c < charges || r < refunds; n++ {
		if (n%4 == 3 || c == charges) && r < refunds {
			fail(demo.TaskRefund, "/v1/refunds", n)
			r++
		} else {
			fail(demo.TaskCharge, "/v1/payment_intents", n)
			c++
		}
	}
	return groups
}

// TestIncidentAcrossTasks: the payments provider answers 503 to charges
// and refunds alike. The overview shows one incident, not two groups; its
// page shows both tasks; "Replay all" is one operation, started with a
// canary, whose letters are of both tasks.
func TestIncidentAcrossTasks(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)
	groups := outageLetters(t, db, 24, 8)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{Store: dlq.NewStore(db.DB), Logger: logger, Version: "e2e",
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
func expectOneReplayOfBothTasks(t *testing.T, db *dlqtest.DB, groups map[string]string, matched int) {
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
	must(t, db.Get(&op, `SELECT id, filter->'fingerprint'->>0 AS fingerprint, matched, canary FROM operations`))
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

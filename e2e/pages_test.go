package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Every page of the console, checked by axe-core in both colour schemes
// and at a phone's width.

// axeVersion must match scripts/deps.sh, which installs it from npm into
// .cache/axe-core/<version> at the repository root (AXE_CORE_PATH names
// another axe.min.js).
const axeVersion = "4.14.1"

func axeScript(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AXE_CORE_PATH"); p != "" {
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", ".cache", "axe-core", axeVersion, "node_modules", "axe-core", "axe.min.js"))
	must(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("axe-core is not installed (run scripts/deps.sh test): %v", err)
	}
	return p
}

// consolePages signs page in as an admin over a fixture with something
// on every page, and returns the paths of every page to check.
func consolePages(t *testing.T, page playwright.Page) (base string, paths []string) {
	t.Helper()
	db := overviewFixture(t)
	// As `redrive dev` serves it, so the overview shows the demo incident.
	base = startDemoServer(t, db)
	signIn(t, page, base, db, dlq.RoleAdmin)
	var fp string
	var letter, job int64
	must(t, db.QueryRowContext(context.Background(), `SELECT fingerprint FROM error_groups WHERE pending > 0 ORDER BY pending DESC LIMIT 1`).Scan(&fp))
	must(t, db.QueryRowContext(context.Background(), `SELECT max(id) FROM dead_letters WHERE status = 'pending'`).Scan(&letter))
	must(t, db.QueryRowContext(context.Background(), `SELECT max(id) FROM jobs`).Scan(&job))
	// Bulk operations for /operations and the banner of every page: one
	// waiting at its canary (in flight), one cancelled part way through a
	// long filter.
	_, err := db.ExecContext(context.Background(), `
		INSERT INTO operations (kind, state, actor, reason, filter, max_id, matched, done_count, finished_at) VALUES
			('discard', 'cancelled', 'bob', 'dup', '{"task": ["billing.charge"], "error_class": ["CardDeclined"], "since": ["2026-11-30T08:00:00Z"]}', $1, 20000, 4210, now())`,
		letter)
	must(t, err)
	_, err = db.ExecContext(context.Background(), `INSERT INTO operations (kind, state, actor, ids, max_id, matched, canary)
		VALUES ('replay', 'canary', 'alice', $1, $2, 1, 1)`, fmt.Sprintf("{%d}", letter), letter)
	must(t, err)
	bulk := url.Values{"action": {"replay"}, "all_matching": {"1"}, "filter": {"fingerprint=" + fp}}
	// A replay settling, guarded: both bars, the guard, stop following.
	var op int64
	must(t, db.QueryRowContext(context.Background(), `INSERT INTO operations (kind, actor, reason, ids, max_id, matched, done_count,
		state, died_again_percent, guard_verdict, replays, enqueued_at)
		VALUES ('replay', 'olga', 'fix shipped', '{1,2,3,4}', 4, 4, 4, 'settling', 20, 'passed',
			'{"waiting": 1, "running": 1, "succeeded": 1, "died_again": 1}', now()) RETURNING id`).Scan(&op))
	// A schedule with a run that died, for /schedules.
	sched := storetest.NewStores(db.DB).Queue
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	_, err = sched.RegisterSchedules(context.Background(), []dlq.ScheduleDefinition{{Name: "billing.nightly-invoices", Cron: "30 2 * * *",
		Timezone: "Europe/Berlin", Task: "billing.charge", Queue: "payments", Args: []byte(`[]`), Kwargs: []byte(`{}`), MaxAttempts: 1, NextRunAt: at}})
	must(t, err)
	_, err = sched.EnqueueOccurrence(context.Background(), "billing.nightly-invoices", at, at.Add(24*time.Hour))
	must(t, err)
	// A task's timings for /tasks and its page, and a purge held for a
	// growing group, shown on the overview and the letter list.
	_, err = db.ExecContext(context.Background(), `
		INSERT INTO task_timings (task, span, start_at, runs, failures, dead, wait, run) VALUES
			('billing.charge', 'minute', date_trunc('minute', now()), 120, 9, 2, '{0,0,0,40,60,20}', '{0,0,0,0,0,0,0,0,0,0,100,15,5}'),
			('billing.charge', 'hour', date_trunc('hour', now()), 120, 9, 2, '{0,0,0,40,60,20}', '{0,0,0,0,0,0,0,0,0,0,100,15,5}')`)
	must(t, err)
	_, err = db.ExecContext(context.Background(), `
		INSERT INTO purge_holds (fingerprint, task, letters, settled_before, held_at)
			VALUES ($1, 'billing.charge', 37, now() - interval '30 days', now() - interval '2 hours')`, fp)
	must(t, err)
	// A throttle, for its banner on every page and the pauses page's table.
	_, err = db.ExecContext(context.Background(), `INSERT INTO throttles (kind, name, max_running, max_per_second, reason, set_by, until)
		VALUES ('task', 'billing.charge', 3, 0.5, 'provider rate-limits us', 'olga', now() + interval '1 hour')`)
	must(t, err)
	return base, []string{
		"/tasks", "/tasks/billing.charge",
		"/pauses", "/throttles/new?queue=default", "/throttles/1",
		"/", "/dead-letters", fmt.Sprintf("/dead-letters/%d", letter), "/groups", "/groups/" + fp,
		"/dead-letters/bulk?" + bulk.Encode(), "/jobs", fmt.Sprintf("/jobs/%d", job), "/workers", "/audit",
		"/operations", "/admin/users", "/admin/notifications", "/schedules", "/jobs/new",
		fmt.Sprintf("/dead-letters/%d?test=1", letter), // the test run form open
		fmt.Sprintf("/operations/%d", op),
	}
}

// TestPagesAxeClean runs axe-core on every page in light and dark and
// fails on any serious or critical violation, naming the rule and the
// elements.
func TestPagesAxeClean(t *testing.T) {
	t.Parallel()
	script := axeScript(t)
	for _, scheme := range []*playwright.ColorScheme{playwright.ColorSchemeLight, playwright.ColorSchemeDark} {
		t.Run(string(*scheme), func(t *testing.T) {
			t.Parallel()
			page := newPageWith(t, playwright.BrowserNewContextOptions{
				Viewport: &playwright.Size{Width: 1280, Height: 800}, ColorScheme: scheme,
				// The console's CSP forbids inline scripts; axe is injected as one.
				BypassCSP: playwright.Bool(true),
			})
			base, paths := consolePages(t, page)
			for _, p := range paths {
				_, err := page.Goto(base + p)
				must(t, err)
				_, err = page.AddScriptTag(playwright.PageAddScriptTagOptions{Path: playwright.String(script)})
				must(t, err)
				got, err := page.Evaluate(`async () => {
					const r = await axe.run(document, {resultTypes: ['violations']});
					return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
						.map(v => v.impact + ' ' + v.id + ': ' + v.nodes.length + ' × ' +
							v.nodes.slice(0, 3).map(n => n.target.join(' ') + (n.any[0] ? ' (' + n.any[0].message + ')' : '')).join('; '));
				}`)
				must(t, err)
				for _, v := range got.([]any) {
					t.Errorf("%s (%s): %s", p, *scheme, v)
				}
			}
		})
	}
}

// TestPagesFitAPhone: at 390×844 no page scrolls sideways.
func TestPagesFitAPhone(t *testing.T) {
	t.Parallel()
	page := newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 390, Height: 844}, IsMobile: playwright.Bool(true), HasTouch: playwright.Bool(true),
	})
	base, paths := consolePages(t, page)
	for _, p := range paths {
		_, err := page.Goto(base + p)
		must(t, err)
		got, err := page.Evaluate(`() => {
			const w = document.documentElement.clientWidth;
			const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 1)
				.filter(e => !e.closest('.table-scroll, .chart-wrap, pre'))
				.slice(0, 3).map(e => e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '') + ' ' + Math.round(e.getBoundingClientRect().right) + 'px');
			const header = document.querySelector('header.topbar').getBoundingClientRect().height;
			const cur = document.querySelector('.nav [aria-current="page"]');
			const curSeen = !cur || (cur.getBoundingClientRect().left >= 0 && cur.getBoundingClientRect().right <= w + 1);
			const unhinted = [...document.querySelectorAll('.table-wrap, .table-scroll')]
				.filter(e => e.scrollWidth > e.clientWidth + 1 && !getComputedStyle(e).backgroundImage.includes('gradient')).length;
			return {scroll: document.documentElement.scrollWidth, width: w, wide: wide.join(', '), header, curSeen, unhinted};
		}`)
		must(t, err)
		m := got.(map[string]any)
		if num(m["scroll"]) > num(m["width"]) {
			t.Errorf("%s scrolls sideways: %v px wide in a %v px screen; sticking out: %s", p, m["scroll"], m["width"], m["wide"])
		}
		// The header leaves the phone's screen to the page (it took 355 of
		// 844 px), the current page's entry in view.
		if h := num(m["header"]); h > 130 {
			t.Errorf("%s: the header is %v px tall on a phone; want at most 130", p, h)
		}
		if m["curSeen"] != true {
			t.Errorf("%s: the current page's navigation entry is scrolled out of view", p)
		}
		// A table wider than the screen scrolls in its box, and shows it.
		if n := num(m["unhinted"]); n > 0 {
			t.Errorf("%s: %v tables scroll sideways with no hint", p, n)
		}
		if strings.HasPrefix(p, "/groups/") || p == "/" || p == "/dead-letters" || p == "/operations" || strings.HasPrefix(p, "/dead-letters/bulk") {
			screenshot(t, page, "phone"+strings.ReplaceAll(p, "/", "-"))
		}
	}
}

func num(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// TestGroupJourney: from the overview, "what broke, since when" is one
// click (the group's page), and a safe replay of that group is four more:
// replay this group, confirm with the canary filled in, release.
func TestGroupJourney(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleOperator)
	_, err := page.Goto(base + "/")
	must(t, err)
	must(t, page.GetByTestId("top-group-link").First().Click())
	must(t, expect.Locator(page.GetByTestId("group-title")).ToContainText("CardDeclined in billing.charge"))
	must(t, expect.Locator(page.GetByTestId("group-first-seen")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("group-hourly")).ToBeVisible())
	screenshot(t, page, "group-page")
	must(t, page.GetByTestId("group-replay").Click())
	must(t, expect.Locator(page.GetByTestId("confirm-count")).ToHaveText("2"))

	// On the list, "Replay selected…" waits for a selection.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("bulk-replay")).ToBeDisabled())
	must(t, page.GetByTestId("letter-row").First().Locator("input[type=checkbox]").Check())
	must(t, expect.Locator(page.GetByTestId("bulk-replay")).ToBeEnabled())
}

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Keyboard use of the console: focus that survives refreshes, charts that
// are one tab stop, skip links, shortcuts.

// countSwaps makes the page count htmx swaps in window.__swaps.
func countSwaps(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.Evaluate(`() => { window.__swaps = 0; document.addEventListener("htmx:afterSwap", () => window.__swaps++) }`)
	must(t, err)
}

// waitSwaps waits until the page has swapped at least n fragments since
// countSwaps.
func waitSwaps(t *testing.T, page playwright.Page, n int, timeout time.Duration) {
	t.Helper()
	// Polled from here: the console's CSP forbids the eval WaitForFunction needs.
	storetest.WaitFor(t, timeout, fmt.Sprintf("%d htmx swaps", n), func() bool {
		got, err := page.Evaluate(`() => window.__swaps`)
		must(t, err)
		return num(got) >= float64(n)
	})
}

// expectSameFocus checks that the element marked by markFocus still holds
// focus and is still in the page (not a copy of it).
func expectSameFocus(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	same, err := page.Evaluate(`() => document.activeElement === window.__focused && window.__focused.isConnected`)
	must(t, err)
	if same != true {
		got, _ := page.Evaluate(`() => document.activeElement.outerHTML.slice(0, 200)`)
		t.Fatalf("%s: focus moved to %v", what, got)
	}
}

func markFocus(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.Evaluate(`() => { window.__focused = document.activeElement }`)
	must(t, err)
}

// TestOverviewRefreshKeepsFocus: the overview refreshes every 5 s; a
// keyboard user's focus stays on the link they were on, the numbers
// change in place, and the page does not scroll.
func TestOverviewRefreshKeepsFocus(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPageWith(t, playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 1280, Height: 500}})
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/")
	must(t, err)
	countSwaps(t, page)

	link := page.GetByTestId("top-group-link").First()
	must(t, link.Focus())
	must(t, expect.Locator(link).ToBeFocused())
	markFocus(t, page)
	_, err = page.Evaluate(`() => window.scrollTo(0, 200)`)
	must(t, err)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined"})
	waitSwaps(t, page, 2, 30*time.Second)
	must(t, expect.Locator(page.GetByTestId("count-pending")).ToHaveText("4"))
	expectSameFocus(t, page, "after two overview refreshes")
	if y, _ := page.Evaluate(`() => window.scrollY`); num(y) != 200 {
		t.Errorf("the refresh scrolled the page to %v, want it left at 200", y)
	}
	// The element kept is up to date, not a stale copy.
	must(t, expect.Locator(link.Locator(".badge, .mono").First()).ToHaveText("CardDeclined"))
}

// TestWorkersRefreshKeepsDetailsAndFocus: the workers list refreshes
// every 5 s; an opened task list stays open and the queue link focused
// keeps focus.
func TestWorkersRefreshKeepsDetailsAndFocus(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/workers")
	must(t, err)
	countSwaps(t, page)
	must(t, page.Locator("details.task-list summary").First().Click())
	must(t, expect.Locator(page.Locator("details.task-list").First()).ToHaveAttribute("open", ""))
	must(t, page.Locator("a.chip").First().Focus())
	markFocus(t, page)
	waitSwaps(t, page, 2, 30*time.Second)
	expectSameFocus(t, page, "after two workers refreshes")
	must(t, expect.Locator(page.Locator("details.task-list").First()).ToHaveAttribute("open", ""))
}

// TestOperationPollKeepsFocus: the operation page polls every second; a
// button focused inside the polled part keeps focus.
func TestOperationPollKeepsFocus(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	actionLetters(t, db, 4, "email.send")
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(base + "/dead-letters?task=email.send")
	must(t, err)
	must(t, byTestID(page, "select-all-matching").Check())
	must(t, byTestID(page, "bulk-replay").Click())
	must(t, byTestID(page, "confirm-canary").Check())
	must(t, byTestID(page, "confirm-canary-size").Fill("2"))
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary running: waiting for its jobs"))

	countSwaps(t, page)
	cancel := byTestID(page, "cancel")
	must(t, cancel.Focus())
	markFocus(t, page)
	waitSwaps(t, page, 2, 20*time.Second)
	expectSameFocus(t, page, "after two operation polls")
	must(t, expect.Locator(cancel).ToBeFocused())

	// The operation ends (as if cancelled elsewhere): the page says so, and
	// the polling stops (the fragment kept in place drops its hx-trigger).
	_, err = db.ExecContext(context.Background(), `UPDATE operations SET state = 'cancelled', finished_at = now()`)
	must(t, err)
	must(t, expect.Locator(byTestID(page, "op-progress")).ToHaveAttribute("data-state", "cancelled"))
	must(t, expect.Locator(byTestID(page, "op-progress")).Not().ToHaveAttribute("hx-trigger", regexp.MustCompile(".")))
	// A control that polls every second too, as the fragment did: once
	// htmx has polled it three times, the fragment has had three polls'
	// chances, and none may have happened.
	_, err = page.Evaluate(`() => {
		window.__requests = 0;
		window.__control = 0;
		const control = document.createElement("div");
		control.setAttribute("hx-get", location.pathname);
		control.setAttribute("hx-trigger", "every 1s");
		control.setAttribute("hx-swap", "none");
		document.addEventListener("htmx:beforeRequest", (e) => e.detail.elt === control ? window.__control++ : window.__requests++);
		document.body.appendChild(control);
		htmx.process(control);
	}`)
	must(t, err)
	storetest.WaitFor(t, 20*time.Second, "three polls of the control", func() bool {
		n, err := page.Evaluate(`() => window.__control`)
		must(t, err)
		return num(n) >= 3
	})
	if n, _ := page.Evaluate(`() => window.__requests`); num(n) != 0 {
		t.Errorf("%v polls after the operation stopped, want none", n)
	}
}

// TestChartIsOneTabStop: each chart is one stop in the tab order, arrows
// move between its bars, the bar's count is written beside the chart, and
// Enter opens the bar's letters.
func TestChartIsOneTabStop(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/")
	must(t, err)

	// From the top of the page to the first error group, each chart is
	// passed in one Tab (there were 38 bar links on the way).
	tabs, stops := 0, map[string]int{}
	for ; tabs < 60; tabs++ {
		must(t, page.Keyboard().Press("Tab"))
		on, _ := page.Evaluate(`() => document.activeElement.dataset.testid || ""`)
		stops[on.(string)]++
		if on == "top-group-link" {
			break
		}
	}
	t.Logf("%d Tabs from the top of the overview to the first error group", tabs+1)
	if stops["inflow-hourly-bar"] != 1 || stops["inflow-daily-bar"] != 1 || tabs >= 25 {
		t.Fatalf("%d Tabs to the first error group, %d of them on hourly bars and %d on daily ones; want one each",
			tabs+1, stops["inflow-hourly-bar"], stops["inflow-daily-bar"])
	}

	must(t, page.Keyboard().Press("Home")) // a no-op outside a chart
	hourly := page.GetByTestId("inflow-hourly-bar")
	readout := page.GetByTestId("inflow-hourly-readout")
	must(t, expect.Locator(readout).ToContainText("Newest: "))
	// Tabbing back lands on the hourly chart's newest bar, once.
	for range 40 {
		must(t, page.Keyboard().Press("Shift+Tab"))
		if on, _ := page.Evaluate(`() => document.activeElement.dataset.testid`); on == "inflow-hourly-bar" {
			break
		}
	}
	must(t, expect.Locator(hourly.Nth(23)).ToBeFocused())
	must(t, page.Keyboard().Press("ArrowLeft"))
	must(t, expect.Locator(hourly.Nth(22)).ToBeFocused())
	tip, err := hourly.Nth(22).GetAttribute("data-tip")
	must(t, err)
	if !regexp.MustCompile(`^\w{3} \d+ \d\d:00–\d\d:00 UTC: [\d,]+ dead letters?$`).MatchString(tip) {
		t.Errorf("bar tip %q does not say the hour and the count", tip)
	}
	must(t, expect.Locator(readout).ToHaveText(tip))
	must(t, page.Keyboard().Press("Home"))
	must(t, expect.Locator(hourly.Nth(0)).ToBeFocused())
	must(t, page.Keyboard().Press("End"))
	must(t, expect.Locator(hourly.Nth(23)).ToBeFocused())
	must(t, page.Keyboard().Press("ArrowLeft"))
	must(t, page.Keyboard().Press("ArrowLeft"))
	// One tab stop: Tab leaves the chart for the next one, Shift+Tab comes
	// back to the bar last chosen.
	must(t, page.Keyboard().Press("Tab"))
	must(t, expect.Locator(page.GetByTestId("inflow-daily-bar").Nth(13)).ToBeFocused())
	must(t, page.Keyboard().Press("Shift+Tab"))
	must(t, expect.Locator(hourly.Nth(21)).ToBeFocused())
	screenshot(t, page, "chart-keyboard")

	// Pointing at a bar says its count too.
	must(t, page.GetByTestId("inflow-daily-bar").Nth(5).Hover())
	dtip, err := page.GetByTestId("inflow-daily-bar").Nth(5).GetAttribute("data-tip")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("inflow-daily-readout")).ToHaveText(dtip))

	// Enter follows the focused bar's link.
	href, err := hourly.Nth(21).GetAttribute("href")
	must(t, err)
	must(t, hourly.Nth(21).Focus())
	must(t, page.Keyboard().Press("Enter"))
	must(t, expect.Page(page).ToHaveURL(base+href))
}

// TestSkipLinks: the first Tab offers "Skip to content" on every page, and
// the overview's second one skips to the top error groups.
func TestSkipLinks(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/")
	must(t, err)

	must(t, page.Keyboard().Press("Tab"))
	must(t, expect.Locator(page.Locator(":focus")).ToHaveText("Skip to content"))
	must(t, page.Keyboard().Press("Tab"))
	must(t, expect.Locator(page.Locator(":focus")).ToHaveText("Skip to top error groups"))
	screenshot(t, page, "skip-link")
	must(t, page.Keyboard().Press("Enter"))
	must(t, expect.Page(page).ToHaveURL(base+"/#top-groups"))
	must(t, page.Keyboard().Press("Tab"))
	in, err := page.Evaluate(`() => !!document.activeElement.closest("#top-groups")`)
	must(t, err)
	if in != true {
		t.Fatal("Tab after the skip link is not in the top error groups")
	}

	_, err = page.Goto(base + "/jobs")
	must(t, err)
	must(t, page.Keyboard().Press("Tab"))
	must(t, expect.Locator(page.Locator(":focus")).ToHaveText("Skip to content"))
	must(t, page.Keyboard().Press("Enter"))
	must(t, page.Keyboard().Press("Tab"))
	in, err = page.Evaluate(`() => !!document.activeElement.closest("main") && !document.activeElement.closest("header")`)
	must(t, err)
	if in != true {
		t.Fatal("Tab after Skip to content is not in the page's content")
	}
}

// arrived waits until page is at url and its deferred scripts have run:
// the URL changes before app.js listens for keys, and a key pressed in
// between would be lost on a loaded machine.
func arrived(t *testing.T, page playwright.Page, url string) {
	t.Helper()
	must(t, expect.Page(page).ToHaveURL(url))
	must(t, page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateDomcontentloaded}))
}

// TestKeyboardShortcuts: g d goes to the dead letters, / focuses the
// search, ? lists the shortcuts (Esc closes), j/k highlight rows and
// Enter opens one; nothing fires while typing.
func TestKeyboardShortcuts(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startServer(t, db)
	page := newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800}, BypassCSP: playwright.Bool(true),
	})
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/jobs")
	must(t, err)

	must(t, page.Keyboard().Press("g"))
	must(t, page.Keyboard().Press("d"))
	arrived(t, page, base+"/dead-letters")

	search := page.Locator(`input[name="q"]`)
	must(t, page.Keyboard().Press("/"))
	must(t, expect.Locator(search).ToBeFocused())
	// Typing g then o in the field is typing, not going to the overview.
	must(t, page.Keyboard().Type("go"))
	must(t, expect.Locator(search).ToHaveValue("go"))
	arrived(t, page, base+"/dead-letters")
	must(t, search.Fill(""))
	must(t, search.Blur())

	must(t, page.Keyboard().Press("?"))
	dialog := page.GetByRole("dialog", playwright.PageGetByRoleOptions{Name: "Keyboard shortcuts"})
	must(t, expect.Locator(dialog).ToBeVisible())
	must(t, expect.Locator(dialog).ToContainText("Dead letters"))
	screenshot(t, page, "shortcuts-dialog")
	expectAxeClean(t, page, "the shortcuts dialog")
	// j does nothing behind an open dialog.
	must(t, page.Keyboard().Press("j"))
	must(t, page.Keyboard().Press("Escape"))
	must(t, expect.Locator(dialog).ToBeHidden())
	must(t, expect.Locator(page.Locator(".keynav-current")).ToHaveCount(0))

	rows := page.GetByTestId("letter-row")
	must(t, expect.Locator(rows).ToHaveCount(3))
	must(t, page.Keyboard().Press("j"))
	must(t, expect.Locator(rows.Nth(0)).ToHaveClass(regexp.MustCompile(`keynav-current`)))
	must(t, page.Keyboard().Press("j"))
	must(t, page.Keyboard().Press("j"))
	must(t, page.Keyboard().Press("k"))
	must(t, expect.Locator(rows.Nth(1)).ToHaveClass(regexp.MustCompile(`keynav-current`)))
	must(t, expect.Locator(page.Locator(".keynav-current")).ToHaveCount(1))
	screenshot(t, page, "keynav-row")
	id, err := rows.Nth(1).GetAttribute("data-id")
	must(t, err)
	must(t, page.Keyboard().Press("Control+j")) // modifiers: not a shortcut
	must(t, expect.Locator(rows.Nth(1)).ToHaveClass(regexp.MustCompile(`keynav-current`)))
	must(t, page.Keyboard().Press("Enter"))
	arrived(t, page, base+"/dead-letters/"+id)

	must(t, page.Keyboard().Press("g"))
	must(t, page.Keyboard().Press("g"))
	arrived(t, page, base+"/groups")
	must(t, page.Keyboard().Press("g"))
	must(t, page.Keyboard().Press("j"))
	arrived(t, page, base+"/jobs")
	must(t, page.Keyboard().Press("g"))
	must(t, page.Keyboard().Press("o"))
	arrived(t, page, base+"/")
}

// TestOutageBanner stops the database under an open overview: the page
// says in words since when it is unreachable and how old its numbers are;
// a page loaded meanwhile answers 503 and keeps the header; once the
// database is back, the banner goes and the 503 page reloads by itself.
func TestOutageBanner(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPrivate(t)
	storetest.InsertDeadLetter(t, pg.DB.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "CardDeclined", Message: "card declined"})
	base := startServer(t, pg.DB)
	// The console's CSP forbids inline scripts; axe is injected as one.
	page := newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800}, BypassCSP: playwright.Bool(true),
	})
	signIn(t, page, base, pg.DB, dlq.RoleAdmin)
	_, err := page.Goto(base + "/")
	must(t, err)
	banner := page.GetByTestId("outage")
	must(t, expect.Locator(banner).ToBeHidden())

	must(t, pg.Stop())
	long := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(45_000)}
	must(t, expect.Locator(banner).ToHaveText(regexp.MustCompile(
		`^Database unreachable since \d\d:\d\d:\d\d UTC — retrying; the numbers below are from \d\d:\d\d:\d\d UTC\.$`), long))
	must(t, expect.Locator(banner).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("count-pending")).ToHaveText("1"))
	screenshot(t, page, "outage-overview")
	expectAxeClean(t, page, "the overview with the outage banner")

	// A page loaded during the outage: 503, the header, the words.
	other, err := page.Context().NewPage()
	must(t, err)
	resp, err := other.Goto(base + "/jobs")
	must(t, err)
	if resp.Status() != 503 {
		t.Fatalf("GET /jobs during the outage: %d, want 503", resp.Status())
	}
	must(t, expect.Locator(other.GetByTestId("outage")).ToContainText("Database unreachable as of"))
	// The header: who the session says is signed in, unconfirmed, and
	// their Admin link; the page it leads to waits for the database too.
	must(t, expect.Locator(other.GetByTestId("current-user")).ToHaveText("admin (admin) · unconfirmed"))
	must(t, expect.Locator(other.GetByTestId("nav-admin")).ToBeVisible())
	must(t, expect.Locator(other.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})).ToContainText("Dead letters"))
	screenshot(t, other, "outage-page")
	expectAxeClean(t, other, "the 503 page")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, pg.Restart(ctx))
	must(t, expect.Locator(banner).ToBeHidden(playwright.LocatorAssertionsToBeHiddenOptions{Timeout: playwright.Float(45_000)}))
	// The 503 page came back by itself, whole.
	must(t, expect.Locator(other.GetByTestId("current-user")).ToHaveText("admin (admin)",
		playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(45_000)}))
	must(t, expect.Locator(other.GetByTestId("outage")).ToBeHidden())
	if title, _ := other.Title(); !strings.HasPrefix(title, "Jobs") {
		t.Errorf("the reloaded page is %q, want the jobs page", title)
	}
}

// expectAxeClean runs axe-core on page as it is now (the page's context
// must bypass the CSP) and fails on serious or critical violations.
func expectAxeClean(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	_, err := page.AddScriptTag(playwright.PageAddScriptTagOptions{Path: playwright.String(axeScript(t))})
	must(t, err)
	got, err := page.Evaluate(`async () => {
		const r = await axe.run(document, {resultTypes: ['violations']});
		return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
			.map(v => v.impact + ' ' + v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join('; '));
	}`)
	must(t, err)
	for _, v := range got.([]any) {
		t.Errorf("%s: %s", what, v)
	}
}

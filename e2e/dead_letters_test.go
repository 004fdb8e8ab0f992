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

// Browser tests of the dead-letter pages: what a person does with them,
// through the real server, with JavaScript and htmx running.

// expect holds the auto-retrying assertions every test of this package
// uses, with the harness's timeout.
var expect = playwright.NewPlaywrightAssertions(float64(defaultTimeout.Milliseconds()))

// must fails the test on an error from a Playwright call.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// letterRows returns the data-id of every row on the page, in order.
func letterRows(t *testing.T, page playwright.Page) []string {
	t.Helper()
	ids, err := page.Locator(`[data-testid="letter-row"]`).EvaluateAll(`rows => rows.map(r => r.dataset.id)`)
	must(t, err)
	var out []string
	for _, id := range ids.([]any) {
		out = append(out, fmt.Sprint(id))
	}
	return out
}

func TestDeadLettersFilterAndSearch(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	now := time.Now().UTC()
	must(t, storetest.SeedDeadLetters(context.Background(), db.DB, 300, now))
	mail := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "mailer.welcome", Queue: "email", ErrorClass: "SMTPRecipientsRefused",
		Message: "mailbox unavailable for kiwi-fruit@example.com", FailedAt: now.Add(-time.Hour)})
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "mailer.welcome", FailedAt: now.Add(-2 * time.Hour)})
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)

	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(50))
	screenshot(t, page, "dead-letters-list")

	// Filter by task: the list narrows to that task's two letters.
	must(t, page.Locator(`[data-testid="filter-task"]`).Fill("mailer.welcome"))
	must(t, page.Locator(`[data-testid="apply-filters"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(2))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-count"]`)).ToContainText("2 pending letters match"))
	must(t, expect.Page(page).ToHaveURL(base+"/dead-letters?task=mailer.welcome"))
	screenshot(t, page, "dead-letters-filtered")

	// Search by error text across all tasks.
	must(t, page.Locator(`[data-testid="filter-task"]`).Fill(""))
	must(t, page.Locator(`[data-testid="filter-q"]`).Fill("kiwi-fruit"))
	must(t, page.Locator(`[data-testid="filter-q"]`).Press("Enter"))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(1))
	if got := letterRows(t, page); len(got) != 1 || got[0] != fmt.Sprint(mail) {
		t.Fatalf("search found %v, want letter %d", got, mail)
	}

	// The pushed URL reproduces the view on a fresh load.
	_, err = page.Reload()
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(1))
	must(t, expect.Locator(page.Locator(`[data-testid="filter-q"]`)).ToHaveValue("kiwi-fruit"))

	// A search that matches nothing says so and offers a way out.
	must(t, page.Locator(`[data-testid="filter-q"]`).Fill("no-such-error-anywhere"))
	must(t, page.Locator(`[data-testid="apply-filters"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="empty"]`)).ToContainText("No dead letters match this filter"))
}

func TestDeadLettersPagingVisitsEachOnce(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	at := time.Now().UTC().Truncate(time.Second)
	want := map[string]bool{}
	for i := range 23 {
		// Runs of three letters share a failure time: the id breaks ties.
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{FailedAt: at.Add(-time.Duration(i/3) * time.Second)})
		want[fmt.Sprint(id)] = true
	}
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/dead-letters?limit=5")
	must(t, err)

	seen := map[string]int{}
	for pages := 1; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`).First()).ToBeVisible())
		for _, id := range letterRows(t, page) {
			seen[id]++
		}
		next := page.Locator(`[data-testid="next-page"]`)
		if n, _ := next.Count(); n == 0 {
			must(t, expect.Locator(page.Locator(`[data-testid="end-of-list"]`)).ToBeVisible())
			if pages != 5 {
				t.Fatalf("23 letters by 5 should be 5 pages, was %d", pages)
			}
			break
		}
		first := letterRows(t, page)[0]
		must(t, next.Click())
		// Wait for the swap: the first row changes.
		must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`).First()).Not().ToHaveAttribute("data-id", first))
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("letter %s seen %d times", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("saw %d letters, want %d", len(seen), len(want))
	}
	must(t, page.Locator(`[data-testid="newest"]`).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/dead-letters?limit=5"))
}

func TestDeadLetterDetailShowsEverything(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var tb strings.Builder
	tb.WriteString("Traceback (most recent call last):\n")
	for i := range 55 {
		fmt.Fprintf(&tb, "  File \"/srv/app/shop/step_%02d.py\", line %d, in step_%02d\n    return next_step(order)\n", i, 10+i, i)
	}
	tb.WriteString("shop.errors.InventoryConflict: SKU 4411 reserved twice")
	history := `[
		{"attempt":1,"at":"2026-03-01T09:00:00Z","host":"worker-a","version":"v2.4.1","class":"TimeoutError","message":"inventory service timed out after 30s","outcome":"retry","retry_in_ms":2300,"duration_ms":30012},
		{"attempt":2,"at":"2026-03-01T09:00:33Z","host":"worker-b","version":"v2.4.1","class":"TimeoutError","message":"inventory service timed out after 30s","outcome":"retry","retry_in_ms":9100,"duration_ms":30004},
		{"attempt":3,"at":"2026-03-01T09:01:12Z","host":"worker-a","version":"v2.4.1","class":"InventoryConflict","message":"SKU 4411 reserved twice","outcome":"dead","duration_ms":84}]`
	first := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "inventory.reserve", Status: "replayed", ReplayJobID: 9001})
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{JobID: 81234, Task: "inventory.reserve", Queue: "default",
		Args: `["ord_5521", {"sku": "4411", "qty": 2}]`, Kwargs: `{"warehouse": "ams-1", "dry_run": false}`,
		ErrorClass: "shop.errors.InventoryConflict", Message: "SKU 4411 reserved twice", Traceback: tb.String(),
		Attempts: 3, MaxAttempts: 3, Reason: "exhausted", History: history, WorkerVersion: "v2.4.1",
		FailedAt: time.Date(2026, 3, 1, 9, 1, 12, 0, time.UTC), ReplayOf: &first})
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, id))
	must(t, err)

	must(t, expect.Locator(page.Locator(`[data-testid="why"]`)).ToContainText("Exhausted 3/3 attempts"))
	must(t, expect.Locator(page.Locator(`[data-testid="args"]`)).ToContainText(`"sku": "4411"`))
	must(t, expect.Locator(page.Locator(`[data-testid="kwargs"]`)).ToContainText(`"warehouse": "ams-1"`))
	must(t, expect.Locator(page.Locator(`[data-testid="error-message"]`)).ToHaveText("SKU 4411 reserved twice"))
	must(t, expect.Locator(page.Locator(`[data-testid="traceback"]`)).ToContainText("Traceback (most recent call last):"))
	more := page.Locator(`[data-testid="traceback-more"]`)
	must(t, expect.Locator(more.Locator("summary")).ToHaveText("Show all 112 lines"))
	must(t, expect.Locator(page.Locator("pre.traceback.rest")).Not().ToBeVisible())
	must(t, expect.Locator(page.Locator(`[data-testid="attempt"]`)).ToHaveCount(3))
	must(t, expect.Locator(page.Locator(`[data-testid="attempt"]`).Nth(0)).ToContainText("retried after 2.3 s"))
	must(t, expect.Locator(page.Locator(`[data-testid="attempt"]`).Nth(2)).ToContainText("worker-a"))
	must(t, expect.Locator(page.Locator(`[data-testid="replay-of"]`)).ToContainText(fmt.Sprintf("letter %d", first)))
	screenshot(t, page, "dead-letter-detail")

	must(t, more.Locator("summary").Click())
	must(t, expect.Locator(page.Locator("pre.traceback.rest")).ToBeVisible())
	must(t, expect.Locator(page.Locator("pre.traceback.rest")).ToContainText("shop.errors.InventoryConflict: SKU 4411 reserved twice"))
}

// Markup in data is shown as text and never runs, on every page it reaches.
func TestDeadLetterMarkupNeverRuns(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	payload := `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "evil.task", ErrorClass: "Evil", Message: payload,
		Args: fmt.Sprintf(`[%q]`, payload), Kwargs: fmt.Sprintf(`{"note": %q}`, payload), Traceback: payload})
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	for _, path := range []string{"/dead-letters", fmt.Sprintf("/dead-letters/%d", id), "/groups", "/dead-letters?q=__xss"} {
		_, err := page.Goto(base + path)
		must(t, err)
		must(t, expect.Locator(page.Locator("main")).ToContainText("<script>window.__xss=1</script>"))
		xss, err := page.Evaluate(`() => typeof window.__xss`)
		must(t, err)
		if xss != "undefined" {
			t.Fatalf("%s: the payload ran (window.__xss is %v)", path, xss)
		}
		if n, _ := page.Locator("main img").Count(); n != 0 {
			t.Fatalf("%s: an <img> from the data became markup", path)
		}
	}
}

func TestDeadLettersBadFilterIsFriendly(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)

	resp, err := page.Goto(base + "/dead-letters?since=last+tuesday&limit=100000")
	must(t, err)
	if resp.Status() != 400 {
		t.Fatalf("status %d, want 400", resp.Status())
	}
	must(t, expect.Locator(page.Locator(`[data-testid="filter-error"]`)).ToContainText("Per page (limit): must be a whole number from 1 to 500"))
	must(t, expect.Locator(page.Locator(`[data-testid="filter-error"]`)).ToContainText("Failed since (since):"))
	must(t, expect.Locator(page.Locator(`[data-testid="filter-since"]`)).ToHaveValue("last tuesday"))
	screenshot(t, page, "dead-letters-bad-filter")

	// Through the form (htmx), the problem shows in place.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, page.Locator(`[data-testid="filter-until"]`).Fill("yesterday-ish"))
	must(t, page.Locator(`[data-testid="apply-filters"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="filter-error"]`)).ToContainText("Failed before (until):"))

	// A tampered cursor and an unknown letter.
	_, err = page.Goto(base + "/dead-letters?cursor=AQAGRtSGl2AAAAAAAAAAACp")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="filter-error"]`)).ToContainText("invalid cursor"))
	resp, err = page.Goto(base + "/dead-letters/987654321")
	must(t, err)
	if resp.Status() != 404 {
		t.Fatalf("unknown letter: %d", resp.Status())
	}
	must(t, expect.Locator(page.Locator(`[data-testid="error-message"]`)).ToContainText("There is no dead letter 987654321"))
	screenshot(t, page, "dead-letter-not-found")
}

func TestDeadLettersOnAPhone(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	must(t, storetest.SeedDeadLetters(context.Background(), db.DB, 60, time.Now()))
	base := startServer(t, db)
	page := newPageWith(t, playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 390, Height: 844}})
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`).First()).ToBeVisible())
	// Nothing may push the page sideways: only the table scrolls.
	wide, err := page.Evaluate(`() => document.documentElement.scrollWidth > window.innerWidth`)
	must(t, err)
	if wide == true {
		t.Error("the page is wider than the phone")
	}
	screenshot(t, page, "dead-letters-phone")
}

// The list works with JavaScript off: the form is a plain GET form and the
// pager plain links; htmx only makes them faster.
func TestDeadLettersWorkWithoutJavaScript(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	for i := range 7 {
		task := "nojs.one"
		if i%2 == 0 {
			task = "nojs.two"
		}
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: task, FailedAt: time.Now().Add(-time.Duration(i) * time.Minute)})
	}
	base := startServer(t, db)
	page := newPageWith(t, playwright.BrowserNewContextOptions{JavaScriptEnabled: playwright.Bool(false)})
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/dead-letters?limit=2")
	must(t, err)
	must(t, page.Locator(`[data-testid="filter-task"]`).Fill("nojs.two"))
	must(t, page.Locator(`[data-testid="apply-filters"]`).Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`task=nojs.two`)))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-count"]`)).ToContainText("4 pending letters match"))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(2))
	must(t, page.Locator(`[data-testid="next-page"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="end-of-list"]`)).ToBeVisible())
	must(t, expect.Locator(page.Locator(`[data-testid="letter-row"]`)).ToHaveCount(2))
}

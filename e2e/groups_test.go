package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func TestGroupsLeadToTheirLetters(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	must(t, storetest.SeedDeadLetters(context.Background(), db.DB, 400, time.Now()))
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/groups")
	must(t, err)

	first := page.Locator(`[data-testid="group-row"]`).First()
	must(t, expect.Locator(first).ToBeVisible())
	must(t, expect.Locator(first.Locator(`[data-testid="sparkline"] polyline`)).ToHaveCount(1))

	fingerprint, err := first.GetAttribute("data-fingerprint")
	must(t, err)
	pending, err := first.Locator(`[data-testid="group-pending"]`).TextContent()
	must(t, err)
	// The group's page first, then its pending letters in the list.
	must(t, first.Locator(`[data-testid="group-link"]`).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/groups/"+fingerprint))
	must(t, expect.Locator(page.Locator(`[data-testid="group-pending"]`)).ToHaveText(strings.TrimSpace(pending)))
	must(t, page.Locator(`[data-testid="group-pending"]`).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/dead-letters?fingerprint="+fingerprint))
	must(t, expect.Locator(page.Locator(`[data-testid="filter-fingerprint"]`)).ToHaveValue(fingerprint))
	// The list counts exactly what the group said was pending.
	must(t, expect.Locator(page.Locator(`[data-testid="letter-count"]`)).ToContainText(strings.TrimSpace(pending)+" pending"))

	// A short page for the picture: 400 letters make 300 groups.
	_, err = page.Goto(base + "/groups?limit=15")
	must(t, err)
	must(t, expect.Locator(page.Locator(`[data-testid="groups-pager"]`)).ToContainText("Page 1 · 15 groups a page"))
	must(t, page.Locator(`[data-testid="groups-next"]`).Click())
	must(t, expect.Locator(page.Locator(`[data-testid="group-row"]`)).ToHaveCount(15))
	must(t, expect.Locator(page.Locator(`[data-testid="groups-prev"]`)).ToBeVisible())
	screenshot(t, page, "groups")

	// Sorting is a whitelist; anything else is a friendly 400.
	resp, err := page.Goto(base + "/groups?sort=name")
	must(t, err)
	if resp.Status() != 400 {
		t.Fatalf("bad sort: %d", resp.Status())
	}
	must(t, expect.Locator(page.Locator(`[data-testid="filter-error"]`)).ToContainText("Sort by (sort):"))
}

// TestGroupPageShowsWhatVaries: the page of a payments outage leads with
// its template, says which hosts and customers it hits, and how it began
// minute by minute; a host's value opens the group's letters from that
// host.
func TestGroupPageShowsWhatVaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	const task, class = "payments.charge", "ProviderTimeout"
	message := func(i int) string {
		host := []string{"payments-3.eu-west-1", "payments-3.eu-west-1", "payments-3.eu-west-1", "payments-1.eu-west-1"}[i%4]
		if i%9 == 0 {
			host = "payments-7.us-east-2"
		}
		return fmt.Sprintf("request req_%08x to %s timed out after 30s while confirming pi_%08xA9s2eZvKYlo2C for customer cus_Q8dK%02dmZ1xLp",
			0x33707b4c+i*7919, host, uint32(i+1)*2654435761, i%9)
	}
	// The template the grouper learns from these letters, kept as it keeps
	// it (the suite may not import the grouping package).
	fp := storetest.GroupID(task, class, "request timed out")
	_, err := db.ExecContext(ctx, `INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq)
		SELECT $1, $2, $3, '', w, array_fill(false, ARRAY[cardinality(w)]), nextval('error_templates_seq')
		FROM string_to_array($4, ' ') w`,
		fp, task, class, "request <*> to <*> timed out after <*> while confirming <*> for customer <*>")
	must(t, err)
	// The outage began 38 minutes ago and grew.
	now := time.Now().UTC()
	for i := range 47 {
		at := now.Add(-38*time.Minute + time.Duration(i*i)*time.Second)
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: task, Queue: "payments", ErrorClass: class,
			Message: message(i), Fingerprint: fp, FailedAt: at, Args: fmt.Sprintf(`[{"order": "ord_%d"}]`, 5000+i)})
	}
	base := startServer(t, db)
	page := newPageWith(t, playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 1280, Height: 900},
		// The console's CSP forbids inline scripts; axe is injected as one.
		BypassCSP: playwright.Bool(true)})
	signIn(t, page, base, db, dlq.RoleOperator)
	_, err = page.Goto(base + "/groups/" + fp)
	must(t, err)

	must(t, expect.Locator(byTestID(page, "group-template")).ToHaveText(
		"request ‹1› to ‹2› timed out after ‹3› while confirming ‹4› for customer ‹5›"))
	must(t, expect.Locator(byTestID(page, "group-id")).ToHaveText(fp))
	must(t, expect.Locator(byTestID(page, "group-edit")).ToHaveAttribute("href", "/groups/"+fp+"/edit"))
	rows := byTestID(page, "group-variable")
	must(t, expect.Locator(rows).ToHaveCount(5))
	must(t, expect.Locator(rows.Nth(1).Locator(`[data-testid="variable-value"]`).First()).ToContainText("payments-3.eu-west-1 31 of 47 · 66%"))
	must(t, expect.Locator(rows.Nth(3).Locator(`[data-testid="variable-values"]`)).ToHaveText("every letter its own: pi_…"))
	must(t, expect.Locator(byTestID(page, "group-minutely-mark")).ToHaveCount(1))
	screenshot(t, page, "group-page-what-varies")
	axeClean(t, page, "the group page with its variables")
	must(t, page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeDark}))
	axeClean(t, page, "the group page with its variables, dark")
	must(t, page.SetViewportSize(390, 844))
	screenshot(t, page, "phone-group-page-what-varies")

	// The host's value lists the group's letters from that host.
	must(t, rows.Nth(1).Locator("a").First().Click())
	must(t, expect.Locator(byTestID(page, "letter-row")).ToHaveCount(31))
}

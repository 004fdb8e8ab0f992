package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

func TestGroupsLeadToTheirLetters(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)
	must(t, dlqtest.SeedDeadLetters(context.Background(), db.DB, 400, time.Now()))
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

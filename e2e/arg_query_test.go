package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// An on-call engineer narrows the list by a qualifier on the arguments,
// picks a suggested value, and discards exactly those letters: the
// confirmation counts them exactly and the operation acts on them alone.
func TestArgumentQueryAsBulkSelection(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var de, others []int64
	for i := range 24 {
		country := []string{"DE", "FR", "US"}[i%3]
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Queue: "payments",
			Args: fmt.Sprintf(`["ORD-%d"]`, 1000+i), Kwargs: fmt.Sprintf(`{"country": %q, "amount": %d, "card_number": "4242424242424242"}`, country, 50*i),
			ErrorClass: "CardDeclined", Message: fmt.Sprintf("card declined for order ORD-%d", 1000+i),
			FailedAt: time.Now().UTC().Add(-time.Duration(30-i) * time.Minute)})
		if country == "DE" && 50*i > 300 {
			de = append(de, id)
		} else {
			others = append(others, id)
		}
	}
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	// The keys of the letters in view are suggested, the masked one never.
	must(t, expect.Locator(page.Locator(`[data-testid="arg-key"][data-path="kwargs.country"]`)).ToBeVisible())
	must(t, expect.Locator(page.Locator(`[data-testid="arg-key"][data-path="kwargs.card_number"]`)).ToHaveCount(0))

	// A search by the masked key is refused with a reason, and lists nothing.
	must(t, byTestID(page, "filter-q").Fill("kwargs.card_number:4242424242424242"))
	must(t, byTestID(page, "apply-filters").Click())
	must(t, expect.Locator(byTestID(page, "filter-error")).ToContainText("kwargs.card_number is masked"))

	// A bad query says what is wrong.
	must(t, byTestID(page, "filter-q").Fill("kwargs.amount>lots"))
	must(t, byTestID(page, "apply-filters").Click())
	must(t, expect.Locator(byTestID(page, "filter-error")).ToContainText("compares numbers"))
	screenshot(t, page, "arg-query-error")

	// A suggested value narrows the list; a range narrows it further.
	must(t, byTestID(page, "filter-q").Fill(""))
	must(t, byTestID(page, "apply-filters").Click())
	must(t, page.Locator(`[data-testid="arg-value"][data-qualifier="kwargs.country:DE"]`).Click())
	must(t, expect.Locator(byTestID(page, "letter-count")).ToContainText("8 pending letters match"))
	must(t, expect.Locator(byTestID(page, "filter-q")).ToHaveValue("kwargs.country:DE"))
	must(t, byTestID(page, "filter-q").Fill("kwargs.country:DE and kwargs.amount>300"))
	must(t, byTestID(page, "apply-filters").Click())
	must(t, expect.Locator(byTestID(page, "letter-count")).ToContainText(fmt.Sprintf("%d pending letters match", len(de))))
	must(t, expect.Locator(byTestID(page, "letter-row")).ToHaveCount(len(de)))
	screenshot(t, page, "arg-query-list")

	must(t, byTestID(page, "select-all-matching").Check())
	must(t, byTestID(page, "bulk-discard").Click())
	must(t, expect.Locator(byTestID(page, "confirm-count")).ToHaveText(fmt.Sprint(len(de))))
	must(t, expect.Locator(byTestID(page, "confirm-selection")).ToContainText("kwargs.country:DE and kwargs.amount>300"))
	must(t, byTestID(page, "confirm-reason").Fill("German test orders from the staging shop"))
	screenshot(t, page, "arg-query-confirm")
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Locator(byTestID(page, "op-state")).ToContainText("Done"))

	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE id = ANY($1) AND status = 'discarded'`, int64s(de)); n != len(de) {
		t.Fatalf("%d of the %d matching letters discarded", n, len(de))
	}
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE id = ANY($1) AND status = 'pending'`, int64s(others)); n != len(others) {
		t.Fatalf("letters outside the query were discarded: %d of %d still pending", n, len(others))
	}
	expectAuditEntry(t, page, base, dlq.ActionBulkStart, "olga", fmt.Sprintf("%d matched", len(de)))
}

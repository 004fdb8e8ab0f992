package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Replay somewhere else, or later: from a letter's page, a replay into a
// sandbox queue with one attempt, refused first for a start time in the
// past (nothing done, the fields kept); from the list, a bulk replay that
// starts in an hour, shown on the confirmation and the operation's page,
// and in the audit trail.
func TestReplayElsewhereOrLater(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 4, "billing.charge")
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, ids[0]))
	must(t, err)
	must(t, page.Locator(`[data-testid="target-details"] summary`).Click())
	must(t, expect.Locator(byTestID(page, "target-queue")).ToHaveAttribute("placeholder", "payments"))
	must(t, byTestID(page, "target-queue").Fill("sandbox"))
	must(t, byTestID(page, "target-start_at").Fill("2020-01-01T09:00"))
	must(t, byTestID(page, "target-max_attempts").Fill("1"))
	must(t, byTestID(page, "target-reason").Fill("try the fix on the sandbox first"))
	must(t, byTestID(page, "target-replay").Click())
	must(t, expect.Locator(byTestID(page, "target-start_at-problem")).ToContainText("is in the past"))
	must(t, expect.Locator(byTestID(page, "target-queue")).ToHaveValue("sandbox"))
	screenshot(t, page, "replay-target-refused")
	if n := countRows(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatal("a replay refused for its start time made a job")
	}
	must(t, byTestID(page, "target-start_at").Fill(""))
	must(t, byTestID(page, "target-replay").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("Replayed as job"))
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = $1 AND queue = 'sandbox' AND max_attempts = 1`, ids[0]); n != 1 {
		t.Fatal("the replay did not run in the sandbox queue with one attempt")
	}
	must(t, expect.Locator(page.Locator(`[data-testid="letter-audit"]`)).ToContainText("sandbox"))
	screenshot(t, page, "replay-target-done")

	// The rest, in an hour, from the list.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	for _, id := range ids[1:] {
		must(t, page.Locator(fmt.Sprintf(`[data-testid="letter-row"][data-id="%d"] input[name="id"]`, id)).Check())
	}
	must(t, byTestID(page, "bulk-replay").Click())
	must(t, expect.Locator(byTestID(page, "confirm-target")).ToBeVisible())
	start := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	must(t, byTestID(page, "target-start_at").Fill(start.Format("2006-01-02T15:04")))
	screenshot(t, page, "bulk-confirm-target")
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	must(t, expect.Locator(byTestID(page, "op-target")).ToHaveText("from "+start.Format("2006-01-02 15:04 UTC")))
	screenshot(t, page, "operation-target")
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = ANY($1) AND run_at >= $2 AND queue = 'payments'`,
		int64s(ids[1:]), start); n != 3 {
		t.Fatalf("%d of the 3 letters replayed to start at %s in their own queue", n, start)
	}
	expectAuditEntry(t, page, base, dlq.ActionBulkStart, "olga", "3 matched")
}

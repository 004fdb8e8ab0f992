package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
)

// TestAuditTrail: the audit page after a morning of work — a replay, an
// edit, a discard and a bulk replay by olga — filtered by person and by
// letter, one entry opened to the letters it touched, and exported.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 6, "billing.charge")
	base, store := startActionServer(t, db)
	ctx := context.Background()
	svc := replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue})
	olga := replay.Actor{Actor: dlq.Actor{Name: "olga", RequestID: "req-7f3a", RemoteAddr: "10.1.2.3", UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/156"}, Role: dlq.RoleOperator}
	if _, err := svc.Replay(ctx, replay.ReplayRequest{ID: ids[0], Actor: olga, Reason: "processor fixed"}); err != nil {
		t.Fatal(err)
	}
	edited := `[2, {"order": "ORD-1001", "amount": "12.00"}]`
	if _, err := svc.Replay(ctx, replay.ReplayRequest{ID: ids[1], Actor: olga, Args: &edited, Reason: "amount was in cents"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Discard(ctx, replay.DiscardRequest{ID: ids[2], Actor: olga, Reason: "test order from staging"}); err != nil {
		t.Fatal(err)
	}
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: olga, Reason: "the rest of the outage",
		Selection: dlq.Selection{IDs: ids[2:]}})
	must(t, err)
	// Enqueued, then its replays run (as a worker would: none runs here).
	storetest.WaitFor(t, 20*time.Second, "the operation to settle", func() bool {
		op, err = store.Operations.Operation(ctx, op.ID)
		must(t, err)
		return op.State == dlq.OpSettling
	})
	succeedJobs(t, db)
	if op, err = svc.Wait(ctx, op.ID, 20*time.Second); err != nil || op.State != dlq.OpDone {
		t.Fatalf("bulk replay: %+v %v", op, err)
	}

	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err = page.Goto(base + "/audit?actor=olga")
	must(t, err)
	entries := page.Locator(`[data-testid="audit-entry"]`)
	must(t, expect.Locator(entries).ToHaveCount(6)) // her five actions and her sign-in
	first := page.Locator(`[data-action="bulk_finish"]`)
	must(t, expect.Locator(first.Locator(`[data-testid="audit-counts"]`)).ToContainText("3 replayed"))
	must(t, expect.Locator(first.Locator(`[data-testid="audit-counts"]`)).ToContainText("1 skipped"))
	edit := page.Locator(`[data-action="edit_replay"]`)
	must(t, expect.Locator(edit.Locator(`[data-testid="audit-diff"]`)).ToContainText(`+ "amount": "12.00"`))
	must(t, expect.Locator(edit.Locator(`[data-testid="audit-request"]`)).ToContainText("10.1.2.3"))
	screenshot(t, page, "audit")

	// Filter by one letter: the bulk replay that replayed it.
	must(t, page.Locator(`[data-testid="filter-dead_letter_id"]`).Fill(fmt.Sprint(ids[3])))
	must(t, page.Locator(`[data-testid="audit-apply"]`).Click())
	must(t, expect.Locator(entries).ToHaveCount(1))
	must(t, expect.Locator(entries.First()).ToHaveAttribute("data-action", "bulk_start"))

	// The bulk entry opens to the letters it replayed.
	must(t, entries.First().Locator(`[data-testid="audit-open"]`).Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/audit/\d+$`)))
	must(t, expect.Locator(page.Locator(`[data-testid="entry-letter"]`)).ToHaveCount(3))
	must(t, expect.Locator(page.Locator(`[data-testid="entry-letters-total"]`)).ToHaveText("3 letters, in id order"))
	screenshot(t, page, "audit-entry")
	must(t, page.Locator(`[data-testid="entry-letter"] a`).First().Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(fmt.Sprintf(`/dead-letters/%d$`, ids[3]))))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-audit"] [data-testid="audit-entry"]`)).ToHaveCount(1))

	// Export what the filter shows, as JSON.
	_, err = page.Goto(base + "/audit?action=discard")
	must(t, err)
	download, err := page.ExpectDownload(func() error {
		return page.Locator(`[data-testid="audit-export-json"]`).Click()
	})
	must(t, err)
	path, err := download.Path()
	must(t, err)
	raw, err := os.ReadFile(path)
	must(t, err)
	var exported []map[string]any
	if err := json.Unmarshal(raw, &exported); err != nil || len(exported) != 1 || exported[0]["reason"] != "test order from staging" {
		t.Fatalf("export: %v %s", err, raw)
	}
}

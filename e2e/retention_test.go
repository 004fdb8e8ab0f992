package e2e

import (
	"context"
	"log/slog"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestRetentionSeenComing has letters settled 40 days ago in two groups,
// one of which is still failing, and a console that keeps settled letters
// 30 days. A purge took the quiet group's letters and held the growing
// group's; the overview says what the next purge removes and when, names
// the held purge, and an operator confirms it there (audited). The letter
// list says the same of the next purge.
func TestRetentionSeenComing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	old := time.Now().Add(-40 * 24 * time.Hour)
	for range 3 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "card-declined", FailedAt: old, Status: "discarded"})
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", Fingerprint: "card-declined"}) // still failing
	n, holds, err := store.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: 30 * 24 * time.Hour, Now: time.Now(), Actor: dlq.Actor{Name: "retention"}})
	must(t, err)
	if n != 0 || len(holds) != 1 {
		t.Fatalf("purged %d, holds %+v; want the growing group held", n, holds)
	}
	// Settled since that purge: the next one removes these two.
	for range 2 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "mail.send", Fingerprint: "smtp-down", FailedAt: old, Status: "replayed"})
	}

	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e", RetainLetters: 30 * 24 * time.Hour})
	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("retention-next")).ToContainText("removes 2 replayed or discarded letters"))
	hold := page.GetByTestId("purge-hold")
	must(t, expect.Locator(hold).ToContainText("3 settled letters of billing.charge are kept because the group is still growing"))
	screenshot(t, page, "retention-overview")

	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("retention-next")).ToContainText("removes 2"))

	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, page.GetByTestId("purge-confirm").Click())
	must(t, expect.Locator(page.GetByTestId("purge-done")).ToContainText("Purged 3 settled letters of group card-declined"))
	must(t, expect.Locator(page.GetByTestId("purge-hold")).ToHaveCount(0))
	screenshot(t, page, "retention-confirmed")
	var left, audited int
	must(t, db.Get(&left, `SELECT count(*) FROM dead_letters WHERE fingerprint = 'card-declined'`))
	must(t, db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = 'purge_confirm' AND actor = 'olga'`))
	if left != 1 || audited != 1 {
		t.Errorf("%d letters of the group left (want the pending one), %d confirmations audited (want 1)", left, audited)
	}
}

package e2e

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker/demo"
)

// startDemoServer serves the console as `redrive dev` does, with the demo
// incident's payments provider down since a minute ago.
func startDemoServer(t *testing.T, db *storetest.DB) string {
	t.Helper()
	store := storetest.NewStores(db.DB)
	must(t, demo.EnsureSchema(context.Background(), db.DB))
	outages := demo.NewOutages(db.DB, store.Audit)
	now := time.Now()
	must(t, outages.Schedule(context.Background(), demo.PaymentsProvider, now.Add(-time.Minute), now.Add(4*time.Minute)))
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e",
		Demo: redrive.NewDemoOutage(outages)})
	return base
}

// In dev, the overview tells the demo incident: while the payments
// provider is down its panel links to the incident (the same 503 in
// payments.charge and payments.refund, one error group each); an operator
// deploys the fix from there (audited), and the panel's replay is then one
// operation over both tasks, starting with a canary.
func TestDemoIncidentDeployTheFix(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	groups := outageLetters(t, db, 18, 6)
	base := startDemoServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleOperator)

	_, err := page.Goto(base + "/")
	must(t, err)
	panel := page.GetByTestId("demo-incident")
	must(t, expect.Locator(panel).ToContainText("has been down since"))
	link := panel.GetByTestId("demo-failure-link")
	must(t, expect.Locator(link).ToHaveText("ServiceUnavailable in payments.charge, payments.refund"))
	must(t, expect.Locator(panel.GetByTestId("demo-failure")).ToContainText("24 pending"))
	screenshot(t, page, "overview-demo-incident")

	// While the outage lasts, the panel leads to the incident's page.
	must(t, link.Click())
	must(t, expect.Page(page).ToHaveURL(base+"/incidents/"+groups[demo.TaskCharge]))
	must(t, expect.Locator(page.GetByTestId("incident-group")).ToHaveCount(2))
	screenshot(t, page, "demo-incident-page")

	_, err = page.Goto(base + "/")
	must(t, err)
	must(t, page.GetByTestId("demo-deploy-fix").Click())
	must(t, expect.Locator(page.GetByTestId("flash")).ToContainText("Deployed the fix: the payments-provider is back up"))
	must(t, expect.Locator(panel).ToContainText("is back since"))
	must(t, expect.Locator(page.GetByTestId("demo-deploy-fix")).ToHaveCount(0))
	screenshot(t, page, "overview-demo-fixed")

	var audited int
	must(t, db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = $1 AND actor = $2`, dlq.ActionDemo, string(dlq.RoleOperator)))
	if audited != 1 {
		t.Fatalf("%d demo actions audited, want 1", audited)
	}

	// The fix is out: the panel's replay is one operation over both tasks.
	must(t, panel.GetByTestId("demo-replay").Click())
	must(t, expect.Locator(page.GetByTestId("confirm-title")).ToHaveText("Replay 24 dead letters?"))
	must(t, expect.Locator(page.GetByTestId("confirm-canary")).ToBeChecked())
	must(t, expect.Locator(page.GetByTestId("confirm-by-task")).ToContainText("payments.refund"))
	must(t, page.GetByTestId("confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	must(t, expect.Locator(page.GetByTestId("op-state")).ToHaveText("Canary running: waiting for its jobs"))
	expectOneReplayOfBothTasks(t, db, groups, 24)
}

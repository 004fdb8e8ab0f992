package e2e

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
	redrive "github.com/redrive/redrive/internal/cli"
	"github.com/redrive/redrive/worker/demo"
)

// startDemoServer serves the console as `redrive dev` does, with the demo
// incident's payments provider down since a minute ago.
func startDemoServer(t *testing.T, db *dlqtest.DB) string {
	t.Helper()
	store := dlq.NewStore(db.DB)
	outages := demo.NewOutages(db.DB, store)
	now := time.Now()
	must(t, outages.Schedule(context.Background(), demo.PaymentsProvider, now.Add(-time.Minute), now.Add(4*time.Minute)))
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{Store: store, Logger: logger, Version: "e2e",
		Demo: redrive.NewDemoOutage(outages)})
	return base
}

// In dev, the overview tells the demo incident and an operator deploys its
// fix from there: audited, and the page then says the provider is back.
func TestDemoIncidentDeployTheFix(t *testing.T) {
	t.Parallel()
	db := overviewFixture(t)
	base := startDemoServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleOperator)

	_, err := page.Goto(base + "/")
	must(t, err)
	panel := page.GetByTestId("demo-incident")
	must(t, expect.Locator(panel).ToContainText("has been down since"))
	screenshot(t, page, "overview-demo-incident")
	must(t, page.GetByTestId("demo-deploy-fix").Click())
	must(t, expect.Locator(panel).ToContainText("is back since"))
	must(t, expect.Locator(page.GetByTestId("demo-deploy-fix")).ToHaveCount(0))
	screenshot(t, page, "overview-demo-fixed")

	var audited int
	must(t, db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = $1 AND actor = $2`, dlq.ActionDemo, string(dlq.RoleOperator)))
	if audited != 1 {
		t.Fatalf("%d demo actions audited, want 1", audited)
	}
}

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestGroupReplayStartsSafe: an on-call engineer opens a group of 30
// pending letters and clicks "Replay this group": the confirmation starts
// with a canary of 10, a pace of 50 a second and the died-again guard at
// 20% filled in, and says that live workers still run the build the
// letters failed on. The engineer clears the pace and keeps the canary:
// the operation stops after its first 10 letters.
func TestGroupReplayStartsSafe(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	const task, class, build = "billing.charge", "ProviderTimeout", "v2.3.1"
	fp := storetest.GroupID(task, class, "payment provider timed out after 30s")
	for i := range 30 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: task, Queue: "payments", ErrorClass: class,
			Message: "payment provider timed out after 30s", Fingerprint: fp, WorkerVersion: build,
			Args: fmt.Sprintf(`[{"order": "ORD-%d"}]`, 2000+i), FailedAt: time.Now().UTC().Add(-time.Duration(30-i) * time.Minute)})
	}
	base, store := startActionServer(t, db)
	// The fleet still runs the build the letters failed on: the fix is
	// not deployed yet.
	must(t, store.Queue.RegisterWorker(context.Background(), dlq.WorkerInfo{ID: "worker-7f3a", Host: "pay-worker-1", PID: 4242,
		Version: build, Queues: []string{"payments"}, Tasks: []string{task}, Concurrency: 8}))
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/groups/" + fp)
	must(t, err)
	must(t, expect.Locator(byTestID(page, "group-pending")).ToHaveText("30"))
	must(t, byTestID(page, "group-replay").Click())

	must(t, expect.Locator(byTestID(page, "confirm-title")).ToHaveText("Replay 30 dead letters?"))
	must(t, expect.Locator(byTestID(page, "confirm-canary")).ToBeChecked())
	must(t, expect.Locator(byTestID(page, "confirm-canary-size")).ToHaveValue("10"))
	must(t, expect.Locator(byTestID(page, "confirm-rate")).ToHaveValue("50"))
	must(t, expect.Locator(byTestID(page, "confirm-died-again")).ToHaveValue("20"))
	// Too few letters for the guard to judge: the page says so.
	must(t, expect.Locator(byTestID(page, "confirm-guard-never-judges")).ToContainText("With 30 letters the guard never judges"))
	must(t, expect.Locator(byTestID(page, "version-warning")).ToContainText(
		"The newest of these letters failed on "+build+" and live workers still run "+build))
	screenshot(t, page, "group-replay-confirmation")

	// Every choice stays the engineer's: no pace, the canary kept.
	must(t, byTestID(page, "confirm-rate").Fill(""))
	must(t, byTestID(page, "confirm-reason").Fill("provider back; trying 10 first"))
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary running: waiting for its jobs"))
	if n := countRows(t, db, `SELECT count(*) FROM jobs`); n != 10 {
		t.Fatalf("%d jobs after the canary, want 10", n)
	}
	var rate *float64
	var guard *float64
	must(t, db.QueryRow(`SELECT rate_per_second, died_again_percent FROM operations`).Scan(&rate, &guard))
	if rate != nil || guard == nil || *guard != 20 {
		t.Fatalf("operation: pace %v, guard %v; want no pace and the guard at 20%%", rate, guard)
	}
}

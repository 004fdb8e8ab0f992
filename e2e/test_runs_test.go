package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// A test job before a group replay, with a real worker on the sandbox
// queue whose fix works only for the US region: from a letter's page a
// test job with the letter's own arguments dies (its error shown, its
// letter filed as a test), and one with edited kwargs succeeds, both
// followed live while the letter stays pending; from the group's page the
// newest letter's form opens; from the jobs page a job typed in by hand is
// refused for a misspelt task, naming the right one, then enqueued. Each
// is audited.
func TestTestRunsAndEnqueue(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 2, "billing.charge")
	base, store := startActionServer(t, db)

	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(_ context.Context, j *worker.Job) error {
		if !strings.Contains(string(j.Kwargs), `"us"`) {
			return worker.Permanent(errors.New("CardDeclined: still declined outside the US"))
		}
		return nil
	}, worker.TaskOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- redrive.RunWorker(ctx, store.DB, worker.Config{Registry: reg, Queues: []string{"sandbox"}, Concurrency: 1,
			PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})

	page := newPage(t)
	signInOlga(t, page, base, db)
	newest := ids[len(ids)-1]

	// From the group's page: its newest letter's test run form, open.
	var fp string
	must(t, db.Get(&fp, `SELECT fingerprint FROM dead_letters WHERE id = $1`, newest))
	_, err := page.Goto(base + "/groups/" + fp)
	must(t, err)
	must(t, byTestID(page, "group-test-run").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(fmt.Sprintf(`/dead-letters/%d\?test=1#test-runs$`, newest))))
	must(t, expect.Locator(byTestID(page, "test-run-form")).ToBeVisible())
	must(t, expect.Locator(byTestID(page, "test-queue")).ToHaveAttribute("placeholder", "payments"))
	screenshot(t, page, "test-run-form-from-group")

	// The letter's own arguments, on the sandbox: the test job dies.
	must(t, byTestID(page, "test-queue").Fill("sandbox"))
	must(t, byTestID(page, "test-run-reason").Fill("does the fix work?"))
	must(t, byTestID(page, "test-run").Click())
	must(t, expect.Locator(byTestID(page, "test-run-result")).ToContainText("enqueued on queue sandbox with at most 1 attempt"))
	dead := page.Locator(`[data-testid="test-run-job"][data-state="dead"]`)
	must(t, expect.Locator(dead).ToHaveCount(1))
	must(t, expect.Locator(dead.Locator(`[data-testid="test-run-error"]`)).ToContainText("still declined outside the US"))
	must(t, expect.Locator(dead.Locator(`[data-testid="test-run-letter"]`)).ToContainText("(a test, discarded)"))
	must(t, expect.Locator(page.Locator(".detail-head .badge")).ToHaveText("pending"))
	screenshot(t, page, "test-run-died")

	// Edited kwargs: the second test job succeeds, listed first.
	must(t, page.Locator(`[data-testid="test-run-details"] summary`).Click())
	must(t, byTestID(page, "test-kwargs").Fill(`{"region": "us"}`))
	must(t, byTestID(page, "test-queue").Fill("sandbox"))
	must(t, byTestID(page, "test-run").Click())
	must(t, expect.Locator(page.Locator(`[data-testid="test-run-job"]`).First()).ToHaveAttribute("data-state", "succeeded"))
	must(t, expect.Locator(byTestID(page, "test-run-jobs")).ToHaveAttribute("data-live", "false"))
	screenshot(t, page, "test-run-succeeded")
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != len(ids) {
		t.Fatalf("%d pending letters after two test runs; want the %d there were", n, len(ids))
	}
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of IS NOT NULL`); n != 0 {
		t.Fatal("a test run was counted as a replay")
	}
	expectAuditEntry(t, page, base, dlq.ActionTestRun, "olga", "1 test job")

	// "Enqueue a job" from the jobs page: a misspelt task, then the right one.
	_, err = page.Goto(base + "/jobs")
	must(t, err)
	must(t, byTestID(page, "enqueue-link").Click())
	must(t, byTestID(page, "enqueue-task").Fill("billing.chrage"))
	must(t, byTestID(page, "enqueue-queue").Fill("sandbox"))
	must(t, byTestID(page, "enqueue-kwargs").Fill(`{"region": "us"}`))
	must(t, byTestID(page, "enqueue").Click())
	must(t, expect.Locator(byTestID(page, "enqueue-task-problem")).ToContainText("did you mean billing.charge?"))
	must(t, expect.Locator(byTestID(page, "enqueue-kwargs")).ToHaveValue(`{"region": "us"}`))
	screenshot(t, page, "enqueue-refused")
	must(t, byTestID(page, "enqueue-task").Fill("billing.charge"))
	must(t, byTestID(page, "enqueue-reason").Fill("charge ORD-1 again by hand"))
	must(t, byTestID(page, "enqueue").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/jobs/\d+$`)))
	screenshot(t, page, "enqueued-job")
	expectAuditEntry(t, page, base, dlq.ActionJobEnqueue, "olga", "1 job enqueued")
}

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// Browser tests of replay, discard, edit and bulk operations: a person
// signed in as an operator, clicking through the real pages with
// JavaScript and htmx, against a server that runs the bulk-operation
// runner beside it as `redrive serve` does.

// actionTasks are the tasks the fixtures' letters belong to; a replay
// needs a task some worker registered.
var actionTasks = []string{"billing.charge", "email.send", "reports.build"}

// startActionServer is startServer with the tasks the fixtures' letters
// belong to registered, and a runner that polls quickly. It returns the
// base URL and the store.
func startActionServer(t *testing.T, db *storetest.DB) (string, *storetest.Stores) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(context.Background(), actionTasks); err != nil {
		t.Fatal(err)
	}
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e", RunnerPollInterval: 100 * time.Millisecond})
	return base, store
}

// succeedJobs does what a worker would with every job waiting: run it,
// successfully (the action server runs the bulk runner, not a worker).
func succeedJobs(t *testing.T, db *storetest.DB) {
	t.Helper()
	if _, err := db.Exec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE state IN ('available', 'retrying')`); err != nil {
		t.Fatal(err)
	}
}

// signInOlga signs the page in as olga, an operator.
func signInOlga(t *testing.T, page playwright.Page, base string, db *storetest.DB) {
	t.Helper()
	ensureUser(t, db, "olga", dlq.RoleOperator)
	signInAs(t, page, base, "olga", webtest.Password)
}

// actionLetters inserts n pending letters of task and returns their ids.
func actionLetters(t *testing.T, db *storetest.DB, n int, task string) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		ids = append(ids, storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: task, Queue: "payments",
			Args: fmt.Sprintf(`[%d, {"order": "ORD-%d"}]`, i+1, 1000+i), Kwargs: `{"region": "eu"}`,
			ErrorClass: "CardDeclined", Message: fmt.Sprintf("card declined for order ORD-%d", 1000+i),
			WorkerVersion: "v1.4.2", FailedAt: time.Now().UTC().Add(-time.Duration(n-i) * time.Minute)}))
	}
	return ids
}

func countRows(t *testing.T, db *storetest.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func byTestID(page playwright.Page, id string) playwright.Locator {
	return page.Locator(`[data-testid="` + id + `"]`)
}

// expectAuditEntry opens the audit page filtered by action and checks
// that its newest entry names the actor and shows the counts.
func expectAuditEntry(t *testing.T, page playwright.Page, base, action, actor string, counts ...string) {
	t.Helper()
	_, err := page.Goto(base + "/audit?action=" + action)
	must(t, err)
	entry := page.Locator(`[data-testid="audit-entry"]`).First()
	must(t, expect.Locator(entry).ToHaveAttribute("data-action", action))
	must(t, expect.Locator(entry.Locator(`[data-testid="audit-actor"]`)).ToHaveText(actor))
	for _, c := range counts {
		must(t, expect.Locator(entry.Locator(`[data-testid="audit-counts"]`)).ToContainText(c))
	}
}

func TestBulkReplaySelectedRows(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 6, "billing.charge")
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	picked := ids[1:4]
	for _, id := range picked {
		must(t, page.Locator(fmt.Sprintf(`[data-testid="letter-row"][data-id="%d"] input[name="id"]`, id)).Check())
	}
	must(t, expect.Locator(byTestID(page, "selected-count")).ToHaveText("3 selected"))
	must(t, byTestID(page, "bulk-replay").Click())

	must(t, expect.Locator(byTestID(page, "confirm-count")).ToHaveText("3"))
	must(t, expect.Locator(byTestID(page, "confirm-title")).ToHaveText("Replay 3 dead letters?"))
	must(t, expect.Locator(page.Locator(`[data-testid="sample-row"]`)).ToHaveCount(3))
	must(t, expect.Locator(byTestID(page, "confirm-bound")).ToContainText(fmt.Sprintf("up to id %d", ids[3])))
	must(t, byTestID(page, "confirm-reason").Fill("card processor fixed in v1.4.3"))
	screenshot(t, page, "bulk-confirmation")
	must(t, byTestID(page, "confirm").Click())

	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))
	// Handed to the queue; no worker runs here, so the replays wait.
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	must(t, expect.Locator(byTestID(page, "outcome-replayed")).ToHaveText("3 enqueued for replay"))
	must(t, expect.Locator(byTestID(page, "op-count")).ToHaveText("3 of 3 handled · 100%"))
	succeedJobs(t, db)
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Done"))
	must(t, expect.Locator(byTestID(page, "replays-succeeded")).ToHaveText("3 succeeded"))
	screenshot(t, page, "operation-done")
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = ANY($1)`, int64s(picked)); n != 3 {
		t.Fatalf("%d replay jobs for the three picked letters, want 3", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM jobs`); n != 3 {
		t.Fatalf("%d jobs in all, want 3", n)
	}
	expectAuditEntry(t, page, base, dlq.ActionBulkFinish, "olga", "3 matched", "3 replayed")
}

func TestReplayAllMatchingAFilter(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	actionLetters(t, db, 4, "billing.charge")
	reports := actionLetters(t, db, 60, "reports.build")
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, page.Locator(`[data-testid="filter-task"]`).Fill("reports.build"))
	must(t, page.Locator(`[data-testid="apply-filters"]`).Click())
	must(t, expect.Locator(byTestID(page, "letter-count")).ToContainText("60 pending letters match"))
	must(t, byTestID(page, "select-all-matching").Check())
	must(t, expect.Locator(byTestID(page, "selected-count")).ToHaveText("All 60 matching letters selected"))
	screenshot(t, page, "dead-letters-all-matching-selected")
	must(t, byTestID(page, "bulk-replay").Click())

	must(t, expect.Locator(byTestID(page, "confirm-count")).ToHaveText("60"))
	must(t, expect.Locator(byTestID(page, "confirm-selection")).ToContainText("task reports.build, pending"))
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	must(t, expect.Locator(byTestID(page, "outcome-replayed")).ToHaveText("60 enqueued for replay"))
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = ANY($1)`, int64s(reports)); n != 60 {
		t.Fatalf("%d of the 60 matching letters replayed", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE task = 'billing.charge' AND status = 'pending'`); n != 4 {
		t.Fatal("letters outside the filter were replayed")
	}
	expectAuditEntry(t, page, base, dlq.ActionBulkStart, "olga", "60 matched")
	must(t, expect.Locator(page.Locator(`[data-testid="audit-selection"]`).First()).ToContainText("task reports.build"))
}

func TestDiscardWithAReason(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	id := actionLetters(t, db, 1, "billing.charge")[0]
	base, store := startActionServer(t, db)
	// A live worker still runs the build the letter failed on.
	must(t, store.Queue.RegisterWorker(context.Background(), dlq.WorkerInfo{ID: "w1", Host: "worker-7d9f4c-x2kqp", PID: 7,
		Version: "v1.4.2", Queues: []string{"payments"}, Tasks: []string{"billing.charge"}, Concurrency: 4}))
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, id))
	must(t, err)
	must(t, expect.Locator(byTestID(page, "version-warning")).ToContainText("v1.4.2"))
	screenshot(t, page, "detail-actions")
	must(t, page.Locator(`[data-testid="discard-details"] summary`).Click())
	must(t, byTestID(page, "discard-reason").Fill("test order from the staging shop"))
	must(t, byTestID(page, "discard").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("Discarded."))
	must(t, expect.Locator(page.Locator(`.detail-head [data-testid="status"]`)).ToHaveText("discarded"))
	must(t, expect.Locator(byTestID(page, "discarded")).ToContainText("test order from the staging shop"))
	must(t, expect.Locator(byTestID(page, "discarded-note")).ToContainText("restore it to pending first"))
	must(t, expect.Locator(byTestID(page, "restore")).ToBeVisible())
	screenshot(t, page, "detail-discarded")
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'discarded' AND discard_reason = 'test order from the staging shop'`, id); n != 1 {
		t.Fatal("the letter is not discarded with the reason")
	}
	expectAuditEntry(t, page, base, dlq.ActionDiscard, "olga", "1 discarded")
	must(t, expect.Locator(page.Locator(`[data-testid="audit-reason"]`).First()).ToHaveText("“test order from the staging shop”"))
}

// resendForm sends the form matched by selector twice at once, with the
// page's own fields (its CSRF token and one-time key) and cookies, as a
// browser retry or a second tab would: Chromium itself drops a second
// click on a form already being submitted, so the double click alone may
// reach the server once.
func resendForm(t *testing.T, page playwright.Page, selector string) {
	t.Helper()
	// The form may be on a page still loading (a click that navigates
	// returns before the next page is there).
	must(t, page.Locator(selector).WaitFor())
	statuses, err := page.Evaluate(`sel => {
		const f = document.querySelector(sel);
		// getAttribute: the confirm form's input named "action" shadows f.action.
		const send = () => fetch(f.getAttribute("action"), {method: "POST", body: new URLSearchParams(new FormData(f)), redirect: "manual"});
		return Promise.all([send(), send()]).then(rs => rs.map(r => r.type === "opaqueredirect" ? 303 : r.status));
	}`, selector)
	must(t, err)
	if got := fmt.Sprint(statuses); got != "[303 303]" {
		t.Fatalf("resent %s: statuses %s, want two redirects", selector, got)
	}
}

func TestDoubleClickReplaysOnce(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 3, "billing.charge")
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)
	var mu sync.Mutex
	posts := map[string]int{}
	page.OnRequest(func(r playwright.Request) {
		if r.Method() == http.MethodPost {
			mu.Lock()
			posts[regexp.MustCompile(`^https?://[^/]+`).ReplaceAllString(r.URL(), "")]++
			mu.Unlock()
		}
	})

	// One letter: the form sent twice at once, then a double click on "Replay now".
	_, err := page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, ids[0]))
	must(t, err)
	resendForm(t, page, `[data-testid="replay-form"]`)
	must(t, byTestID(page, "replay").Dblclick())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("This form had already been sent, so nothing was done again. Replayed as job"))
	// Two letters through the confirmation: the same, on its button.
	_, err = page.Goto(base + "/dead-letters")
	must(t, err)
	for _, id := range ids[1:] {
		must(t, page.Locator(fmt.Sprintf(`[data-testid="letter-row"][data-id="%d"] input[name="id"]`, id)).Check())
	}
	must(t, byTestID(page, "bulk-replay").Click())
	resendForm(t, page, `[data-testid="confirm-form"]`)
	must(t, byTestID(page, "confirm").Dblclick())
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	must(t, expect.Locator(byTestID(page, "outcome-replayed")).ToHaveText("2 enqueued for replay"))

	mu.Lock()
	sent := fmt.Sprint(posts)
	mu.Unlock()
	t.Logf("form posts that reached the server: %s", sent)
	if posts[fmt.Sprintf("/dead-letters/%d/replay", ids[0])] < 3 || posts["/dead-letters/bulk/confirm"] < 3 {
		t.Fatalf("each form should have been sent at least three times: %s", sent)
	}
	for _, id := range ids {
		if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = $1`, id); n != 1 {
			t.Errorf("letter %d replayed %d times, want once", id, n)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM operations`); n != 1 {
		t.Errorf("%d operations from one double-clicked form, want 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM audit_events WHERE action IN ('replay', 'bulk_start')`); n != 2 {
		t.Errorf("%d audit entries, want 2 (one replay, one bulk start)", n)
	}
	expectAuditEntry(t, page, base, dlq.ActionReplay, "olga", "1 replayed")
}

func TestEditAndReplay(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	id := actionLetters(t, db, 1, "billing.charge")[0]
	base, _ := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, id))
	must(t, err)
	must(t, page.Locator(`[data-testid="edit-details"] summary`).Click())
	args := byTestID(page, "edit-args")
	must(t, expect.Locator(args).ToHaveValue("[\n  1,\n  {\n    \"order\": \"ORD-1000\"\n  }\n]"))
	// A typo: refused with the place of the error, the text kept, nothing done.
	must(t, args.Fill("[\n  1,\n  {\"order\": \"ORD-2000\",}\n]"))
	must(t, byTestID(page, "edit-replay").Click())
	must(t, expect.Locator(byTestID(page, "edit-args-problem")).ToContainText("line 3"))
	must(t, expect.Locator(args).ToHaveValue("[\n  1,\n  {\"order\": \"ORD-2000\",}\n]"))
	screenshot(t, page, "detail-edit-refused")
	if n := countRows(t, db, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatal("an invalid edit replayed")
	}
	must(t, args.Fill("[\n  1,\n  {\"order\": \"ORD-2000\"}\n]"))
	must(t, byTestID(page, "edit-reason").Fill("order number was mistyped"))
	must(t, byTestID(page, "edit-replay").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("Replayed with edited arguments as job"))
	must(t, expect.Locator(page.Locator(`[data-testid="letter-audit"] [data-testid="audit-diff"]`)).ToContainText(`+ "order": "ORD-2000"`))
	screenshot(t, page, "detail-after-edit")
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE replay_of = $1 AND args = '[1, {"order": "ORD-2000"}]'`, id); n != 1 {
		t.Fatal("the job does not carry the edited args")
	}
	expectAuditEntry(t, page, base, dlq.ActionEditReplay, "olga", "1 replayed")
	must(t, expect.Locator(page.Locator(`[data-testid="audit-diff"]`).First()).ToContainText(`- "order": "ORD-1000"`))
}

func TestCanaryThenRelease(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 8, "email.send")
	base, store := startActionServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err := page.Goto(base + "/dead-letters?task=email.send")
	must(t, err)
	must(t, byTestID(page, "select-all-matching").Check())
	must(t, byTestID(page, "bulk-replay").Click())
	must(t, byTestID(page, "confirm-canary").Check())
	must(t, byTestID(page, "confirm-canary-size").Fill("2"))
	must(t, byTestID(page, "confirm-rate").Fill("20"))
	must(t, byTestID(page, "confirm").Click())

	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary running: waiting for its jobs"))
	must(t, expect.Locator(page.Locator(`[data-testid="canary-job"]`)).ToHaveCount(2))
	must(t, expect.Locator(byTestID(page, "release")).ToHaveCount(0))
	screenshot(t, page, "operation-canary-waiting")

	// The first canary job fails an attempt: before it dies, the page
	// already says the fix may not have worked.
	ctx := context.Background()
	_, err = db.ExecContext(ctx, `UPDATE jobs SET state = 'retrying', attempt = 1, last_error = 'SMTPRecipientsRefused: mailbox unavailable' WHERE replay_of = $1`, ids[0])
	must(t, err)
	must(t, expect.Locator(byTestID(page, "canary-verdict")).ToContainText("1 failed again and is retrying"))
	must(t, expect.Locator(byTestID(page, "release")).ToHaveCount(0))

	// Then it dies again: the page, polling, says the operation waits for
	// a decision, and offers release anyway or cancel.
	_, err = db.ExecContext(ctx, `UPDATE jobs SET state = 'dead', attempt = 5, finished_at = now(), last_error = 'SMTPRecipientsRefused: mailbox unavailable' WHERE replay_of = $1`, ids[0])
	must(t, err)
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Canary failed: waiting for a decision"))
	must(t, expect.Locator(byTestID(page, "canary-verdict")).ToContainText("Cancel this operation"))
	must(t, expect.Locator(byTestID(page, "release")).ToHaveText("Release anyway"))
	must(t, expect.Locator(byTestID(page, "op-why")).ToContainText("A canary replay died again"))
	screenshot(t, page, "operation-canary-died")

	// The operator judges the failure a bad letter, not a bad fix: release anyway.
	_, err = db.ExecContext(ctx, `UPDATE jobs SET state = 'succeeded', finished_at = now(), last_error = NULL WHERE replay_of = $1`, ids[1])
	must(t, err)
	screenshot(t, page, "operation-canary")
	must(t, byTestID(page, "release").Click())
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	must(t, expect.Locator(byTestID(page, "outcome-replayed")).ToHaveText("8 enqueued for replay"))
	must(t, expect.Locator(byTestID(page, "replays-died-again")).ToHaveText("1 died again (new dead letters)"))
	must(t, expect.Locator(byTestID(page, "op-pace")).ToContainText("20 per second"))
	screenshot(t, page, "operation-progress")
	if n := countRows(t, db, `SELECT count(*) FROM jobs`); n != 8 {
		t.Fatalf("%d jobs, want 8", n)
	}
	// Paced: the replayed jobs start spread at 20 a second, not all at once.
	var spread float64
	must(t, db.Get(&spread, `SELECT extract(epoch FROM max(run_at) - min(run_at)) FROM jobs`))
	if spread < 0.2 {
		t.Fatalf("replayed jobs start within %.2fs of each other; paced at 20/s they should spread over ~0.35s", spread)
	}
	_ = store
	expectAuditEntry(t, page, base, dlq.ActionCanaryRelease, "olga")
}

func int64s(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "{" + strings.Join(s, ",") + "}"
}

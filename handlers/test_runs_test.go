package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A test run from a letter's page: the form's own fields post, redirect to
// the letter with the result beside its test jobs, the letter stays
// pending, and a refused one keeps what was typed beside its problem.
func TestLetterTestRun(t *testing.T) {
	t.Parallel()

	t.Run("RunsOneJobAndLeavesTheLetterPending", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="test-run-form"]`, url.Values{"queue": {"sandbox"}, "kwargs": {`{"region":"us"}`}})
		if rec.Code != http.StatusSeeOther || !strings.HasSuffix(rec.Header().Get("Location"), "#test-runs") {
			t.Fatalf("test run: %d to %q: %.300s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
		}
		var job int64
		if err := a.db.Get(&job, `SELECT job_id FROM test_runs WHERE dead_letter_id = $1`, id); err != nil {
			t.Fatalf("no test job: %v", err)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND queue = 'sandbox' AND max_attempts = 1 AND kwargs = '{"region":"us"}' AND replay_of IS NULL`, job); n != 1 {
			t.Fatal("the test job is not on sandbox with one attempt and the edited kwargs")
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, id); n != 1 {
			t.Fatal("the letter is no longer pending")
		}
		// A browser keeps the #fragment to itself.
		_, doc = a.page(t, a.olga, strings.TrimSuffix(rec.Header().Get("Location"), "#test-runs"))
		if got := text(doc, "test-run-result"); !strings.Contains(got, fmt.Sprintf("Test job %d enqueued on queue sandbox", job)) {
			t.Fatalf("result %q", got)
		}
		row := doc.Find(`[data-testid="test-run-job"]`)
		if row.Length() != 1 || row.AttrOr("data-state", "") != "available" {
			t.Fatalf("test jobs: %q", squash(doc.Find(`[data-testid="test-run-jobs"]`)))
		}
		if live := doc.Find(`[data-testid="test-run-jobs"]`).AttrOr("hx-get", ""); live != fmt.Sprintf("/dead-letters/%d/test-runs", id) {
			t.Fatalf("the unfinished test job is not polled: hx-get %q", live)
		}
		if doc.Find(`[data-testid="replay-form"]`).Length() != 1 {
			t.Fatal("the letter no longer offers its replay after a test run")
		}
	})

	t.Run("InvalidJSONKeepsWhatWasTyped", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		typed := "[1,\n2,,]"
		rec := a.submit(t, a.olga, doc, `[data-testid="test-run-form"]`, url.Values{"args": {typed}})
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d; want 422", rec.Code)
		}
		page := parseHTML(t, rec)
		if got := text(page, "test-args-problem"); !strings.Contains(got, "line 2") {
			t.Fatalf("problem %q", got)
		}
		if got := page.Find(`[data-testid="test-args"]`).Text(); got != typed {
			t.Fatalf("args shown again as %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.count(t, `SELECT count(*) FROM audit_events WHERE action = 'test_run'`); n != 0 {
			t.Fatalf("a refused test run left %d rows", n)
		}
	})

	t.Run("ATooLongReasonIsSaidAboveTheForm", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="test-run-form"]`, url.Values{"reason": {strings.Repeat("x", 1001)}})
		if got := text(parseHTML(t, rec), "test-run-result"); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "reason: is 1001 characters long") {
			t.Fatalf("a too long reason: %d, %q", rec.Code, got)
		}
	})

	t.Run("AViewerMayNotRunOne", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.vic, fmt.Sprintf("/dead-letters/%d", id))
		if doc.Find(`[data-testid="test-run-form"]`).Length() != 0 {
			t.Fatal("a viewer is offered the test run form")
		}
		rec := a.post(t, a.vic, fmt.Sprintf("/dead-letters/%d/test-run", id), url.Values{})
		if rec.Code != http.StatusForbidden {
			t.Fatalf("a viewer's test run: %d; want 403", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatal("a viewer's test run made a job")
		}
	})
}

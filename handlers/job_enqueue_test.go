package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The jobs page's "Enqueue a job": the form's own fields post and redirect
// to the new job, audited; a task no worker registered is refused naming
// the close ones, invalid JSON with its line, and nothing is written.
func TestEnqueueJobByHand(t *testing.T) {
	t.Parallel()

	t.Run("EnqueuesOneAuditedJob", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		_, doc := a.page(t, a.olga, "/jobs")
		if doc.Find(`[data-testid="enqueue-link"]`).AttrOr("href", "") != "/jobs/new" {
			t.Fatal("the jobs page does not offer Enqueue a job")
		}
		_, doc = a.page(t, a.olga, "/jobs/new")
		if n := doc.Find(`#registered-tasks option`).Length(); n != len(fixtureTasks) {
			t.Fatalf("%d task choices; want the %d registered", n, len(fixtureTasks))
		}
		rec := a.submit(t, a.olga, doc, `[data-testid="enqueue-form"]`, url.Values{"task": {"reports.build"}, "queue": {"sandbox"},
			"kwargs": {`{"report": "R-1"}`}, "max_attempts": {"2"}, "reason": {"rebuild R-1"}})
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/jobs/") {
			t.Fatalf("enqueue: %d to %q: %.300s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE task = 'reports.build' AND queue = 'sandbox' AND max_attempts = 2 AND kwargs = '{"report": "R-1"}'`); n != 1 {
			t.Fatal("the job was not enqueued as typed")
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action = 'job_enqueue' AND actor = 'olga' AND reason = 'rebuild R-1'
			AND details->>'job_id' = (SELECT id::text FROM jobs)`); n != 1 {
			t.Fatal("the enqueue is not audited with its job, actor and reason")
		}
	})

	t.Run("RefusalsNameTheProblemAndWriteNothing", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		_, doc := a.page(t, a.olga, "/jobs/new")
		rec := a.submit(t, a.olga, doc, `[data-testid="enqueue-form"]`, url.Values{"task": {"billing.chrage"}})
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("unknown task: %d; want 422", rec.Code)
		}
		if got := text(parseHTML(t, rec), "enqueue-task-problem"); !strings.Contains(got, `unknown task "billing.chrage"`) || !strings.Contains(got, "did you mean billing.charge?") {
			t.Fatalf("unknown task's problem %q", got)
		}
		rec = a.submit(t, a.olga, doc, `[data-testid="enqueue-form"]`, url.Values{"task": {"billing.charge"}, "args": {"[1,\n2,,]"}})
		if got := text(parseHTML(t, rec), "enqueue-args-problem"); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(got, "line 2") {
			t.Fatalf("invalid args: %d, %q", rec.Code, got)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.count(t, `SELECT count(*) FROM audit_events WHERE action = 'job_enqueue'`); n != 0 {
			t.Fatalf("refused enqueues left %d rows", n)
		}
	})

	t.Run("AViewerMayNot", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		if rec, _ := a.page(t, a.vic, "/jobs/new"); rec.Code != http.StatusForbidden {
			t.Fatalf("a viewer's form: %d; want 403", rec.Code)
		}
		if rec := a.post(t, a.vic, "/jobs/new", url.Values{"task": {"billing.charge"}}); rec.Code != http.StatusForbidden {
			t.Fatalf("a viewer's enqueue: %d; want 403", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatal("a viewer enqueued a job")
		}
	})
}

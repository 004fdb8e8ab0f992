package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// Single actions through the letter's page, as a browser sends them: the
// forms' own hidden fields (CSRF token, one-time key), post, redirect.

func TestLetterActions(t *testing.T) {
	t.Parallel()

	t.Run("ReplayRedirectsAndLeavesOneAuditEntry", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="replay-form"]`, url.Values{"reason": {"fix deployed"}})
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), fmt.Sprintf("/dead-letters/%d?done=", id)) {
			t.Fatalf("replay: %d to %q: %.300s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
		}
		var job int64
		if err := a.db.Get(&job, `SELECT id FROM jobs WHERE replay_of = $1`, id); err != nil {
			t.Fatalf("no replay job: %v", err)
		}
		if n := a.actionEntries(t); n != 1 {
			t.Fatalf("%d audit entries, want 1", n)
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE dead_letter_id = $1 AND actor = 'olga' AND action = 'replay' AND reason = 'fix deployed'`, id); n != 1 {
			t.Fatal("the entry does not name olga, the action and the reason")
		}
		// After the redirect: the result, the lineage and the letter's own audit entry.
		_, doc = a.page(t, a.olga, rec.Header().Get("Location"))
		if got := text(doc, "action-result"); !strings.Contains(got, fmt.Sprintf("Replayed as job %d", job)) {
			t.Fatalf("result %q", got)
		}
		if doc.Find(`[data-testid="replay-form"]`).Length() != 0 {
			t.Fatal("a replayed letter still offers replay")
		}
		entry := doc.Find(`[data-testid="letter-audit"] [data-testid="audit-entry"]`)
		if entry.Length() != 1 || squash(entry.Find(`[data-testid="audit-actor"]`)) != "olga" || entry.AttrOr("data-action", "") != "replay" {
			t.Fatalf("letter audit: %q", squash(doc.Find(`[data-testid="letter-audit"]`)))
		}
	})

	t.Run("ResubmittedFormReplaysOnce", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		first := a.submit(t, a.olga, doc, `[data-testid="replay-form"]`, nil)
		again := a.submit(t, a.olga, doc, `[data-testid="replay-form"]`, nil)
		if first.Code != http.StatusSeeOther || again.Code != http.StatusSeeOther {
			t.Fatalf("statuses %d, %d; want 303 twice", first.Code, again.Code)
		}
		if again.Header().Get("Location") != first.Header().Get("Location")+"&repeat=1" {
			t.Fatalf("the resubmission should lead to the first result: %q vs %q", again.Header().Get("Location"), first.Header().Get("Location"))
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE replay_of = $1`, id); n != 1 {
			t.Fatalf("%d replay jobs, want 1", n)
		}
		if n := a.actionEntries(t); n != 1 {
			t.Fatalf("%d audit entries, want 1", n)
		}
		_, doc = a.page(t, a.olga, again.Header().Get("Location"))
		if got := text(doc, "action-result"); !strings.Contains(got, "nothing was done again") {
			t.Fatalf("result of the resubmission %q", got)
		}
	})

	t.Run("DiscardWithoutReasonChangesNothing", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="discard-form"]`, url.Values{"reason": {"  "}})
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", rec.Code)
		}
		page := parseHTML(t, rec)
		if got := text(page, "discard-problem"); !strings.Contains(got, "reason is required") {
			t.Fatalf("problem next to the reason: %q", got)
		}
		if _, open := page.Find(`[data-testid="discard-details"]`).Attr("open"); !open {
			t.Fatal("the discard form should be open on the refused page")
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, id) + a.actionEntries(t); n != 1 {
			t.Fatal("a refused discard changed something")
		}
	})

	t.Run("DiscardWithADamagedKeySaysSo", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="discard-form"]`,
			url.Values{"reason": {"noise"}, "key": {strings.Repeat("k", 201)}})
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", rec.Code)
		}
		if got := text(parseHTML(t, rec), "action-problem"); !strings.Contains(got, "key") {
			t.Fatalf("the page does not say what was wrong: %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, id) + a.actionEntries(t); n != 1 {
			t.Fatal("a refused discard changed something")
		}
	})

	t.Run("DiscardRestoreAndReplayOfADiscardedLetter", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, before := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, before, `[data-testid="discard-form"]`, url.Values{"reason": {"duplicate of ORD-1"}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("discard: %d", rec.Code)
		}
		// The replay form of the page loaded before the discard is refused.
		rec = a.submit(t, a.olga, before, `[data-testid="replay-form"]`, nil)
		if rec.Code != http.StatusConflict {
			t.Fatalf("replay of a discarded letter: %d, want 409", rec.Code)
		}
		if got := text(parseHTML(t, rec), "action-problem"); !strings.Contains(got, "restore it first") {
			t.Fatalf("problem %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatal("a discarded letter was replayed")
		}
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		if got := text(doc, "discarded"); !strings.Contains(got, "duplicate of ORD-1") {
			t.Fatalf("discarded note %q", got)
		}
		rec = a.submit(t, a.olga, doc, `[data-testid="restore-form"]`, nil)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("restore: %d", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, id); n != 1 {
			t.Fatal("not pending after restore")
		}
		if n := a.actionEntries(t); n != 2 {
			t.Fatalf("%d audit entries, want 2 (discard, restore)", n)
		}
	})

	t.Run("AlreadyReplayedSaysAsWhichJob", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, one := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		_, two := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id)) // another tab, another key
		if rec := a.submit(t, a.olga, one, `[data-testid="replay-form"]`, nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("first replay: %d", rec.Code)
		}
		rec := a.submit(t, a.olga, two, `[data-testid="replay-form"]`, nil)
		if rec.Code != http.StatusConflict {
			t.Fatalf("second replay: %d, want 409", rec.Code)
		}
		var job int64
		if err := a.db.Get(&job, `SELECT replay_job_id FROM dead_letters WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		problem := parseHTML(t, rec).Find(`[data-testid="action-problem"]`)
		if got := squash(problem); got != fmt.Sprintf("This letter was already replayed as job %d.", job) {
			t.Fatalf("problem %q", got)
		}
		if href := problem.Find("a").AttrOr("href", ""); href != fmt.Sprintf("/jobs/%d", job) {
			t.Fatalf("link %q", href)
		}
	})

	t.Run("InvalidEditedJSONIs422AndChangesNothing", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		if got := doc.Find(`[data-testid="edit-kwargs"]`).Text(); got != "{\n  \"region\": \"eu\"\n}" {
			t.Fatalf("the editor should hold the pretty-printed kwargs, has %q", got)
		}
		typed := "[\n  1,\n  {\"order\": \"A-2\",}\n]"
		rec := a.submit(t, a.olga, doc, `[data-testid="edit-form"]`, url.Values{"args": {typed}})
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("status %d, want 422", rec.Code)
		}
		page := parseHTML(t, rec)
		if got := text(page, "edit-args-problem"); !strings.Contains(got, "line 3") {
			t.Fatalf("the parse error should say where: %q", got)
		}
		if got := page.Find(`[data-testid="edit-args"]`).Text(); got != typed {
			t.Fatalf("the editor should keep what was typed, has %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.actionEntries(t); n != 0 {
			t.Fatal("an invalid edit changed something")
		}
	})

	t.Run("EditAndReplayKeepsBeforeAndAfter", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="edit-form"]`, url.Values{"args": {`[1, {"order": "A-2"}]`}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("edit and replay: %d %.300s", rec.Code, rec.Body.String())
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE replay_of = $1 AND args = '[1, {"order": "A-2"}]'`, id); n != 1 {
			t.Fatal("the replayed job does not carry the edited args")
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND args = '[1, {"order": "A-1"}]'`, id); n != 1 {
			t.Fatal("the letter must keep its original args")
		}
		_, page := a.page(t, a.olga, rec.Header().Get("Location"))
		if got := text(page, "action-result"); !strings.Contains(got, "edited arguments") {
			t.Fatalf("result %q", got)
		}
		diff := squash(page.Find(`[data-testid="audit-diff"]`))
		if !strings.Contains(diff, `- "order": "A-1"`) || !strings.Contains(diff, `+ "order": "A-2"`) {
			t.Fatalf("the letter's audit entry should show the diff: %q", diff)
		}
	})

	t.Run("WarnsWhenLiveWorkersRunTheFailingBuild", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		if doc.Find(`[data-testid="version-warning"]`).Length() != 0 {
			t.Fatal("no worker runs v1.4.2, yet a warning")
		}
		if err := a.store.Queue.RegisterWorker(context.Background(), dlq.WorkerInfo{ID: "w1", Host: "h1", PID: 1, Version: "v1.4.2",
			Queues: []string{"default"}, Tasks: []string{"billing.charge"}, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		_, doc = a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
		if got := text(doc, "version-warning"); !strings.Contains(got, "v1.4.2") || !strings.Contains(got, "likely fail") {
			t.Fatalf("warning %q", got)
		}
	})
}

package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Bulk actions from the list: selection, confirmation page, operation run
// by the runner, the page that follows it.

func TestBulkFromTheList(t *testing.T) {
	t.Parallel()

	t.Run("SelectedRowsThroughTheConfirmation", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 3, "billing.charge")
		done := storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: "email.send", Status: "replayed"})

		// The list's form carries the CSRF token; tick three rows plus one
		// already replayed (visible with status=all).
		_, list := a.page(t, a.olga, "/dead-letters?status=all")
		if _, disabled := list.Find(`[data-testid="select-all-matching"]`).Attr("disabled"); disabled {
			t.Fatal("select all matching is disabled")
		}
		picked := url.Values{"action": {"replay"}, "id": {fmt.Sprint(ids[0]), fmt.Sprint(ids[1]), fmt.Sprint(ids[2]), fmt.Sprint(done)}}
		rec := a.submit(t, a.olga, list, `[data-testid="bulk-form"]`, picked)
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %.300s", rec.Code, rec.Body.String())
		}
		confirm := parseHTML(t, rec)
		if got := text(confirm, "confirm-count"); got != "3" {
			t.Fatalf("count %q, want 3", got)
		}
		if got := text(confirm, "confirm-skipped"); !strings.HasPrefix(got, "1 of the selected letter is already replayed") {
			t.Fatalf("skipped %q", got)
		}
		if got := text(confirm, "confirm-bound"); !strings.Contains(got, fmt.Sprintf("up to id %d", done)) {
			t.Fatalf("bound %q", got)
		}
		if n := confirm.Find(`[data-testid="sample-row"]`).Length(); n != 3 {
			t.Fatalf("%d sample rows, want the 3 pending", n)
		}
		cells := confirm.Find(`[data-testid="confirm-by-task"] td`)
		if cells.Length() != 2 || cells.Eq(0).Text() != "billing.charge" || cells.Eq(1).Text() != "3" {
			t.Fatalf("by task %q", squash(cells))
		}
		if confirm.Find(`[data-testid="confirm-typed"]`).Length() != 0 {
			t.Fatal("3 letters need no typed number")
		}
		if n := a.count(t, `SELECT count(*) FROM operations`) + a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatal("the confirmation page changed something")
		}

		opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"reason": {"fix shipped"}}))
		op := a.waitOperation(t, opID, dlq.OpSettling)
		if op.Done != 3 || op.Skipped != 1 {
			t.Fatalf("operation: %d replayed, %d skipped; want 3 and 1", op.Done, op.Skipped)
		}
		// Handed to the queue, not yet run: settling, and the page says so.
		_, page := a.page(t, a.olga, fmt.Sprintf("/operations/%d", opID))
		if got := text(page, "op-state"); got != "Settling: replays still running" {
			t.Fatalf("state %q", got)
		}
		if got := text(page, "op-settled-count"); got != "0 of 3 settled · 0%" {
			t.Fatalf("settled %q", got)
		}
		if _, live := page.Find(`[data-testid="op-progress"]`).Attr("hx-trigger"); !live || page.Find(`[data-testid="stop-following"]`).Length() != 1 {
			t.Fatal("a settling operation polls and offers to stop following")
		}
		a.succeedReplays(t)
		op = a.waitOperation(t, opID, dlq.OpDone)
		_, page = a.page(t, a.olga, fmt.Sprintf("/operations/%d", opID))
		if got := text(page, "op-state"); got != "Done" {
			t.Fatalf("state %q", got)
		}
		if got := text(page, "replays-succeeded"); got != "3 succeeded" {
			t.Fatalf("succeeded %q", got)
		}
		for key, want := range map[string]string{"replayed": "3 enqueued for replay", "already_replayed": "1 already replayed", "not_found": "0 not found"} {
			if got := text(page, "outcome-"+key); got != want {
				t.Errorf("outcome %s: %q, want %q", key, got, want)
			}
		}
		if _, live := page.Find(`[data-testid="op-progress"]`).Attr("hx-trigger"); live {
			t.Fatal("a finished operation must stop polling")
		}
		// Audit: a start and a finish entry, the three letters linked to the start.
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'bulk_start' AND actor = 'olga' AND reason = 'fix shipped'`, opID); n != 1 {
			t.Fatal("no start entry by olga with the reason")
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'bulk_finish'`, opID); n != 1 {
			t.Fatal("no finish entry")
		}
		if n := a.actionEntries(t); n != 2 {
			t.Fatalf("%d audit entries, want 2", n)
		}
		var linked []int64
		if err := a.db.Select(&linked, `SELECT dead_letter_id FROM audit_event_letters WHERE audit_event_id = $1 ORDER BY 1`, *op.AuditEventID); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(linked, ids) {
			t.Fatalf("linked %v, want %v", linked, ids)
		}
	})

	t.Run("AllMatchingActsOnlyUpToTheBound", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		first := a.letters(t, 5, "reports.build")
		a.letters(t, 2, "email.send")
		_, list := a.page(t, a.olga, "/dead-letters?task=reports.build")
		rec := a.submit(t, a.olga, list, `[data-testid="bulk-form"]`, url.Values{"action": {"replay"}, "all_matching": {"1"}})
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %.300s", rec.Code, rec.Body.String())
		}
		confirm := parseHTML(t, rec)
		if got := text(confirm, "confirm-count"); got != "5" {
			t.Fatalf("count %q, want 5", got)
		}
		if got := text(confirm, "confirm-selection"); !strings.Contains(got, "task reports.build, pending") {
			t.Fatalf("selection %q", got)
		}
		// Two more letters of the task die while the engineer reads the page.
		later := a.letters(t, 2, "reports.build")
		opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, nil))
		if op := a.waitOperation(t, opID, dlq.OpSettling); op.Done != 5 || op.MaxID != first[4] {
			t.Fatalf("operation %+v: want 5 replayed, bound %d", op, first[4])
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = ANY($1) AND status = 'pending'`, pqInts(later)); n != 2 {
			t.Fatalf("%d of the letters that died after the confirmation are pending, want both", n)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE task = 'email.send' AND status = 'pending'`); n != 2 {
			t.Fatal("letters outside the filter were touched")
		}
	})

	t.Run("DiscardNeedsAReason", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 2, "billing.charge")
		rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"discard"},
			"id": {fmt.Sprint(ids[0]), fmt.Sprint(ids[1])}})
		confirm := parseHTML(t, rec)
		rec = a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"reason": {""}})
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", rec.Code)
		}
		if got := text(parseHTML(t, rec), "confirm-problems"); !strings.Contains(got, "reason is required") {
			t.Fatalf("problems %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM operations`) + a.actionEntries(t); n != 0 {
			t.Fatal("a refused discard started something")
		}
		rec = a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"reason": {"test orders"}})
		op := a.waitOperation(t, operationFrom(t, rec), dlq.OpDone)
		if op.Done != 2 || a.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'discarded' AND discard_reason = 'test orders'`) != 2 {
			t.Fatalf("discard operation %+v", op)
		}
	})

	t.Run("OverAThousandNeedsTheTypedNumber", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.db.MustExec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
			max_attempts, reason, fingerprint, enqueued_at)
			SELECT 100000 + g, 'default', 'email.send', '[]', '{}', 'E', 'boom', 3, 3, 'exhausted', 'fp', now()
			FROM generate_series(1, 1001) g`)
		rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"replay"},
			"all_matching": {"1"}, "filter": {"task=email.send"}})
		confirm := parseHTML(t, rec)
		if got := text(confirm, "confirm-count"); got != "1,001" {
			t.Fatalf("count %q", got)
		}
		rec = a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"typed": {"1000"}})
		if rec.Code != http.StatusBadRequest || !strings.Contains(text(parseHTML(t, rec), "confirm-problems"), "1001") {
			t.Fatalf("wrong number: %d", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM operations`); n != 0 {
			t.Fatal("started without the right number")
		}
		// Over 1,000 the canary and pace start filled in; this operator
		// clears both (TestBulkConfirmationSafeDefaults checks them).
		rec = a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"typed": {"1,001"}, "canary": {""}, "rate_per_second": {""}, "died_again_percent": {""}})
		if op := a.waitOperation(t, operationFrom(t, rec), dlq.OpSettling); op.Done != 1001 {
			t.Fatalf("replayed %d", op.Done)
		}
	})

	t.Run("DoubleClickedConfirmStartsOneOperation", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 2, "billing.charge")
		rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"replay"},
			"id": {fmt.Sprint(ids[0]), fmt.Sprint(ids[1])}})
		confirm := parseHTML(t, rec)
		one := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, nil))
		two := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, nil))
		if one != two {
			t.Fatalf("two operations (%d, %d) from one form", one, two)
		}
		a.waitOperation(t, one, dlq.OpSettling)
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 2 {
			t.Fatalf("%d jobs, want 2", n)
		}
	})

	t.Run("NothingSelected", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.letters(t, 1, "billing.charge")
		rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"replay"}})
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Nothing was selected") {
			t.Fatalf("%d %.300s", rec.Code, rec.Body.String())
		}
	})
}

func TestCanaryOperation(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := a.letters(t, 6, "billing.charge")
	rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"replay"},
		"all_matching": {"1"}, "filter": {"task=billing.charge"}})
	confirm := parseHTML(t, rec)
	opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`,
		url.Values{"canary": {"on"}, "canary_size": {"2"}}))
	a.waitOperation(t, opID, dlq.OpCanary)
	path := fmt.Sprintf("/operations/%d", opID)

	_, page := a.page(t, a.olga, path)
	if got := page.Find(`[data-testid="canary"]`).AttrOr("data-verdict", ""); got != "waiting" {
		t.Fatalf("verdict %q, want waiting", got)
	}
	if page.Find(`[data-testid="canary-job"]`).Length() != 2 || page.Find(`[data-testid="release"]`).Length() != 0 {
		t.Fatal("want two canary jobs and no release button yet")
	}
	if _, live := page.Find(`[data-testid="op-progress"]`).Attr("hx-trigger"); !live {
		t.Fatal("a waiting canary must keep polling")
	}
	// The fragment is what htmx polls.
	rec = a.olga.Do(a.h, newGet(path+"/progress"))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "<html") {
		t.Fatalf("fragment: %d", rec.Code)
	}

	// One canary job dies again: the operation waits for a decision, in a
	// state that says so, with the verdict audited; release anyway or cancel.
	a.db.MustExec(`UPDATE jobs SET state = 'dead', attempt = 5, last_error = 'still broken', finished_at = now() WHERE replay_of = $1`, ids[0])
	a.waitOperation(t, opID, dlq.OpCanaryFailed)
	_, page = a.page(t, a.olga, path)
	if got := text(page, "op-state"); got != "Canary failed: waiting for a decision" {
		t.Fatalf("state %q", got)
	}
	if got := text(page, "release"); got != "Release anyway" || page.Find(`[data-testid="cancel"]`).Length() != 1 {
		t.Fatalf("a dead canary offers release anyway (%q) and cancel", got)
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'canary_verdict' AND details->>'verdict' = 'died'`, opID); n != 1 {
		t.Fatal("no verdict entry")
	}
	if got := page.Find(`[data-testid="canary"]`).AttrOr("data-verdict", ""); got != "died" {
		t.Fatalf("verdict %q", got)
	}
	rec = a.submit(t, a.olga, page, `[data-testid="release-form"]`, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("release: %d", rec.Code)
	}
	if op := a.waitOperation(t, opID, dlq.OpSettling); op.Done != 6 {
		t.Fatalf("replayed %d, want 6", op.Done)
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'canary_release' AND actor = 'olga'`, opID); n != 1 {
		t.Fatal("no release entry")
	}
	// A second click on the stale release button: no error, the operation's page.
	if rec := a.submit(t, a.olga, page, `[data-testid="release-form"]`, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("second release: %d", rec.Code)
	}
	// Cancelling a finished operation is refused, saying why.
	rec = a.submit(t, a.olga, page, `[data-testid="cancel-form"]`, nil)
	if rec.Code != http.StatusConflict || !strings.Contains(text(parseHTML(t, rec), "op-problem"), "Nothing to cancel") {
		t.Fatalf("cancel of a finished operation: %d", rec.Code)
	}
}

func TestCancelOperation(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	a.letters(t, 4, "billing.charge")
	rec := a.post(t, a.olga, "/dead-letters/bulk", url.Values{"_csrf": {a.olga.CSRF}, "action": {"replay"},
		"all_matching": {"1"}, "filter": {"task=billing.charge"}})
	confirm := parseHTML(t, rec)
	opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`,
		url.Values{"canary": {"on"}, "canary_size": {"1"}}))
	a.waitOperation(t, opID, dlq.OpCanary)
	_, page := a.page(t, a.olga, fmt.Sprintf("/operations/%d", opID))
	for range 2 { // a double click
		if rec := a.submit(t, a.olga, page, `[data-testid="cancel-form"]`, nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("cancel: %d", rec.Code)
		}
	}
	_, page = a.page(t, a.olga, fmt.Sprintf("/operations/%d", opID))
	if got := text(page, "op-state"); got != "Cancelled" {
		t.Fatalf("state %q", got)
	}
	if got := text(page, "outcome-left"); got != "3 left alone (cancelled)" {
		t.Fatalf("left %q", got)
	}
	if n := a.count(t, `SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d jobs after cancelling at the canary, want 1", n)
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action = 'bulk_cancel'`); n != 1 {
		t.Fatalf("%d cancel entries, want 1", n)
	}
}

func pqInts(ids []int64) any {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "{" + strings.Join(s, ",") + "}"
}

func newGet(path string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	return req
}

// An operation the died-again guard paused says why, and resumes.
func TestAutoPausedOperation(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := a.letters(t, 3, "billing.charge")
	_, op := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d, %d, %d], "canary": 1, "wait_seconds": 0}`, ids[0], ids[1], ids[2]))
	opID := int64(op["operation_id"].(float64))
	a.waitOperation(t, opID, dlq.OpCanary)
	// As FollowOperations leaves it when the guard trips (tested in dlq).
	a.db.MustExec(`UPDATE operations SET state = 'auto_paused', died_again_percent = 20, guard_verdict = 'tripped' WHERE id = $1`, opID)
	path := fmt.Sprintf("/operations/%d", opID)
	_, page := a.page(t, a.olga, path)
	if got := text(page, "op-state"); got != "Auto-paused: too many replays died again" {
		t.Fatalf("state %q", got)
	}
	if got := text(page, "op-why"); !strings.Contains(got, "more than 20% of the first 100 replays to settle died again") {
		t.Fatalf("why %q", got)
	}
	if page.Find(`[data-testid="resume"]`).Length() != 1 || page.Find(`[data-testid="cancel"]`).Length() != 1 {
		t.Fatal("an auto-paused operation offers resume and cancel")
	}
	if rec := a.submit(t, a.olga, page, `[data-testid="resume-form"]`, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("resume: %d", rec.Code)
	}
	a.waitOperation(t, opID, dlq.OpSettling)
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'bulk_resume' AND actor = 'olga'`, opID); n != 1 {
		t.Fatal("no resume entry")
	}
	// Resuming again: already past it, the operation's page.
	if rec := a.submit(t, a.olga, page, `[data-testid="resume-form"]`, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("second resume: %d", rec.Code)
	}
	// Stop following, audited.
	_, page = a.page(t, a.olga, path)
	if rec := a.submit(t, a.olga, page, `[data-testid="stop-following-form"]`, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("stop following: %d", rec.Code)
	}
	_, page = a.page(t, a.olga, path)
	if got := text(page, "op-state"); got != "Done: stopped following" || !strings.Contains(text(page, "op-why"), "olga stopped following") {
		t.Fatalf("state %q, why %q", got, text(page, "op-why"))
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE operation_id = $1 AND action = 'bulk_stop_following' AND actor = 'olga'`, opID); n != 1 {
		t.Fatal("no stop-following entry")
	}
}

package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// retrying inserts a job of billing.charge that failed once and retries in
// an hour, and returns its id.
func (a actions) retrying(t *testing.T, queue string) int64 {
	t.Helper()
	var id int64
	err := a.db.Get(&id, `INSERT INTO jobs (task, queue, state, attempt, run_at, last_error, errors)
		VALUES ('billing.charge', $1, 'retrying', 1, now() + interval '1 hour', 'CardError: declined',
			'[{"attempt":1,"at":"2026-01-01T00:00:00Z","class":"CardError","message":"declined","outcome":"retry"}]')
		RETURNING id`, queue)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestJobActionsAPI(t *testing.T) {
	t.Parallel()

	t.Run("KillRunNowAndTheirErrors", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.retrying(t, "default")
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/run-now", id), `{"seen_state": "retrying", "seen_attempt": 1}`)
		if rec.Code != http.StatusOK || body["state"] != "retrying" {
			t.Fatalf("run now: %d %v", rec.Code, body)
		}
		// A second run now: already due, 409 with words.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/run-now", id), "")
		if rec.Code != http.StatusConflict || !strings.Contains(fmt.Sprint(body["error"]), "already due") {
			t.Fatalf("run now again: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"reason": "poison"}`,
			"Idempotency-Key", "kill-1")
		if rec.Code != http.StatusOK || body["state"] != "dead" || num(body["dead_letter_id"]) == 0 {
			t.Fatalf("kill: %d %v", rec.Code, body)
		}
		rec2, body2 := a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"reason": "poison"}`,
			"Idempotency-Key", "kill-1")
		if rec2.Code != http.StatusOK || body2["repeated"] != true || body2["dead_letter_id"] != body["dead_letter_id"] {
			t.Fatalf("kill with the same key: %d %v", rec2.Code, body2)
		}
		// Killing a dead job: 409 naming its state.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"reason": "again", "seen_state": "retrying"}`)
		if rec.Code != http.StatusConflict || !strings.Contains(fmt.Sprint(body["error"]), "is now dead") {
			t.Fatalf("kill a dead job: %d %v", rec.Code, body)
		}
	})

	t.Run("ValidationErrors", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.retrying(t, "default")
		for _, c := range []struct {
			path, body string
			status     int
			code       string
		}{
			{fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"reason": 5}`, http.StatusBadRequest, ""},
			{fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"nope": 1}`, http.StatusBadRequest, ""},
			{fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"seen_state": "sleeping"}`, http.StatusBadRequest, "invalid"},
			{fmt.Sprintf("/api/v1/jobs/%d/kill", id), `{"reason": "` + strings.Repeat("x", 1001) + `"}`, http.StatusBadRequest, "invalid"},
			{fmt.Sprintf("/api/v1/jobs/%d/run-now", id), `{"retry": true}`, http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/abc/kill", "", http.StatusBadRequest, ""},
			{"/api/v1/jobs/999999/kill", `{"reason": "x"}`, http.StatusNotFound, "not_found"},
			{fmt.Sprintf("/api/v1/jobs/%d/kill", id), "", http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/kill", `{"ids": [1]}`, http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/kill", `{}`, http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/kill", `{"ids": [1], "filter": {}}`, http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/kill", `{"ids": [-1]}`, http.StatusBadRequest, "invalid"},
			{"/api/v1/jobs/kill", `{"filter": {"state": "sleeping"}}`, http.StatusBadRequest, "invalid"},
		} {
			rec, body := a.api(t, a.olgaAPI, http.MethodPost, c.path, c.body)
			e, _ := body["error"].(map[string]any)
			if rec.Code != c.status || e["message"] == "" || (c.code != "" && e["code"] != c.code) {
				t.Errorf("%s %s: %d %v; want %d %s", c.path, c.body, rec.Code, body, c.status, c.code)
			}
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE state = 'retrying'`); n != 1 {
			t.Errorf("the job changed")
		}
	})

	t.Run("ViewerIsRefused", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.retrying(t, "default")
		for _, path := range []string{fmt.Sprintf("/api/v1/jobs/%d/kill", id), "/api/v1/jobs/run-now"} {
			rec, _ := a.api(t, a.vicAPI, http.MethodPost, path, `{"ids": [1]}`)
			if rec.Code != http.StatusForbidden {
				t.Errorf("viewer %s: %d", path, rec.Code)
			}
		}
		rec := a.post(t, a.vic, fmt.Sprintf("/jobs/%d/kill", id), url.Values{"reason": {"x"}})
		if rec.Code != http.StatusForbidden {
			t.Errorf("viewer form: %d", rec.Code)
		}
	})

	t.Run("BulkKillByFilter", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.retrying(t, "poison")
		a.retrying(t, "poison")
		a.retrying(t, "ok")
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/jobs/kill", `{"filter": {"queue": "poison"}, "reason": "bad batch"}`)
		if rec.Code != http.StatusOK || num(body["changed"]) != 2 {
			t.Fatalf("bulk kill: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE reason = 'killed'`); n != 2 {
			t.Errorf("%d killed letters", n)
		}
	})
}

func TestJobActionPages(t *testing.T) {
	t.Parallel()

	t.Run("KillFromThePageAndTheRaceIsReported", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.retrying(t, "default")
		other := a.retrying(t, "default")
		_, doc := a.page(t, a.olga, fmt.Sprintf("/jobs/%d", id))
		rec := a.submit(t, a.olga, doc, `[data-testid="kill-form"]`, url.Values{"reason": {"poison payload"}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("kill: %d %s", rec.Code, rec.Body)
		}
		_, doc = a.page(t, a.olga, fmt.Sprintf("/jobs/%d", id))
		if doc.Find(`[data-testid="dead-letter-link"]`).Length() != 1 {
			t.Fatal("the killed job's page does not link its letter")
		}
		// The kill ends the history, after the attempt it interrupted the
		// wait of: it is not an attempt of its own, on either page.
		heads := func(doc *goquery.Document, sel string) []string {
			var hs []string
			doc.Find(sel).Each(func(_ int, s *goquery.Selection) { hs = append(hs, s.Find("strong").First().Text()) })
			return hs
		}
		if got := heads(doc, `[data-testid="attempt"]`); strings.Join(got, ", ") != "Attempt 1, After attempt 1" {
			t.Errorf("the killed job's history reads %q", got)
		}
		href, _ := doc.Find(`[data-testid="dead-letter-link"] a`).Attr("href")
		_, letter := a.page(t, a.olga, href)
		if got := heads(letter, `[data-testid="attempt"]`); strings.Join(got, ", ") != "Attempt 1, After attempt 1" {
			t.Errorf("the killed job's letter's history reads %q", got)
		}
		// The other job is claimed and finished between the page and the click.
		_, doc = a.page(t, a.olga, fmt.Sprintf("/jobs/%d", other))
		a.db.MustExec(`UPDATE jobs SET state = 'succeeded', attempt = 2, finished_at = now() WHERE id = $1`, other)
		rec = a.submit(t, a.olga, doc, `[data-testid="kill-form"]`, url.Values{"reason": {"poison"}})
		if rec.Code != http.StatusConflict {
			t.Fatalf("kill after it finished: %d", rec.Code)
		}
		problem := parseHTML(t, rec).Find(`[data-testid="job-action-problem"]`).Text()
		if !strings.Contains(problem, "finished meanwhile and is now succeeded") {
			t.Fatalf("problem %q", problem)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters`); n != 1 {
			t.Errorf("%d letters, want only the first kill's", n)
		}
	})

	t.Run("ViewerSeesNoActions", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.retrying(t, "default")
		_, doc := a.page(t, a.vic, fmt.Sprintf("/jobs/%d", id))
		if doc.Find(`[data-testid="kill-form"]`).Length() != 0 || doc.Find(`[data-testid="no-act-note"]`).Length() != 1 {
			t.Fatal("a viewer is offered the kill form")
		}
		_, doc = a.page(t, a.vic, "/jobs")
		if doc.Find(`[data-testid="jobs-bulk"]`).Length() != 0 {
			t.Fatal("a viewer is offered the bulk bar")
		}
	})

	t.Run("HeldJobSaysWhatHoldsIt", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		later := a.retrying(t, "default")
		var due int64
		if err := a.db.Get(&due, `INSERT INTO jobs (task, queue, run_at) VALUES ('emails.send', 'mail', now() - interval '1 minute') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		runAt := func(id int64) string {
			t.Helper()
			_, doc := a.page(t, a.olga, fmt.Sprintf("/jobs/%d", id))
			return strings.Join(strings.Fields(doc.Find(`[data-testid="job-run-at"]`).Text()), " ")
		}
		if got := runAt(due); !strings.Contains(got, "waiting for a free worker") {
			t.Fatalf("unpaused due job: %q", got)
		}
		a.db.MustExec(`INSERT INTO pauses (kind, name, reason, paused_by) VALUES ('task', 'billing.charge', 'provider down', 'olga'),
			('queue', 'mail', 'smtp down', 'olga')`)
		if got := runAt(due); !strings.Contains(got, "held while queue mail is paused") || strings.Contains(got, "free worker") {
			t.Errorf("due job of a paused queue: %q", got)
		}
		if got := runAt(later); !strings.Contains(got, "then held while task billing.charge is paused") {
			t.Errorf("later retry of a paused task: %q", got)
		}
		// The list too, for the due job; the later retry still says when.
		_, doc := a.page(t, a.olga, "/jobs")
		rows := map[string]string{}
		doc.Find(`[data-testid="job-row"]`).Each(func(_ int, row *goquery.Selection) {
			id, _ := row.Attr("data-job-id")
			rows[id] = strings.Join(strings.Fields(row.Text()), " ")
		})
		if got := rows[strconv.FormatInt(due, 10)]; !strings.Contains(got, "held (queue paused) · due since") {
			t.Errorf("list row of the held due job: %q", got)
		}
		if got := rows[strconv.FormatInt(later, 10)]; !strings.Contains(got, "next try") || strings.Contains(got, "held") {
			t.Errorf("list row of the later retry: %q", got)
		}
	})

	t.Run("NoBulkBarWhereNothingWaits", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.retrying(t, "default")
		a.db.MustExec(`INSERT INTO jobs (task, queue, state, attempt, finished_at) VALUES
			('billing.charge', 'default', 'succeeded', 1, now()), ('billing.charge', 'default', 'dead', 3, now())`)
		a.db.MustExec(`INSERT INTO jobs (task, queue, state, attempt, lease_owner, lease_expires_at, attempted_at) VALUES
			('billing.charge', 'default', 'running', 1, 'w1', now() + interval '30 seconds', now())`)
		for state, want := range map[string]int{"": 1, "retrying": 1, "running": 0, "succeeded": 0, "dead": 0} {
			_, doc := a.page(t, a.olga, "/jobs?state="+state)
			if got := doc.Find(`[data-testid="jobs-bulk"]`).Length(); got != want {
				t.Errorf("/jobs?state=%s: %d bulk bars, want %d", state, got, want)
			}
		}
	})

	t.Run("BulkKillOfAFilterNeedsTheTypedCount", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.db.MustExec(`INSERT INTO jobs (task, queue, state, attempt, run_at)
			SELECT 'billing.charge', 'poison', 'retrying', 1, now() + interval '1 hour' FROM generate_series(1, 1001)`)
		_, doc := a.page(t, a.olga, "/jobs?queue=poison")
		bar := doc.Find(`[data-testid="jobs-bulk"]`)
		v := formValues(bar, url.Values{"all_matching": {"1"}, "action": {"kill"}})
		rec := a.post(t, a.olga, "/jobs/bulk", v)
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %s", rec.Code, rec.Body)
		}
		doc = parseHTML(t, rec)
		if !strings.Contains(doc.Find(`[data-testid="jobs-bulk-summary"]`).Text(), "1,001") {
			t.Fatalf("summary %q", doc.Find(`[data-testid="jobs-bulk-summary"]`).Text())
		}
		// A job enqueued while the confirmation is read is not swept in.
		a.db.MustExec(`INSERT INTO jobs (task, queue, state, attempt) VALUES ('billing.charge', 'poison', 'retrying', 1)`)
		rec = a.submit(t, a.olga, doc, `[data-testid="jobs-bulk-confirm-form"]`, url.Values{"reason": {"bad batch"}, "typed": {"1000"}})
		if rec.Code != http.StatusBadRequest || !strings.Contains(parseHTML(t, rec).Find(`[data-testid="jobs-bulk-problems"]`).Text(), "1001") {
			t.Fatalf("wrong typed count: %d", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Fatalf("%d letters after a wrong count", n)
		}
		rec = a.submit(t, a.olga, doc, `[data-testid="jobs-bulk-confirm-form"]`, url.Values{"reason": {"bad batch"}, "typed": {"1,001"}})
		if rec.Code != http.StatusOK {
			t.Fatalf("confirm: %d %s", rec.Code, rec.Body)
		}
		if got := parseHTML(t, rec).Find(`[data-testid="jobs-bulk-changed"]`).Text(); got != "1,001" {
			t.Fatalf("changed %q", got)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE reason = 'killed'`); n != 1001 {
			t.Errorf("%d killed letters", n)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE state = 'retrying'`); n != 1 {
			t.Errorf("%d jobs still retrying, want the one enqueued after the confirmation", n)
		}
	})
}

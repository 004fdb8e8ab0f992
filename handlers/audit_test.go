package handlers_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
)

// The audit pages: who did what, filters, one entry and its letters, exports.
func TestAuditPages(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := a.letters(t, 4, "billing.charge")
	a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/replay", ids[0]), `{"args": [7], "reason": "bad amount"}`)
	a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[1]), `{"reason": "=HYPERLINK(\"x\")"}`)
	_, op := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d, %d, %d], "reason": "bulk", "wait_seconds": 0}`, ids[1], ids[2], ids[3]))
	a.waitOperation(t, int64(op["operation_id"].(float64)), dlq.OpSettling)
	a.succeedReplays(t)
	a.waitOperation(t, int64(op["operation_id"].(float64)), dlq.OpDone)

	t.Run("NewestFirstWithWhoWhatAndCounts", func(t *testing.T) {
		rec, doc := a.page(t, a.vic, "/audit?actor=olga")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		var actions []string
		doc.Find(`[data-testid="audit-entry"]`).Each(func(_ int, s *goquery.Selection) {
			actions = append(actions, s.AttrOr("data-action", ""))
		})
		if got := strings.Join(actions, ","); !strings.HasPrefix(got, "bulk_finish,bulk_start,discard,edit_replay") {
			t.Fatalf("actions %s", got)
		}
		finish := doc.Find(`[data-testid="audit-entry"]`).First()
		var counts []string
		finish.Find(`[data-testid="audit-counts"] li`).Each(func(_ int, s *goquery.Selection) { counts = append(counts, squash(s)) })
		if got := strings.Join(counts, " · "); got != "3 matched · 2 replayed (enqueued) · 1 skipped (already replayed or discarded) · 2 replays succeeded · 0 replays died again" {
			t.Fatalf("bulk counts %q", got)
		}
		start := doc.Find(`[data-testid="audit-entry"]`).Eq(1)
		if got := squash(start.Find(`[data-testid="audit-selection"]`)); !strings.Contains(got, fmt.Sprintf("bounded at id %d", ids[3])) {
			t.Fatalf("bulk selection %q", got)
		}
		edit := doc.Find(`[data-action="edit_replay"]`)
		if got := squash(edit.Find(`[data-testid="audit-diff"]`)); !strings.Contains(got, "+ 7") || !strings.Contains(got, "- 1") {
			t.Fatalf("edit diff %q", got)
		}
		if got := squash(edit.Find(`[data-testid="audit-request"]`)); !strings.Contains(got, "192.0.2.1") || !strings.Contains(got, "request ") {
			t.Fatalf("request %q", got)
		}
		if got := squash(edit.Find(`[data-testid="audit-reason"]`)); got != "“bad amount”" {
			t.Fatalf("reason %q", got)
		}
	})

	t.Run("FiltersAndPaging", func(t *testing.T) {
		_, doc := a.page(t, a.vic, fmt.Sprintf("/audit?dead_letter_id=%d", ids[1]))
		// Its discard; the bulk replay skipped it, so the bulk entries do not link it.
		if got := doc.Find(`[data-testid="audit-entry"]`); got.Length() != 1 || got.AttrOr("data-action", "") != "discard" {
			t.Fatalf("%d entries for letter %d", got.Length(), ids[1])
		}
		_, doc = a.page(t, a.vic, fmt.Sprintf("/audit?dead_letter_id=%d", ids[2]))
		if got := doc.Find(`[data-testid="audit-entry"]`); got.Length() != 1 || got.AttrOr("data-action", "") != "bulk_start" {
			t.Fatalf("letter %d replayed in bulk: %d entries", ids[2], got.Length())
		}
		_, doc = a.page(t, a.vic, "/audit?action=discard")
		if n := doc.Find(`[data-testid="audit-entry"]`).Length(); n != 1 {
			t.Fatalf("%d discard entries", n)
		}
		_, doc = a.page(t, a.vic, "/audit?actor=olga&limit=2")
		next := doc.Find(`[data-testid="audit-next"]`).AttrOr("href", "")
		if !strings.Contains(next, "cursor=") || !strings.Contains(next, "actor=olga") {
			t.Fatalf("next %q", next)
		}
		rec, doc := a.page(t, a.vic, "/audit?since=yesterday")
		if rec.Code != http.StatusBadRequest || !strings.Contains(text(doc, "filter-error"), "Since") {
			t.Fatalf("bad filter: %d %q", rec.Code, text(doc, "filter-error"))
		}
	})

	t.Run("AnEntryOpensToItsLetters", func(t *testing.T) {
		_, doc := a.page(t, a.vic, "/audit?action=bulk_start")
		href := doc.Find(`[data-testid="audit-open"]`).AttrOr("href", "")
		rec, entry := a.page(t, a.vic, href)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", href, rec.Code)
		}
		if got := text(entry, "entry-letters-total"); !strings.HasPrefix(got, "2 letters") {
			t.Fatalf("letters total %q", got)
		}
		if n := entry.Find(`[data-testid="entry-letter"] a`).Length(); n != 2 {
			h, _ := entry.Find(`[data-testid="entry-letters-table"]`).Html()
			t.Fatalf("%d letter links: %s", n, h)
		}
		_, doc = a.page(t, a.vic, "/audit?action=bulk_finish")
		_, finish := a.page(t, a.vic, doc.Find(`[data-testid="audit-open"]`).AttrOr("href", ""))
		if got := finish.Find(`[data-testid="entry-letters-elsewhere"] a`).AttrOr("href", ""); got != href {
			t.Fatalf("the finish entry should point to its start %q, points to %q", href, got)
		}
		if rec, _ := a.page(t, a.vic, "/audit/99999"); rec.Code != http.StatusNotFound {
			t.Fatalf("missing entry: %d", rec.Code)
		}
	})

	t.Run("ExportsStreamTheFilter", func(t *testing.T) {
		rec, _ := a.page(t, a.vic, "/audit/export.csv?actor=olga")
		rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
		if err != nil || rec.Code != http.StatusOK {
			t.Fatalf("csv: %d %v", rec.Code, err)
		}
		if rows[0][0] != "id" || len(rows) < 5 {
			t.Fatalf("csv rows %v", rows)
		}
		found := false
		for _, r := range rows {
			found = found || r[9] == `'=HYPERLINK("x")`
		}
		if !found {
			t.Fatal("a formula in a reason must be defused in the CSV")
		}
		rec, _ = a.page(t, a.vic, "/audit/export.json?"+url.Values{"action": {"discard"}}.Encode())
		var entries []map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &entries); err != nil || len(entries) != 1 || entries[0]["reason"] != `=HYPERLINK("x")` {
			t.Fatalf("json export: %v %v", entries, err)
		}
	})
}

// The entry's "status now" says what became of each replay: never a green
// "replayed" for one that died again.
func TestAuditEntryStatusNow(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := a.letters(t, 3, "billing.charge")
	// The harness's letters name job ids of their own; the replay jobs'
	// ids must not meet them, as a real worker's letters never do.
	a.db.MustExec(`SELECT setval(pg_get_serial_sequence('jobs', 'id'), 1000000)`)
	_, op := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d, %d, %d], "wait_seconds": 0}`, ids[0], ids[1], ids[2]))
	opID := int64(op["operation_id"].(float64))
	a.waitOperation(t, opID, dlq.OpSettling)
	// The first replay died again, as a worker leaves it: its job dead and a
	// new letter naming the job and the letter it replays; the second
	// succeeded; the third still waits.
	a.db.MustExec(`UPDATE jobs SET state = 'dead', attempt = 3, finished_at = now() WHERE replay_of = $1`, ids[0])
	var reborn int64
	if err := a.db.Get(&reborn, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
			attempts, max_attempts, reason, fingerprint, enqueued_at, replay_of)
		SELECT j.id, j.queue, j.task, j.args, j.kwargs, 'E', 'still broken', 3, 3, 'exhausted', 'fp-again', j.created_at, j.replay_of
		FROM jobs j WHERE j.replay_of = $1 RETURNING id`, ids[0]); err != nil {
		t.Fatal(err)
	}
	a.db.MustExec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE replay_of = $1`, ids[1])
	_, doc := a.page(t, a.vic, "/audit?action=bulk_start")
	_, entry := a.page(t, a.vic, doc.Find(`[data-testid="audit-open"]`).AttrOr("href", ""))
	var got []string
	entry.Find(`[data-testid="entry-letter-status"]`).Each(func(_ int, s *goquery.Selection) { got = append(got, squash(s)) })
	want := []string{fmt.Sprintf("died again as letter %d", reborn), "replay succeeded", "replay waiting"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("status now %q, want %q", got, want)
	}
	link := entry.Find(`[data-testid="entry-letter-status"] a`)
	if link.AttrOr("href", "") != fmt.Sprintf("/dead-letters/%d", reborn) || !link.HasClass("dead") {
		t.Fatalf("the died-again status links %q", link.AttrOr("href", ""))
	}
	if entry.Find(`[data-testid="entry-letter-status"] .replayed`).Length() != 0 {
		t.Fatal("a green replayed badge for a replay")
	}
}

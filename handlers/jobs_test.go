package handlers_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func jobRowIDs(doc *goquery.Document) []string {
	var ids []string
	byTestID(doc.Selection, "job-row").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, s.AttrOr("data-job-id", ""))
	})
	return ids
}

func TestJobList(t *testing.T) {
	t.Parallel()

	t.Run("FiltersByStateQueueAndTask", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		c.insertJobs(t, 3, "default", "billing.charge", "available")
		want := c.insertJobs(t, 2, "payments", "billing.charge", "retrying")
		c.insertJobs(t, 2, "payments", "mail.send", "retrying")
		c.insertJobs(t, 4, "payments", "billing.charge", "succeeded")

		rec, doc := c.page(t, "/jobs?state=retrying&queue=payments&task=billing.charge")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		got := jobRowIDs(doc)
		if len(got) != 2 || got[0] != fmt.Sprint(want[1]) || got[1] != fmt.Sprint(want[0]) {
			t.Fatalf("rows %v, want %v newest first", got, want)
		}
		byTestID(doc.Selection, "job-row").Each(func(_ int, s *goquery.Selection) {
			if badge := squash(byTestID(s, "status")); badge != "retrying" {
				t.Errorf("a row in state %q", badge)
			}
		})
		if got := squash(byTestID(doc.Selection, "jobs-count")); !strings.HasPrefix(got, "2 matching jobs") {
			t.Errorf("count %q", got)
		}
		// The form shows the filter it applied.
		if doc.Find(`[data-testid="filter-state"] option[selected]`).AttrOr("value", "") != "retrying" ||
			byTestID(doc.Selection, "filter-queue").AttrOr("value", "") != "payments" {
			t.Error("the filter form does not show the current filter")
		}
	})

	t.Run("KeysetPagesReachEveryJobOnce", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		c.insertJobs(t, 11, "default", "t", "succeeded")
		var seen []string
		path := "/jobs?limit=4"
		var secondPage string
		for pages := 0; path != ""; pages++ {
			if pages > 5 {
				t.Fatal("paging does not end")
			}
			rec, doc := c.page(t, path)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: status %d", path, rec.Code)
			}
			if strings.Contains(path, "offset") {
				t.Fatalf("paging by offset: %s", path)
			}
			seen = append(seen, jobRowIDs(doc)...)
			if pages == 1 {
				secondPage = path
			}
			path = byTestID(doc.Selection, "page-older").AttrOr("href", "")
		}
		if len(seen) != 11 || len(slices.Compact(slices.Clone(seen))) != 11 {
			t.Fatalf("saw %v, want 11 distinct jobs", seen)
		}
		// From the second page, "Newer" leads back to the first.
		_, doc := c.page(t, secondPage)
		_, back := c.page(t, byTestID(doc.Selection, "page-newer").AttrOr("href", ""))
		if got := jobRowIDs(back); !slices.Equal(got, seen[:4]) {
			t.Errorf("newer page %v, want the first page %v", got, seen[:4])
		}
	})

	t.Run("BadFilterIs400WithWords", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		for _, q := range []string{"state=zombie", "before=abc", "limit=100000", "queue=a%20b"} {
			rec, doc := c.page(t, "/jobs?"+q)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", q, rec.Code)
			}
			param := strings.SplitN(q, "=", 2)[0]
			if msg := squash(byTestID(doc.Selection, "error-message")); !strings.Contains(msg, param) {
				t.Errorf("%s: message %q does not name %s", q, msg, param)
			}
			if byTestID(doc.Selection, "jobs-filter").Length() != 1 {
				t.Errorf("%s: the filter form is not shown again to fix", q)
			}
		}
		// What was typed stays in the form.
		_, doc := c.page(t, "/jobs?queue=a%20b&task=ok.task")
		if got := byTestID(doc.Selection, "filter-queue").AttrOr("value", ""); got != "a b" {
			t.Errorf("queue input %q, want what was typed", got)
		}
	})

	t.Run("EmptyListSaysSo", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		_, doc := c.page(t, "/jobs")
		if got := squash(byTestID(doc.Selection, "jobs-empty")); !strings.Contains(got, "No jobs yet") {
			t.Errorf("empty list says %q", got)
		}
		_, doc = c.page(t, "/jobs?state=dead")
		if got := squash(byTestID(doc.Selection, "jobs-empty")); !strings.Contains(got, "No job matches") {
			t.Errorf("empty filtered list says %q", got)
		}
	})
}

func TestJobDetail(t *testing.T) {
	t.Parallel()

	t.Run("RetryingJobShowsNextAttemptAndHistory", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		id := c.insertJobs(t, 1, "payments", "billing.charge", "available")[0]
		c.exec(t, `UPDATE jobs SET state = 'retrying', attempt = 2, max_attempts = 5,
			run_at = now() + interval '40 seconds', args = '[42, {"order": "A-1"}]', kwargs = '{"currency": "EUR"}',
			last_error = 'TimeoutError: upstream timed out',
			errors = '[{"attempt": 1, "at": "2026-01-02T03:04:05Z", "worker": "w-1", "host": "h-1", "version": "v9",
				"class": "TimeoutError", "message": "upstream timed out", "traceback": "Traceback (most recent call last):\n  boom",
				"outcome": "retry", "retry_in_ms": 4000, "duration_ms": 30012},
				{"attempt": 2, "at": "2026-01-02T03:05:05Z", "class": "TimeoutError", "message": "again", "outcome": "retry"}]'
			WHERE id = $1`, id)
		rec, doc := c.page(t, fmt.Sprintf("/jobs/%d", id))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if got := squash(byTestID(doc.Selection, "job-attempt")); got != "2 of 5" {
			t.Errorf("attempt %q", got)
		}
		if got := squash(byTestID(doc.Selection, "job-run-at")); !strings.Contains(got, "next attempt in 3") && !strings.Contains(got, "next attempt in 4") {
			t.Errorf("run at %q, want the next attempt in about 40 s", got)
		}
		if got := byTestID(doc.Selection, "job-args").Text(); !strings.Contains(got, "\n  42,") {
			t.Errorf("args not pretty-printed: %q", got)
		}
		attempts := byTestID(doc.Selection, "attempt")
		if attempts.Length() != 2 {
			t.Fatalf("%d attempts, want 2", attempts.Length())
		}
		first := squash(attempts.First())
		for _, want := range []string{"Attempt 1", "TimeoutError", "upstream timed out", "w-1", "h-1", "v9", "ran 30 s", "retried after 4.0 s", "Traceback"} {
			if !strings.Contains(first, want) {
				t.Errorf("first attempt %q lacks %q", first, want)
			}
		}
		if attempts.First().Find("details pre").Length() != 1 {
			t.Error("the traceback is not collapsed in <details>")
		}
	})

	t.Run("RunningJobShowsLease", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		id := c.insertJobs(t, 1, "default", "t", "running")[0]
		_, doc := c.page(t, fmt.Sprintf("/jobs/%d", id))
		if got := squash(byTestID(doc.Selection, "job-lease")); !strings.Contains(got, "held by w1") || !strings.Contains(got, "expires in") {
			t.Errorf("lease %q", got)
		}
	})

	t.Run("DeadJobLinksToItsLetterAndReplayToItsOrigin", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		c.insertLetters(t, 1, "t", "fp", "1 minute")
		var letter, job int64
		if err := c.db.QueryRow(`SELECT id, job_id FROM dead_letters`).Scan(&letter, &job); err != nil {
			t.Fatal(err)
		}
		c.exec(t, `INSERT INTO jobs (id, queue, task, state, attempt, finished_at) OVERRIDING SYSTEM VALUE
			VALUES ($1, 'default', 't', 'dead', 3, now())`, job)
		replay := c.insertJobs(t, 1, "default", "t", "available")[0]
		c.exec(t, `UPDATE jobs SET replay_of = $1 WHERE id = $2`, letter, replay)

		_, doc := c.page(t, fmt.Sprintf("/jobs/%d", job))
		if got := byTestID(doc.Selection, "dead-letter-link").Find("a").AttrOr("href", ""); got != fmt.Sprintf("/dead-letters/%d", letter) {
			t.Errorf("dead job links to %q", got)
		}
		_, doc = c.page(t, fmt.Sprintf("/jobs/%d", replay))
		if got := byTestID(doc.Selection, "replay-of").Find("a").AttrOr("href", ""); got != fmt.Sprintf("/dead-letters/%d", letter) {
			t.Errorf("replay links to %q", got)
		}
		if byTestID(doc.Selection, "dead-letter-link").Length() != 0 {
			t.Error("a live job links to a dead letter")
		}
	})

	t.Run("UnknownOrMalformedIDIsAnErrorPage", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		for path, want := range map[string]int{"/jobs/987654": http.StatusNotFound,
			"/jobs/abc": http.StatusBadRequest, "/jobs/0": http.StatusBadRequest, "/jobs/+1": http.StatusBadRequest} {
			rec, doc := c.page(t, path)
			if rec.Code != want {
				t.Errorf("%s: status %d, want %d", path, rec.Code, want)
			}
			if byTestID(doc.Selection, "error-message").Length() != 1 || doc.Find("nav").Length() == 0 {
				t.Errorf("%s: not a 404 page in the layout", path)
			}
		}
	})
}

func TestJobListSaysWhatRetentionKeeps(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	_, doc := c.page(t, "/jobs")
	if byTestID(doc.Selection, "jobs-retention").Length() != 0 {
		t.Error("with no succeeded job, the page speaks of retention")
	}
	c.insertJobs(t, 30, "default", "t", "succeeded")
	c.exec(t, `UPDATE jobs SET finished_at = now() - interval '3 hours'`)
	c.exec(t, `ANALYZE jobs`)
	_, doc = c.page(t, "/jobs")
	got := squash(byTestID(doc.Selection, "jobs-retention"))
	if !strings.Contains(got, "About 30 succeeded jobs are kept") || !strings.Contains(got, "3 h") {
		t.Errorf("retention line %q; want the count kept and the oldest's age", got)
	}
}

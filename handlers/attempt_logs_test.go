package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// attemptLogsHistory is two failed attempts that logged: the first a few
// lines quoting the job's secret token, the second 20 lines and the
// worker's cut note.
func attemptLogsHistory(t *testing.T) string {
	t.Helper()
	var long strings.Builder
	for i := range 20 {
		fmt.Fprintf(&long, "time=10:00:00.%03d level=INFO msg=\"row processed\" row=%d\n", i, i)
	}
	long.WriteString(dlq.LogsCutNote(1480, 72_000) + "\n")
	h, err := json.Marshal([]dlq.Attempt{
		{Attempt: 1, At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), Class: "HTTPError", Message: "402", Outcome: dlq.OutcomeRetry,
			Logs: "time=09:00:00.001 level=INFO msg=\"charging\" order=A-1\n" +
				"time=09:00:00.002 level=WARN msg=\"gateway said no\" auth=\"Bearer tok_live_9f8e7d6c5b4a\"\n"},
		{Attempt: 2, At: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Class: "HTTPError", Message: "402", Outcome: dlq.OutcomeDead,
			Logs: long.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// checkAttemptLogs checks the two attempts of attemptLogsHistory as a
// page shows them: masked, the short ones open, the long ones collapsed
// and said to be cut, the link to the team's logs beside them.
func checkAttemptLogs(t *testing.T, doc *goquery.Document) {
	t.Helper()
	attempts := byTestID(doc.Selection, "attempt")
	if attempts.Length() != 2 {
		t.Fatalf("%d attempts, want 2", attempts.Length())
	}
	first, second := byTestID(attempts.Eq(0), "attempt-logs"), byTestID(attempts.Eq(1), "attempt-logs")
	if got := first.Find("pre").Text(); strings.Contains(got, "tok_live") || !strings.Contains(got, "Bearer •••") ||
		!strings.Contains(got, `msg="charging" order=A-1`) {
		t.Errorf("first attempt's logs not shown masked: %q", got)
	}
	if _, open := first.Attr("open"); !open || squash(first.Find("summary")) != "Logs of this attempt · 2 lines" {
		t.Errorf("short logs should be open, summary %q", squash(first.Find("summary")))
	}
	if _, open := second.Attr("open"); open || squash(second.Find("summary")) != "Logs of this attempt · 20 lines (cut at 64 KiB)" {
		t.Errorf("long cut logs should be collapsed and say so, summary %q", squash(second.Find("summary")))
	}
	if !strings.HasSuffix(second.Find("pre").Text(), "… 1480 more lines, 70.3 KiB, cut\n") {
		t.Errorf("the cut note is not shown: %q", second.Find("pre").Text())
	}
	if byTestID(attempts.Eq(1), "logs-link").AttrOr("href", "") == "" {
		t.Error("no link to the team's logs beside the attempt")
	}
}

func TestAttemptLogsOnPagesAndAPI(t *testing.T) {
	t.Parallel()
	c := newConsole(t, func(cfg *web.Config) { cfg.LogsURLTemplate = testLogsTemplate })
	history := attemptLogsHistory(t)
	kwargs := `{"token": "tok_live_9f8e7d6c5b4a"}`

	t.Run("LetterPage", func(t *testing.T) {
		id := storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: "billing.charge", Kwargs: kwargs,
			ErrorClass: "HTTPError", Message: "402", Attempts: 2, MaxAttempts: 2, History: history})
		rec, doc := c.page(t, fmt.Sprintf("/dead-letters/%d", id))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		checkAttemptLogs(t, doc)

		rec = c.do(t, http.MethodGet, fmt.Sprintf("/api/v1/dead-letters/%d", id), "")
		var body struct{ History []dlq.Attempt }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
		}
		if len(body.History) != 2 || strings.Contains(body.History[0].Logs, "tok_live") || !strings.Contains(body.History[0].Logs, "Bearer •••") {
			t.Errorf("API history logs not masked: %+v", body.History)
		}
	})

	t.Run("JobPage", func(t *testing.T) {
		id := c.insertJobs(t, 1, "default", "billing.charge", dlq.StateDead)[0]
		c.exec(t, `UPDATE jobs SET attempt = 2, max_attempts = 2, kwargs = $2, errors = $3 WHERE id = $1`, id, kwargs, history)
		rec, doc := c.page(t, fmt.Sprintf("/jobs/%d", id))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		checkAttemptLogs(t, doc)

		rec = c.do(t, http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), "")
		var body struct{ Errors []dlq.Attempt }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
		}
		if len(body.Errors) != 2 || strings.Contains(body.Errors[0].Logs, "tok_live") || !strings.HasSuffix(body.Errors[1].Logs, "cut\n") {
			t.Errorf("API errors logs not masked or not whole: %+v", body.Errors)
		}
	})
}

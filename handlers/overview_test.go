package handlers_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq/dlqtest"
)

// overviewFixture: 10 letters (7 pending, 2 replayed, 1 discarded) in two
// groups, 2 of them in the last 24 hours; 3 available jobs and 2 dead ones;
// one live and one stale worker.
func overviewFixture(t *testing.T) console {
	c := newConsole(t)
	c.insertLetters(t, 1, "billing.charge", "fp-charge", "0 minutes")
	c.insertLetters(t, 1, "billing.charge", "fp-charge", "3 hours")
	c.insertLetters(t, 4, "billing.charge", "fp-charge", "3 days")
	c.insertLetters(t, 4, "mail.send", "fp-mail", "3 days")
	dlqtest.Settle(t, c.db, dlqtest.Outcome{Status: "replayed", By: "a"},
		`id IN (SELECT id FROM dead_letter_records WHERE task = 'billing.charge' ORDER BY id DESC LIMIT 2)`)
	dlqtest.Settle(t, c.db, dlqtest.Outcome{Status: "discarded", By: "a", Reason: "noise"},
		`id = (SELECT min(id) FROM dead_letter_records WHERE task = 'mail.send')`)
	c.insertJobs(t, 3, "default", "billing.charge", "available")
	c.insertJobs(t, 2, "payments", "billing.charge", "dead")
	c.exec(t, `INSERT INTO workers (id, host, pid, queues, concurrency, heartbeat_at) VALUES
		('w-live', 'h1', 1, '{default}', 4, now() - interval '5 seconds'),
		('w-stale', 'h2', 2, '{default}', 4, now() - interval '10 minutes')`)
	return c
}

func TestOverview(t *testing.T) {
	t.Parallel()

	t.Run("ShowsCountsOfAKnownFixture", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		rec, doc := c.page(t, "/")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		for id, want := range map[string]string{
			"count-pending": "7", "count-replayed": "2", "count-discarded": "1",
			"workers-live": "1", "workers-stale": "1 stale",
		} {
			if got := squash(byTestID(doc.Selection, id)); got != want {
				t.Errorf("%s = %q, want %q", id, got, want)
			}
		}
		for status, href := range map[string]string{
			"pending": "/dead-letters?status=pending", "replayed": "/dead-letters?status=replayed", "discarded": "/dead-letters?status=discarded",
		} {
			if got := byTestID(doc.Selection, "stat-"+status).AttrOr("href", ""); got != href {
				t.Errorf("%s card links to %q, want %q", status, got, href)
			}
		}
		if got := squash(byTestID(doc.Selection, "stale-workers")); !strings.Contains(got, "w-stale") {
			t.Errorf("stale warning %q does not name w-stale", got)
		}
	})

	t.Run("ChartsCountEveryLetterWithExactTitlesAndLinks", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		_, doc := c.page(t, "/")
		hourly := byTestID(doc.Selection, "inflow-hourly-bar")
		if hourly.Length() != 24 {
			t.Fatalf("%d hourly bars, want 24", hourly.Length())
		}
		if got := sumCounts(hourly); got != 2 {
			t.Errorf("hourly bars sum to %d, want the 2 letters of the last 24 hours", got)
		}
		daily := byTestID(doc.Selection, "inflow-daily-bar")
		if daily.Length() != 14 || sumCounts(daily) != 10 {
			t.Errorf("%d daily bars summing to %d, want 14 summing to 10", daily.Length(), sumCounts(daily))
		}
		// The newest hour holds the letter that failed just now: its title
		// says so exactly and its link opens that hour's letters.
		last := hourly.Last()
		if title := last.Find("title").First().Text(); !strings.HasSuffix(title, ": 1 dead letter so far") {
			t.Errorf("newest hour's title %q", title)
		}
		u, err := url.Parse(last.AttrOr("href", ""))
		if err != nil || u.Path != "/dead-letters" {
			t.Fatalf("bar link %q", last.AttrOr("href", ""))
		}
		since, err1 := time.Parse(time.RFC3339, u.Query().Get("since"))
		until, err2 := time.Parse(time.RFC3339, u.Query().Get("until"))
		if err1 != nil || err2 != nil || until.Sub(since) != time.Hour || u.Query().Get("status") != "all" {
			t.Errorf("bar link %q is not one hour of letters in any status", u)
		}
		if time.Since(since) > time.Hour || time.Since(since) < 0 {
			t.Errorf("newest bar starts at %s, not in the current hour", since)
		}
	})

	t.Run("RanksGroupsAndTasksWithFilteredLinks", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		_, doc := c.page(t, "/")
		groups := byTestID(doc.Selection, "top-group")
		if groups.Length() != 2 {
			t.Fatalf("%d groups, want 2", groups.Length())
		}
		first := groups.First()
		if got := first.Find("a").AttrOr("href", ""); got != "/groups/fp-charge" {
			t.Errorf("first group links to %q", got)
		}
		if got := squash(byTestID(first, "group-pending")); got != "4" {
			t.Errorf("first group pending %q, want 4", got)
		}
		tasks := byTestID(doc.Selection, "top-task")
		if tasks.Length() != 2 || tasks.First().Find("a").AttrOr("href", "") != "/dead-letters?task=billing.charge" ||
			squash(byTestID(tasks.First(), "task-pending")) != "4" {
			t.Errorf("top tasks: %q", squash(tasks))
		}
	})

	t.Run("JobMatrixByQueueAndState", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		_, doc := c.page(t, "/")
		def := doc.Find(`[data-testid="job-row"][data-queue="default"]`)
		if got := squash(byTestID(def, "jobs-available")); got != "3" {
			t.Errorf("default available %q, want 3", got)
		}
		if got := byTestID(def, "jobs-available").Find("a").AttrOr("href", ""); got != "/jobs?queue=default&state=available" {
			t.Errorf("default available links to %q", got)
		}
		pay := doc.Find(`[data-testid="job-row"][data-queue="payments"]`)
		if got := squash(byTestID(pay, "jobs-dead")); got != "2" {
			t.Errorf("payments dead %q, want 2", got)
		}
		if got := squash(byTestID(pay, "jobs-available")); got != "0" {
			t.Errorf("payments available %q, want 0", got)
		}
	})

	t.Run("FragmentIsTheBodyAloneAndUncached", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		rec, doc := c.page(t, "/overview/fragment", "HX-Request", "true")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		if strings.Contains(rec.Body.String(), "<html") || doc.Find("nav").Length() != 0 {
			t.Error("the fragment carries the layout")
		}
		root := doc.Find("#overview")
		if root.AttrOr("hx-get", "") != "/overview/fragment" || !strings.Contains(root.AttrOr("hx-trigger", ""), "every") ||
			root.AttrOr("hx-swap", "") != "outerHTML" {
			t.Errorf("the fragment does not poll itself: %v", root.Nodes)
		}
		if got := squash(byTestID(doc.Selection, "count-pending")); got != "7" {
			t.Errorf("fragment pending %q", got)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q", cc)
		}
		// The full page embeds the same polling element.
		_, full := c.page(t, "/")
		if full.Find("#overview[hx-get]").Length() != 1 {
			t.Error("the page has no polling body")
		}
	})

	t.Run("EmptyStatesSayWhatTheyMean", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		rec, doc := c.page(t, "/")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		for id, want := range map[string]string{
			"groups-empty":        "No dead letters — the worker has nothing dead.",
			"no-workers":          "redrive worker --queues default",
			"jobs-empty":          "No jobs yet.",
			"inflow-hourly-empty": "No dead letters in the last 24 hours.",
			"count-pending":       "0",
		} {
			if got := squash(byTestID(doc.Selection, id)); !strings.Contains(got, want) {
				t.Errorf("%s = %q, want it to say %q", id, got, want)
			}
		}
	})
}

func sumCounts(bars *goquery.Selection) int {
	total := 0
	bars.Each(func(_ int, s *goquery.Selection) {
		n, _ := strconv.Atoi(strings.ReplaceAll(s.AttrOr("data-count", "0"), ",", ""))
		total += n
	})
	return total
}

package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// overviewFixture: 10 letters (7 pending, 2 replayed, 1 discarded) in two
// groups, 2 of them in the last 24 hours; 3 available jobs and 2 dead ones;
// one live and one stale worker.
func overviewFixture(t *testing.T) console {
	c := newConsole(t)
	c.insertLetters(t, 1, "billing.charge", "fp-charge", "0 minutes")
	c.insertLetters(t, 1, "billing.charge", "fp-charge", "3 hours")
	c.insertLetters(t, 4, "billing.charge", "fp-charge", "3 days")
	// The mails fail their own way: with the charges' error they would be
	// one failure in two tasks, an incident (AnIncidentIsOneEntry).
	c.exec(t, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
		attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'default', 'mail.send', '[]', '{}', 'SMTPError',
			'mailbox full for recipient ' || g, 3, 3, 'exhausted', 'fp-mail', now() - interval '3 days', now() - interval '3 days'
		FROM generate_series(1, 4) g`)
	storetest.Settle(t, c.db, storetest.Outcome{Status: "replayed", By: "a"},
		`id IN (SELECT id FROM dead_letter_records WHERE task = 'billing.charge' ORDER BY id DESC LIMIT 2)`)
	storetest.Settle(t, c.db, storetest.Outcome{Status: "discarded", By: "a", Reason: "noise"},
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

	t.Run("AnIncidentIsOneEntry", func(t *testing.T) {
		t.Parallel()
		c := overviewFixture(t)
		var charge, refund string
		for i, task := range []string{"payments.charge", "payments.refund", "payments.charge", "payments.refund", "payments.charge"} {
			msg := fmt.Sprintf("%s for job %d: payments-provider returned 503 Service Unavailable (request_id req_%06d)", task, 70+i, 314159+i)
			fp := storetest.GroupID(task)
			storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: task, ErrorClass: "ServiceUnavailable", Message: msg, Fingerprint: fp})
			if task == "payments.charge" {
				charge = fp
			} else {
				refund = fp
			}
		}
		_, doc := c.page(t, "/")
		incs := byTestID(doc.Selection, "top-incident")
		if incs.Length() != 1 {
			t.Fatalf("%d incidents among the top groups, want 1", incs.Length())
		}
		// The fixture's two groups stay rows of their own; the payments
		// groups are in the incident's entry only.
		groups := byTestID(doc.Selection, "top-group")
		if groups.Length() != 2 || strings.Contains(squash(groups), "payments") {
			t.Errorf("%d group rows (%q), want the fixture's 2 alone", groups.Length(), squash(groups))
		}
		if got := byTestID(incs, "top-incident-link").AttrOr("href", ""); got != "/incidents/"+charge {
			t.Errorf("incident links to %q, want /incidents/%s", got, charge)
		}
		if got := squash(byTestID(incs, "top-incident-link")); got != "ServiceUnavailable in 2 tasks" {
			t.Errorf("incident entry %q", got)
		}
		if got := squash(byTestID(incs, "incident-tasks")); got != "payments.charge 3, payments.refund 2" {
			t.Errorf("incident tasks %q", got)
		}
		if got := squash(byTestID(incs, "incident-pending")); got != "5" {
			t.Errorf("incident pending %q, want 5", got)
		}
		replay, err := url.Parse(byTestID(incs, "incident-replay-all").AttrOr("href", ""))
		if err != nil || replay.Path != "/dead-letters/bulk" || replay.Query().Get("action") != "replay" {
			t.Fatalf("replay all links to %q", replay)
		}
		filter, _ := url.ParseQuery(replay.Query().Get("filter"))
		if got, want := filter.Get("fingerprint"), strings.Join(sortedIDs(charge, refund), ","); got != want {
			t.Errorf("replay all selects groups %q, want %q", got, want)
		}
		// The refreshing fragment shows it the same way.
		_, frag := c.page(t, "/overview/fragment", "HX-Request", "true")
		if byTestID(frag.Selection, "top-incident").Length() != 1 {
			t.Error("the fragment does not show the incident")
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

// fakeOutage is the demo's payments provider, down (or back) as a test says.
type fakeOutage struct{ state handlers.DemoOutageState }

func (f fakeOutage) Outage(context.Context) (handlers.DemoOutageState, bool, error) {
	return f.state, true, nil
}
func (f fakeOutage) DeployFix(context.Context, dlq.Actor, time.Time) error { return nil }

// TestDemoPanelPointsAtTheOutage: while the demo's provider is down, the
// overview's panel links to what it broke, the one group of the first
// task to fail and then the incident of both; once it is back, its replay
// is one operation over every group of the incident.
func TestDemoPanelPointsAtTheOutage(t *testing.T) {
	t.Parallel()
	now := time.Now()
	state := handlers.DemoOutageState{Dependency: "payments-provider", From: now.Add(-time.Minute), Until: now.Add(4 * time.Minute), Down: true}
	outage := &fakeOutage{state: state}
	c := newConsole(t, func(cfg *web.Config) { cfg.Demo = outage })
	fail := func(task string, n int) string {
		t.Helper()
		msg := fmt.Sprintf("%s for job %d: payments-provider returned 503 Service Unavailable (request_id req_%06d)", task, n, 271828+n)
		fp := storetest.GroupID(task)
		storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: task, ErrorClass: "ServiceUnavailable", Message: msg, Fingerprint: fp})
		return fp
	}
	panel := func(t *testing.T) *goquery.Selection {
		t.Helper()
		_, doc := c.page(t, "/")
		p := byTestID(doc.Selection, "demo-incident")
		if p.Length() != 1 {
			t.Fatal("no demo panel")
		}
		return p
	}

	_, doc := c.page(t, "/")
	if got := byTestID(doc.Selection, "demo-failure").Length(); got != 0 {
		t.Errorf("before any letter the panel names a failure")
	}
	var charge string
	for i := range 3 {
		charge = fail("payments.charge", i)
	}
	p := panel(t)
	if got := byTestID(p, "demo-failure-link").AttrOr("href", ""); got != "/groups/"+charge {
		t.Errorf("one task failed: the panel links to %q, want its group /groups/%s", got, charge)
	}
	if got := squash(byTestID(p, "demo-failure")); got != "Error group so far: ServiceUnavailable in payments.charge · 3 pending" {
		t.Errorf("one task failed: %q", got)
	}

	refund := fail("payments.refund", 7)
	fail("payments.refund", 8)
	p = panel(t)
	if got := byTestID(p, "demo-failure-link").AttrOr("href", ""); got != "/incidents/"+charge {
		t.Errorf("both tasks failed: the panel links to %q, want the incident /incidents/%s", got, charge)
	}
	if got := squash(byTestID(p, "demo-failure")); got != "Incident: ServiceUnavailable in payments.charge, payments.refund · 5 pending" {
		t.Errorf("both tasks failed: %q", got)
	}
	if byTestID(p, "demo-replay").Length() != 0 {
		t.Error("the panel offers a replay while the provider is down")
	}

	outage.state.Down = false
	outage.state.Until = now
	p = panel(t)
	replay, err := url.Parse(byTestID(p, "demo-replay").AttrOr("href", ""))
	if err != nil || replay.Path != "/dead-letters/bulk" || replay.Query().Get("action") != "replay" {
		t.Fatalf("the fix is out: replay links to %q", replay)
	}
	filter, _ := url.ParseQuery(replay.Query().Get("filter"))
	if got, want := filter.Get("fingerprint"), strings.Join(sortedIDs(charge, refund), ","); got != want {
		t.Errorf("the panel's replay selects %q, want both groups %q", got, want)
	}
	if got := squash(byTestID(p, "demo-replay")); got != "Replay the incident's 5 letters…" {
		t.Errorf("replay button %q", got)
	}
	if got := byTestID(p, "demo-failure-link").AttrOr("href", ""); got != "/incidents/"+charge {
		t.Errorf("after the fix the panel links to %q, want the incident", got)
	}
}

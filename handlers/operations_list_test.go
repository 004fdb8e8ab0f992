package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

// opsConsole is a console without a runner: the operations it starts stay
// running, as they do while a large one works through its letters.
type opsConsole struct {
	console
	ok, other, group []int64 // letters of billing.charge/group …fa, email.send/…fb, billing.charge/…fc
}

func newOpsConsole(t *testing.T) opsConsole {
	t.Helper()
	c := opsConsole{console: newConsole(t)}
	if err := c.store.Queue.RegisterTasks(context.Background(), []string{"billing.charge", "email.send"}); err != nil {
		t.Fatal(err)
	}
	c.insertLetters(t, 4, "billing.charge", "00000000000000fa", "3 hours")
	c.insertLetters(t, 5, "email.send", "00000000000000fb", "2 hours")
	c.insertLetters(t, 6, "billing.charge", "00000000000000fc", "1 hour")
	ids := func(fp string) []int64 {
		var out []int64
		if err := c.db.SelectContext(context.Background(), &out, `SELECT id FROM dead_letters WHERE fingerprint = $1 ORDER BY id`, fp); err != nil {
			t.Fatal(err)
		}
		return out
	}
	c.ok, c.other, c.group = ids("00000000000000fa"), ids("00000000000000fb"), ids("00000000000000fc")
	return c
}

func (c opsConsole) start(t *testing.T, kind dlq.OperationKind, who string, sel dlq.Selection) dlq.Operation {
	t.Helper()
	op, err := c.store.Operations.CreateOperation(context.Background(), dlq.OperationParams{Kind: kind, Actor: dlq.Actor{Name: who},
		Reason: "incident 7", Now: time.Now(), Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func (c opsConsole) cancel(t *testing.T, id int64) {
	t.Helper()
	if _, err := c.store.Operations.CancelOperation(context.Background(), dlq.ChangeOperationParams{ID: id, Actor: dlq.Actor{Name: "x"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func filterFor(t *testing.T, q string) *dlq.Filter {
	t.Helper()
	v, _ := url.ParseQuery(q)
	f, err := handlers.ParseFilter(v, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &f
}

func TestOperationsPage(t *testing.T) {
	t.Parallel()
	c := newOpsConsole(t)
	byIDs := c.start(t, dlq.OpReplay, "alice", dlq.Selection{IDs: c.ok[:2]})
	byFilter := c.start(t, dlq.OpDiscard, "bob", dlq.Selection{Filter: filterFor(t, "task=email.send")})
	byGroup := c.start(t, dlq.OpReplay, "alice", dlq.Selection{Filter: filterFor(t, "fingerprint=00000000000000fc")})
	c.cancel(t, byFilter.ID)

	rows := func(t *testing.T, path string) []string {
		t.Helper()
		rec, doc := c.page(t, path)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body.String())
		}
		var out []string
		doc.Find(`[data-testid="op-row"]`).Each(func(_ int, s *goquery.Selection) {
			out = append(out, squash(s.Find(`[data-testid="op-link"]`))+" "+squash(s.Find(`[data-testid="op-row-state"]`)))
		})
		return out
	}

	t.Run("EveryOperationNewestFirstWithWhatItActsOn", func(t *testing.T) {
		rec, doc := c.page(t, "/operations")
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %.300s", rec.Code, rec.Body.String())
		}
		if _, ok := byTestID(doc.Selection, "ops-table").Attr("data-keynav"); !ok {
			t.Error("the list's table lacks data-keynav")
		}
		if doc.Find(`nav a[href="/operations"][aria-current="page"]`).Length() != 1 {
			t.Error("the navigation does not lead to (and mark) the operations page")
		}
		got := doc.Find(`[data-testid="op-row"]`)
		if got.Length() != 3 {
			t.Fatalf("%d rows, want 3", got.Length())
		}
		want := []struct{ link, state, who, selection, href, matched, progress string }{
			{fmt.Sprintf("Replay #%d", byGroup.ID), "Running: handing letters to the queue", "alice", "error group 00000000000000fc", "/groups/00000000000000fc", "6", "0 of 6 · 0%"},
			{fmt.Sprintf("Discard #%d", byFilter.ID), "Cancelled", "bob", "task email.send", "/dead-letters?", "5", "0 of 5 · 0%"},
			{fmt.Sprintf("Replay #%d", byIDs.ID), "Running: handing letters to the queue", "alice", "2 letters by id", "", "2", "0 of 2 · 0%"},
		}
		for i, w := range want {
			row := got.Eq(i)
			sel := row.Find(`[data-testid="op-row-selection"]`)
			href, _ := sel.Attr("href")
			if squash(row.Find(`[data-testid="op-link"]`)) != w.link || squash(row.Find(`[data-testid="op-row-state"]`)) != w.state ||
				!strings.Contains(squash(row), w.who) || !strings.Contains(squash(sel), w.selection) ||
				!strings.HasPrefix(href, w.href) || (w.href == "" && href != "") ||
				squash(row.Find(`[data-testid="op-row-matched"]`)) != w.matched || squash(row.Find(`[data-testid="op-row-progress"]`)) != w.progress {
				t.Errorf("row %d: %q (selection %q → %q), want %+v", i, squash(row), squash(sel), href, w)
			}
		}
	})

	t.Run("Filters", func(t *testing.T) {
		running := func(id int64) string { return fmt.Sprintf("Replay #%d Running: handing letters to the queue", id) }
		for path, want := range map[string][]string{
			"/operations?state=open":                         {running(byGroup.ID), running(byIDs.ID)},
			"/operations?state=finished":                     {fmt.Sprintf("Discard #%d Cancelled", byFilter.ID)},
			"/operations?state=cancelled":                    {fmt.Sprintf("Discard #%d Cancelled", byFilter.ID)},
			"/operations?kind=replay&actor=ALICE":            {running(byGroup.ID), running(byIDs.ID)},
			"/operations?kind=discard&actor=alice":           nil,
			"/operations?state=running&limit=1":              {running(byGroup.ID)},
			fmt.Sprintf("/operations?cursor=%d", byGroup.ID): {fmt.Sprintf("Discard #%d Cancelled", byFilter.ID), running(byIDs.ID)},
		} {
			if got := rows(t, path); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s: %q, want %q", path, got, want)
			}
		}
		_, doc := c.page(t, "/operations?kind=discard&actor=alice")
		if byTestID(doc.Selection, "ops-empty").Length() != 1 {
			t.Error("an empty filter result does not say so")
		}
	})

	t.Run("PagesFollowTheOlderLink", func(t *testing.T) {
		var seen []string
		path := "/operations?limit=1&state=open"
		for range 4 {
			seen = append(seen, rows(t, path)...)
			_, doc := c.page(t, path)
			next, ok := byTestID(doc.Selection, "ops-next").Attr("href")
			if !ok {
				break
			}
			if !strings.Contains(next, "state=open") {
				t.Errorf("the next page drops the filter: %s", next)
			}
			path = next
		}
		if want := []string{fmt.Sprintf("Replay #%d Running: handing letters to the queue", byGroup.ID), fmt.Sprintf("Replay #%d Running: handing letters to the queue", byIDs.ID)}; strings.Join(seen, "|") != strings.Join(want, "|") {
			t.Errorf("pages: %q, want %q", seen, want)
		}
	})

	t.Run("ABadFilterIsNamed", func(t *testing.T) {
		for _, q := range []string{"state=stuck", "kind=purge", "cursor=-1", "limit=1000"} {
			rec, doc := c.page(t, "/operations?"+q)
			if rec.Code != http.StatusBadRequest || byTestID(doc.Selection, "filter-error").Length() != 1 {
				t.Errorf("%s: %d, want 400 with the problem named", q, rec.Code)
			}
		}
	})

	t.Run("TheAPIFiltersTheSame", func(t *testing.T) {
		rec := c.do(t, http.MethodGet, "/api/v1/operations?state=open&actor=alice&limit=1", "")
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"operation_id":%d`, byGroup.ID)) ||
			!strings.Contains(body, fmt.Sprintf(`"next_cursor":"%d"`, byGroup.ID)) {
			t.Errorf("%d %s", rec.Code, body)
		}
		if rec := c.do(t, http.MethodGet, "/api/v1/operations?kind=purge", ""); rec.Code != http.StatusBadRequest ||
			!strings.Contains(rec.Body.String(), "replay or discard") {
			t.Errorf("kind=purge: %d %s", rec.Code, rec.Body.String())
		}
	})
}

// TestInFlightBanner: every page names the operations not finished yet,
// each linked; a finished one leaves the banner.
func TestInFlightBanner(t *testing.T) {
	t.Parallel()
	c := newOpsConsole(t)
	_, doc := c.page(t, "/dead-letters")
	if byTestID(doc.Selection, "ops-banner").Length() != 0 {
		t.Fatal("a banner with nothing in flight")
	}
	first := c.start(t, dlq.OpReplay, "alice", dlq.Selection{IDs: c.ok})
	second := c.start(t, dlq.OpDiscard, "bob", dlq.Selection{Filter: filterFor(t, "task=email.send")})
	for _, path := range []string{"/", "/dead-letters", "/audit", "/operations"} {
		_, doc := c.page(t, path)
		ops := doc.Find(`[data-testid="ops-banner-op"]`)
		if ops.Length() != 2 {
			t.Fatalf("%s: %d operations in the banner, want 2", path, ops.Length())
		}
		if got, want := squash(ops.Eq(0)), fmt.Sprintf("Discard #%d by bob: 0 of 5 — view", second.ID); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
		if href, _ := ops.Eq(1).Find("a").Attr("href"); href != fmt.Sprintf("/operations/%d", first.ID) {
			t.Errorf("%s: the banner links to %q", path, href)
		}
	}
	// An operation's own page leaves itself out of the banner: the page
	// shows it live, and the banner would go stale above it.
	_, doc = c.page(t, fmt.Sprintf("/operations/%d", second.ID))
	if ops := doc.Find(`[data-testid="ops-banner-op"]`); ops.Length() != 1 || ops.AttrOr("data-id", "") != fmt.Sprint(first.ID) {
		t.Errorf("operation %d's page: banner %q, want only operation %d", second.ID, squash(ops), first.ID)
	}
	if _, doc := c.page(t, fmt.Sprintf("/operations/%d", first.ID)); doc.Find(`nav a[href="/operations"][aria-current="page"]`).Length() != 1 {
		t.Error("an operation's page does not mark Operations in the navigation")
	}
	if rec := c.do(t, http.MethodGet, "/api/v1/operations", ""); strings.Contains(rec.Body.String(), "ops-banner") {
		t.Error("the API got a banner")
	}
	c.cancel(t, first.ID)
	c.cancel(t, second.ID)
	if _, doc := c.page(t, "/dead-letters"); byTestID(doc.Selection, "ops-banner").Length() != 0 {
		t.Error("finished operations stay in the banner")
	}
}

// TestConfirmWarnsOfOverlap: a confirmation over letters an open operation
// already covers says which operation and how many, and still confirms.
func TestConfirmWarnsOfOverlap(t *testing.T) {
	t.Parallel()
	c := newOpsConsole(t)
	running := c.start(t, dlq.OpReplay, "alice", dlq.Selection{Filter: filterFor(t, "task=billing.charge")}) // groups …fa and …fc: 10
	confirm := func(t *testing.T, form url.Values) []string {
		t.Helper()
		rec := c.do(t, http.MethodPost, "/dead-letters/bulk", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %.300s", rec.Code, rec.Body.String())
		}
		doc := parseHTML(t, rec)
		if byTestID(doc.Selection, "confirm-form").Length() != 1 {
			t.Error("the overlap blocked the confirmation")
		}
		var out []string
		doc.Find(`[data-testid="confirm-overlap"]`).Each(func(_ int, s *goquery.Selection) { out = append(out, squash(s)) })
		return out
	}
	ids := func(ids ...int64) url.Values {
		v := url.Values{"action": {"replay"}}
		for _, id := range ids {
			v.Add("id", fmt.Sprint(id))
		}
		return v
	}
	want := func(n, of int) []string {
		return []string{fmt.Sprintf("Operation #%d (replay by alice, running) already covers %d of these %d letters.", running.ID, n, of)}
	}
	for name, c2 := range map[string]struct {
		form url.Values
		want []string
	}{
		"IDs":         {ids(c.ok[0], c.ok[1], c.other[0]), want(2, 3)},
		"Group":       {url.Values{"action": {"discard"}, "all_matching": {"1"}, "filter": {"fingerprint=00000000000000fc"}}, want(6, 6)},
		"Filter":      {url.Values{"action": {"replay"}, "all_matching": {"1"}, "filter": {"status=pending"}}, want(10, 15)},
		"NoOverlap":   {ids(c.other...), nil},
		"TaskAndTime": {url.Values{"action": {"replay"}, "all_matching": {"1"}, "filter": {"task=billing.charge&since=90m"}}, want(6, 6)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := confirm(t, c2.form); strings.Join(got, "|") != strings.Join(c2.want, "|") {
				t.Errorf("warnings %q, want %q", got, c2.want)
			}
		})
	}
	t.Run("AFinishedOperationWarnsOfNothing", func(t *testing.T) {
		c.cancel(t, running.ID)
		if got := confirm(t, ids(c.ok...)); len(got) != 0 {
			t.Errorf("warnings %q after the operation was cancelled", got)
		}
	})
}

// TestOperationsShowUnknownStates: a state this code does not know (one a
// later version adds, say "rolling_back") still shows, by its name, in the
// list and the banner; whether it is open is finished_at's to say.
func TestOperationsShowUnknownStates(t *testing.T) {
	t.Parallel()
	c := newOpsConsole(t)
	op := c.start(t, dlq.OpReplay, "alice", dlq.Selection{IDs: c.ok})
	c.exec(t, `ALTER TABLE operations DROP CONSTRAINT operations_state_valid`)
	c.exec(t, `UPDATE operations SET state = 'rolling_back' WHERE id = $1`, op.ID)
	rec, doc := c.page(t, "/operations?state=open")
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %.300s", rec.Code, rec.Body.String())
	}
	row := doc.Find(`[data-testid="op-row"]`)
	if row.Length() != 1 || squash(row.Find(`[data-testid="op-row-state"]`)) != "rolling_back" || row.AttrOr("data-state", "") != "rolling_back" {
		t.Errorf("the list: %q", squash(row))
	}
	if got, want := squash(byTestID(doc.Selection, "ops-banner-op")), fmt.Sprintf("Replay #%d by alice: 0 of 4 (rolling_back) — view", op.ID); got != want {
		t.Errorf("the banner: %q, want %q", got, want)
	}
}

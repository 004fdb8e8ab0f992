package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// letterServer is the real console on a fresh database.
type letterServer struct {
	h  http.Handler
	db *storetest.DB
}

const testLogsTemplate = "https://logs.example/search?job={job_id}&task={task}&from={from}&to={to}"

func newLetterServer(t *testing.T) letterServer {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	h, err := web.NewServer(web.Config{DB: store.DB, LogsURLTemplate: testLogsTemplate})
	if err != nil {
		t.Fatal(err)
	}
	// Every read needs someone signed in; a viewer may read everything.
	return letterServer{h: webtest.AsRole(t, h, store.Access, dlq.RoleViewer), db: db}
}

func (s letterServer) insert(t *testing.T, l storetest.Letter) int64 {
	t.Helper()
	return storetest.InsertDeadLetter(t, s.db.DB, l)
}

// get requests path and parses the answer as HTML.
func (s letterServer) get(t *testing.T, path string, header ...string) (*httptest.ResponseRecorder, *goquery.Document) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return rec, doc
}

func rowIDs(doc *goquery.Document) []string {
	var out []string
	doc.Find(`[data-testid="letter-row"]`).Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-id", ""))
	})
	return out
}

func text(doc *goquery.Document, testid string) string {
	return strings.Join(strings.Fields(doc.Find(`[data-testid="`+testid+`"]`).Text()), " ")
}

func TestDeadLetterList(t *testing.T) {
	t.Parallel()

	t.Run("EmptySaysNothingIsDead", func(t *testing.T) {
		t.Parallel()
		s := newLetterServer(t)
		rec, doc := s.get(t, "/dead-letters")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		if got := text(doc, "empty"); !strings.Contains(got, "No dead letters — the worker has nothing dead") {
			t.Fatalf("empty state %q", got)
		}
		if doc.Find(`[data-testid="empty-clear"]`).Length() != 0 {
			t.Fatal("no filter: no clear-filters link")
		}
	})

	t.Run("FilterThatMatchesNothingOffersToClear", func(t *testing.T) {
		t.Parallel()
		s := newLetterServer(t)
		s.insert(t, storetest.Letter{Task: "billing.charge"})
		_, doc := s.get(t, "/dead-letters?task=email.send")
		if got := text(doc, "empty"); !strings.Contains(got, "No dead letters match this filter") {
			t.Fatalf("empty state %q", got)
		}
		if href := doc.Find(`[data-testid="empty-clear"]`).AttrOr("href", ""); href != "/dead-letters" {
			t.Fatalf("clear link %q", href)
		}
		if v := doc.Find(`[data-testid="filter-task"]`).AttrOr("value", ""); v != "email.send" {
			t.Fatalf("the form must keep the filter, has %q", v)
		}
	})

	t.Run("RowsFilterAndColumns", func(t *testing.T) {
		t.Parallel()
		s := newLetterServer(t)
		now := time.Now().UTC()
		a := s.insert(t, storetest.Letter{Task: "billing.charge", Queue: "payments", ErrorClass: "CardError",
			Message: "card declined " + strings.Repeat("x", 300), Attempts: 1, MaxAttempts: 5, Reason: "permanent", FailedAt: now.Add(-time.Hour)})
		b := s.insert(t, storetest.Letter{Task: "email.send", FailedAt: now.Add(-time.Minute)})
		s.insert(t, storetest.Letter{Task: "email.send", Status: "replayed", FailedAt: now})

		_, doc := s.get(t, "/dead-letters")
		if got, want := rowIDs(doc), []string{fmt.Sprint(b), fmt.Sprint(a)}; !slices.Equal(got, want) {
			t.Fatalf("default list (pending, newest first): %v, want %v", got, want)
		}
		if got := text(doc, "letter-count"); got != "2 pending letters" {
			t.Fatalf("count %q", got)
		}
		row := doc.Find(fmt.Sprintf(`[data-testid="letter-row"][data-id="%d"]`, a))
		if href := row.Find(`[data-testid="letter-link"]`).AttrOr("href", ""); href != fmt.Sprintf("/dead-letters/%d", a) {
			t.Fatalf("row link %q", href)
		}
		errCell := row.Find(`[data-testid="letter-error"]`)
		if title := errCell.AttrOr("title", ""); !strings.HasPrefix(title, "card declined xxx") || len(title) < 300 {
			t.Fatalf("full message on hover, got %d chars", len(title))
		}
		if shown := errCell.Text(); len(shown) > 220 || !strings.Contains(shown, "CardError") {
			t.Fatalf("cell should show the class and a short message: %q", shown)
		}
		cells := row.Find("td")
		for i, want := range map[int]string{2: "billing.charge", 3: "payments", 5: "1/5", 6: "permanent", 7: "pending"} {
			if got := strings.TrimSpace(cells.Eq(i).Text()); got != want {
				t.Errorf("column %d: %q, want %q", i, got, want)
			}
		}
		if row.Find(`input[type="checkbox"][name="id"]`).AttrOr("value", "") != fmt.Sprint(a) {
			t.Error("row checkbox named id with the letter id")
		}
		if doc.Find(`[data-select-all="id"]`).Length() != 1 {
			t.Error("select-all-on-page checkbox")
		}
		if all := doc.Find(`[data-testid="select-all-matching"]`); all.AttrOr("name", "") != "all_matching" || all.AttrOr("type", "") != "checkbox" {
			t.Error("select all matching is a checkbox of the bulk form")
		}
		if doc.Find(`[data-testid="bulk-form"] [data-testid="letters-table"]`).Length() != 1 {
			t.Error("the row checkboxes belong to the bulk form")
		}

		_, doc = s.get(t, "/dead-letters?task=email.send&status=all")
		if got := rowIDs(doc); len(got) != 2 {
			t.Fatalf("task filter, all statuses: %v", got)
		}
		if got := text(doc, "letter-count"); got != "2 letters match" {
			t.Fatalf("count %q", got)
		}
		if got := doc.Find(`[data-testid="filter-status"] option[selected]`).AttrOr("value", ""); got != "all" {
			t.Fatalf("status select shows %q", got)
		}
		csv := doc.Find(`[data-testid="export-csv"]`).AttrOr("href", "")
		if csv != "/dead-letters/export.csv?status=all&task=email.send" {
			t.Fatalf("export link %q", csv)
		}
	})

	t.Run("PagingVisitsEveryLetterOnce", func(t *testing.T) {
		t.Parallel()
		s := newLetterServer(t)
		at := time.Now().UTC().Truncate(time.Second)
		want := map[string]bool{}
		for i := range 23 {
			// Groups of four letters share a failure time.
			id := s.insert(t, storetest.Letter{FailedAt: at.Add(-time.Duration(i/4) * time.Second)})
			want[fmt.Sprint(id)] = true
		}
		seen := map[string]int{}
		path := "/dead-letters?limit=5"
		pages := 0
		for path != "" {
			rec, doc := s.get(t, path)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: %d", path, rec.Code)
			}
			pages++
			for _, id := range rowIDs(doc) {
				seen[id]++
			}
			if pages > 1 && doc.Find(`[data-testid="newest"]`).AttrOr("href", "") != "/dead-letters?limit=5" {
				t.Fatalf("page %d: newest link %q", pages, doc.Find(`[data-testid="newest"]`).AttrOr("href", ""))
			}
			path = doc.Find(`[data-testid="next-page"]`).AttrOr("href", "")
			if path == "" && doc.Find(`[data-testid="end-of-list"]`).Length() != 1 {
				t.Fatal("the last page says it is the end")
			}
		}
		if pages != 5 {
			t.Fatalf("23 letters by 5: want 5 pages, got %d", pages)
		}
		for id := range want {
			if seen[id] != 1 {
				t.Errorf("letter %s seen %d times", id, seen[id])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("saw %d distinct letters, want %d", len(seen), len(want))
		}
	})

	t.Run("HTMXGetsTheResultsFragment", func(t *testing.T) {
		t.Parallel()
		s := newLetterServer(t)
		s.insert(t, storetest.Letter{})
		rec, doc := s.get(t, "/dead-letters", "HX-Request", "true")
		if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "<html") || doc.Find(`[data-testid="filters"]`).Length() != 0 {
			t.Fatalf("want a bare fragment, got %d:\n%.300s", rec.Code, rec.Body.String())
		}
		if len(rowIDs(doc)) != 1 {
			t.Fatal("fragment lacks the rows")
		}
		rec, _ = s.get(t, "/dead-letters?q=&task=&status=pending&limit=50&reason=", "HX-Request", "true")
		if got := rec.Header().Get("HX-Push-Url"); got != "/dead-letters" {
			t.Fatalf("the pushed URL should be canonical, got %q", got)
		}
		rec, _ = s.get(t, "/dead-letters", "HX-Request", "true", "HX-History-Restore-Request", "true")
		if !strings.Contains(rec.Body.String(), "<html") {
			t.Fatal("a history restore needs the whole page")
		}
		rec, doc = s.get(t, "/dead-letters?limit=0", "HX-Request", "true")
		if rec.Code != http.StatusOK || doc.Find(`[data-testid="filter-error"]`).Length() != 1 {
			t.Fatalf("htmx bad filter: %d %s", rec.Code, rec.Body.String())
		}
	})
}

func TestDeadLetterListRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	s.insert(t, storetest.Letter{})
	good := dlq.Cursor{FailedAt: time.Now(), ID: 5}.String()
	for _, tc := range []struct {
		query, field string
	}{
		{"reason=tired", "reason"},
		{"status=dead", "status"},
		{"since=last+tuesday", "since"},
		{"since=1h&until=2h", "until"},
		{"limit=100000", "limit"},
		{"limit=-3", "limit"},
		{"cursor=" + good[:len(good)-3] + "zzz", "cursor"},
		{"cursor=%3Cscript%3E", "cursor"},
		{"q=%FF%FE%FD", "q"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			rec, doc := s.get(t, "/dead-letters?"+tc.query)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", rec.Code)
			}
			msg := text(doc, "filter-error")
			if !strings.Contains(msg, "("+tc.field+"):") {
				t.Fatalf("the error should name %s: %q", tc.field, msg)
			}
			if tc.field == "cursor" && !strings.Contains(msg, "invalid cursor") {
				t.Fatalf("cursor message %q", msg)
			}
			if doc.Find(`[data-testid="filters"]`).Length() != 1 {
				t.Fatal("the form stays, so the filter can be fixed")
			}
			if strings.Contains(rec.Body.String(), "goroutine") || strings.Contains(rec.Body.String(), ".go:") {
				t.Fatal("internals leaked")
			}
		})
	}
}

// Text from the database is text: markup in an error message or in args
// is escaped, never interpreted.
func TestDeadLetterPagesEscapeData(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	payload := `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
	id := s.insert(t, storetest.Letter{ErrorClass: "Evil<b>Class</b>", Message: payload,
		Args: fmt.Sprintf(`[%q]`, payload), Kwargs: fmt.Sprintf(`{"html": %q}`, payload), Traceback: payload})
	for _, path := range []string{"/dead-letters", fmt.Sprintf("/dead-letters/%d", id), "/groups"} {
		rec, doc := s.get(t, path)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, rec.Code)
		}
		body := rec.Body.String()
		if strings.Contains(body, "<script>window") || strings.Contains(body, "<img src=x") || doc.Find("img, b").Length() != 0 {
			t.Fatalf("%s: markup from the database reached the page as markup", path)
		}
		if n := doc.Find("script[src^='/static/']").Length(); n != doc.Find("script").Length() || n != 3 {
			t.Fatalf("%s: want only the three static scripts (htmx, app, csrf), found %d", path, doc.Find("script").Length())
		}
		if !strings.Contains(doc.Text(), "<script>window.__xss=1</script>") {
			t.Fatalf("%s: the payload should be visible as text", path)
		}
	}
}

func TestDeadLetterDetail(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	history := `[
		{"attempt":1,"at":"2026-03-01T09:00:00Z","host":"w-1","version":"v1.2","class":"TimeoutError","message":"slow upstream","outcome":"retry","retry_in_ms":2300,"duration_ms":30000},
		{"attempt":2,"at":"2026-03-01T09:30:00Z","host":"w-2","version":"v1.2","class":"TimeoutError","message":"slow again","outcome":"retry","retry_in_ms":61000,"duration_ms":450},
		{"attempt":3,"at":"2026-03-01T10:00:00Z","host":"w-3","version":"v1.3","class":"ConnectionError","message":"refused","outcome":"dead","duration_ms":12}]`
	var tb strings.Builder
	tb.WriteString("Traceback (most recent call last):\n")
	for i := range 60 {
		fmt.Fprintf(&tb, "  File \"/srv/app/mod%d.py\", line %d, in f\n", i, i)
	}
	tb.WriteString("ConnectionError: refused")
	first := s.insert(t, storetest.Letter{Task: "orders.sync", Status: "replayed", ReplayJobID: 4242})
	id := s.insert(t, storetest.Letter{JobID: 777, Task: "orders.sync", Queue: "bulk", Args: `[1,{"order":"A-1"}]`, Kwargs: `{"region":"eu"}`,
		ErrorClass: "ConnectionError", Message: "refused", Traceback: tb.String(), Attempts: 3, MaxAttempts: 3,
		Reason: "exhausted", History: history, FailedAt: at, WorkerVersion: "v1.3", Fingerprint: "fp-orders", ReplayOf: &first})
	later := s.insert(t, storetest.Letter{Task: "orders.sync", ReplayOf: &id})

	rec, doc := s.get(t, fmt.Sprintf("/dead-letters/%d", id))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if got := text(doc, "why"); !strings.HasPrefix(got, "Exhausted 3/3 attempts") {
		t.Fatalf("why %q", got)
	}
	if got := doc.Find(`[data-testid="job-link"]`).AttrOr("href", ""); got != "/jobs/777" {
		t.Fatalf("job link %q", got)
	}
	if got := doc.Find(`[data-testid="group-link"]`).AttrOr("href", ""); got != "/groups/fp-orders" {
		t.Fatalf("group link %q", got)
	}
	if got := doc.Find(`[data-testid="args"]`).Text(); !strings.Contains(got, "\"order\": \"A-1\"") || !strings.Contains(got, "\n") {
		t.Fatalf("args not pretty-printed: %q", got)
	}
	if got := doc.Find(`[data-testid="kwargs"]`).Text(); !strings.Contains(got, `"region": "eu"`) {
		t.Fatalf("kwargs %q", got)
	}
	if text(doc, "error-class") != "ConnectionError" || text(doc, "error-message") != "refused" {
		t.Fatal("error class and message")
	}
	if head := doc.Find(`[data-testid="traceback"]`).Text(); strings.Count(head, "\n") != 39 {
		t.Fatalf("traceback head should be 40 lines, has %d", strings.Count(head, "\n")+1)
	}
	if got := doc.Find(`[data-testid="traceback-more"] summary`).Text(); got != "Show all 62 lines" {
		t.Fatalf("traceback summary %q", got)
	}
	if !strings.HasSuffix(doc.Find("#traceback-full").Text(), "ConnectionError: refused") {
		t.Fatal("the copy button's full traceback")
	}
	attempts := doc.Find(`[data-testid="attempt"]`)
	if attempts.Length() != 3 {
		t.Fatalf("want 3 attempts, got %d", attempts.Length())
	}
	a1 := strings.Join(strings.Fields(attempts.Eq(0).Text()), " ")
	for _, want := range []string{"Attempt 1", "w-1 · v1.2", "ran 30 s", "TimeoutError", "slow upstream", "retried after 2.3 s"} {
		if !strings.Contains(a1, want) {
			t.Errorf("attempt 1 lacks %q: %s", want, a1)
		}
	}
	if a2 := attempts.Eq(1).Text(); !strings.Contains(a2, "retried after 1 min 1 s") || !strings.Contains(a2, "450 ms") {
		t.Errorf("attempt 2: %s", strings.Join(strings.Fields(a2), " "))
	}
	logs, _ := url.Parse(attempts.Eq(2).Find(`[data-testid="logs-link"]`).AttrOr("href", ""))
	if q := logs.Query(); q.Get("job") != "777" || q.Get("task") != "orders.sync" ||
		q.Get("from") != "2026-03-01T09:58:59Z" || q.Get("to") != "2026-03-01T10:01:00Z" {
		t.Errorf("logs link %v", logs)
	}
	if got := text(doc, "replay-of"); !strings.Contains(got, fmt.Sprintf("replay of letter %d", first)) {
		t.Errorf("replay-of %q", got)
	}
	if got := doc.Find(`[data-testid="later-letters"] a`).AttrOr("href", ""); got != fmt.Sprintf("/dead-letters/%d", later) {
		t.Errorf("later letter link %q", got)
	}
	_, doc = s.get(t, fmt.Sprintf("/dead-letters/%d", first))
	if got := doc.Find(`[data-testid="replayed-as"] a`).AttrOr("href", ""); got != "/jobs/4242" {
		t.Errorf("replay job link %q", got)
	}

	for path, want := range map[string]int{
		"/dead-letters/987654":                  http.StatusNotFound,
		"/dead-letters/abc":                     http.StatusBadRequest,
		"/dead-letters/-1":                      http.StatusBadRequest,
		"/dead-letters/99999999999999999999999": http.StatusBadRequest,
	} {
		rec, doc := s.get(t, path)
		if rec.Code != want {
			t.Errorf("%s: %d, want %d", path, rec.Code, want)
		}
		if msg := text(doc, "error-message"); msg == "" || strings.Contains(msg, "Internal") {
			t.Errorf("%s: friendly message expected, got %q", path, msg)
		}
	}
}

func TestDeadLetterDetailWords(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	for _, tc := range []struct {
		l    storetest.Letter
		want string
	}{
		{storetest.Letter{Reason: "permanent", Attempts: 1, MaxAttempts: 5}, "Permanent error at attempt 1"},
		{storetest.Letter{Reason: "lease_expired", Attempts: 3, MaxAttempts: 3}, "Lease expired: the worker vanished on attempt 3/3"},
		{storetest.Letter{Reason: "exhausted", Attempts: 5, MaxAttempts: 5}, "Exhausted 5/5 attempts"},
	} {
		id := s.insert(t, tc.l)
		_, doc := s.get(t, fmt.Sprintf("/dead-letters/%d", id))
		if got := text(doc, "why"); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q", tc.l.Reason, got)
		}
	}
	// A huge traceback is cut before it is sent, with a note.
	id := s.insert(t, storetest.Letter{Traceback: strings.Repeat("line of a deep recursion\n", 40_000)})
	rec, doc := s.get(t, fmt.Sprintf("/dead-letters/%d", id))
	if rec.Body.Len() > 3*dlq.TracebackCap {
		t.Fatalf("page is %d bytes", rec.Body.Len())
	}
	if got := text(doc, "traceback-note"); !strings.Contains(got, "1,000,000 characters") {
		t.Fatalf("note %q", got)
	}
}

func TestGroupsPage(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	now := time.Now().UTC()
	for i := range 4 {
		s.insert(t, storetest.Letter{Task: "billing.charge", ErrorClass: "CardError", Message: "declined", Fingerprint: "fp-card",
			FailedAt: now.Add(-time.Duration(i) * 24 * time.Hour)})
	}
	s.insert(t, storetest.Letter{Task: "email.send", Fingerprint: "fp-mail", Status: "replayed"})

	rec, doc := s.get(t, "/groups")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	rows := doc.Find(`[data-testid="group-row"]`)
	if rows.Length() != 2 || rows.Eq(0).AttrOr("data-fingerprint", "") != "fp-card" {
		t.Fatalf("want fp-card first of 2 groups")
	}
	if got := rows.Eq(0).Find(`[data-testid="group-pending"] a`).AttrOr("href", ""); got != "/dead-letters?fingerprint=fp-card" {
		t.Fatalf("group link %q", got)
	}
	if got := rows.Eq(1).Find(`[data-testid="group-pending"] a`).AttrOr("href", ""); got != "/dead-letters?fingerprint=fp-mail&status=all" {
		t.Fatalf("a group with nothing pending links to all its letters: %q", got)
	}
	if got := strings.TrimSpace(rows.Eq(0).Find(`[data-testid="group-pending"]`).Text()); got != "4" {
		t.Fatalf("pending %q", got)
	}
	points := strings.Fields(rows.Eq(0).Find(`[data-testid="sparkline"] polyline`).AttrOr("points", ""))
	if len(points) != dlq.SparkDays {
		t.Fatalf("sparkline has %d points", len(points))
	}
	if label := rows.Eq(0).Find(`[data-testid="sparkline"]`).AttrOr("aria-label", ""); !strings.HasPrefix(label, "4 letters in the last 14 days") {
		t.Fatalf("sparkline label %q", label)
	}

	_, doc = s.get(t, "/groups?task=email.send")
	if doc.Find(`[data-testid="group-row"]`).Length() != 1 {
		t.Fatal("task filter")
	}
	rec, doc = s.get(t, "/groups?sort=name")
	if rec.Code != http.StatusBadRequest || !strings.Contains(text(doc, "filter-error"), "Sort by (sort):") {
		t.Fatalf("bad sort: %d", rec.Code)
	}
}

package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// console is the real server on a fresh database, for the overview, jobs,
// workers and jobs API tests.
type console struct {
	h     http.Handler
	db    *storetest.DB
	store *storetest.Stores
}

func newConsole(t *testing.T, cfgs ...func(*web.Config)) console {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	cfg := web.Config{DB: store.DB}
	for _, f := range cfgs {
		f(&cfg)
	}
	h, err := web.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Signed in as an operator: these tests read everything and enqueue.
	return console{h: webtest.AsRole(t, h, store.Access, dlq.RoleOperator), db: db, store: store}
}

// exec runs fixture SQL.
func (c console) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := c.db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// count runs a count query for assertions about what is in the database.
func (c console) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := c.db.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// do sends one request and returns the recorded answer.
func (c console) do(t *testing.T, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	return rec
}

// page GETs path and parses the answer as HTML.
func (c console) page(t *testing.T, path string, header ...string) (*httptest.ResponseRecorder, *goquery.Document) {
	t.Helper()
	rec := c.do(t, http.MethodGet, path, "", header...)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return rec, doc
}

// byTestID finds the elements marked data-testid=id.
func byTestID(doc *goquery.Selection, id string) *goquery.Selection {
	return doc.Find(`[data-testid="` + id + `"]`)
}

// squash is an element's text with runs of white space made one space.
func squash(s *goquery.Selection) string {
	return strings.Join(strings.Fields(s.Text()), " ")
}

// insertLetters inserts dead letters with defaults: n letters of task in
// queue with fingerprint fp, failed ago before now.
func (c console) insertLetters(t *testing.T, n int, task, fp, ago string) {
	t.Helper()
	c.exec(t, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
		attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'default', $2, '[]', '{}', 'ChargeError',
			'card declined for order ' || g, 3, 3, 'exhausted', $3, now() - $4::interval, now() - $4::interval
		FROM generate_series(1, $1) g`, n, task, fp, ago)
}

// insertJobs inserts n jobs of one queue, task and state.
func (c console) insertJobs(t *testing.T, n int, queue, task string, state dlq.State) []int64 {
	t.Helper()
	var ids []int64
	err := c.db.SelectContext(context.Background(), &ids, `
		INSERT INTO jobs (queue, task, state, attempt, lease_owner, lease_expires_at, attempted_at, finished_at)
		SELECT $2, $3, $4, CASE WHEN $4 = 'available' THEN 0 ELSE 1 END,
			CASE WHEN $4 = 'running' THEN 'w1' END,
			CASE WHEN $4 = 'running' THEN now() + interval '30 seconds' END,
			CASE WHEN $4 <> 'available' THEN now() END,
			CASE WHEN $4 IN ('succeeded', 'dead') THEN now() END
		FROM generate_series(1, $1)
		RETURNING id`, n, queue, task, string(state))
	if err != nil {
		t.Fatalf("insert jobs: %v", err)
	}
	return ids
}

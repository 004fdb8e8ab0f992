package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// actions is the real console on a fresh database with the bulk-operation
// runner beside it, as `redrive serve` runs it, and two people signed in:
// olga the operator and vic the viewer, each with a browser session and an
// API token.
type actions struct {
	h               http.Handler
	db              *storetest.DB
	store           *storetest.Stores
	olga            *webtest.Session
	vic             *webtest.Session
	olgaAPI, vicAPI string // bearer tokens
}

// The tasks the fixtures' letters belong to: a replay needs a task some
// worker registered.
var fixtureTasks = []string{"billing.charge", "email.send", "reports.build"}

func newActions(t *testing.T) actions {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx, cancel := context.WithCancel(context.Background())
	if err := store.Queue.RegisterTasks(ctx, fixtureTasks); err != nil {
		t.Fatal(err)
	}
	runner := replay.NewRunner(replay.RunnerConfig{Store: store.Operations, PollInterval: 20 * time.Millisecond, BatchSize: 500})
	ran := make(chan error, 1)
	go func() { ran <- runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
	h, err := web.NewServer(web.Config{DB: store.DB, Replay: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Wake: runner.Wake})})
	if err != nil {
		t.Fatal(err)
	}
	webtest.CreateUser(t, store.Access, "olga", dlq.RoleOperator)
	webtest.CreateUser(t, store.Access, "vic", dlq.RoleViewer)
	return actions{h: h, db: db, store: store,
		olga: webtest.SignIn(t, h, "olga", webtest.Password), vic: webtest.SignIn(t, h, "vic", webtest.Password),
		olgaAPI: webtest.Token(t, store.Access, "olga"), vicAPI: webtest.Token(t, store.Access, "vic")}
}

// letters inserts n pending letters of task and returns their ids.
func (a actions) letters(t *testing.T, n int, task string) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		ids = append(ids, storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: task, Args: `[1,{"order":"A-1"}]`,
			Kwargs: `{"region":"eu"}`, WorkerVersion: "v1.4.2"}))
	}
	return ids
}

func (a actions) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := a.db.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// actionEntries counts the audit entries of actions on letters (sign-ins
// and user changes of the fixture are left out).
func (a actions) actionEntries(t *testing.T) int {
	t.Helper()
	return a.count(t, `SELECT count(*) FROM audit_events WHERE action = ANY($1)`, pqStrings(
		dlq.ActionReplay, dlq.ActionEditReplay, dlq.ActionDiscard, dlq.ActionRestore, dlq.ActionBulkStart,
		dlq.ActionBulkFinish, dlq.ActionBulkCancel, dlq.ActionCanaryRelease))
}

// page GETs path as session s and parses the HTML.
func (a actions) page(t *testing.T, s *webtest.Session, path string) (*httptest.ResponseRecorder, *goquery.Document) {
	t.Helper()
	rec := s.Do(a.h, httptest.NewRequest(http.MethodGet, path, nil))
	return rec, parseHTML(t, rec)
}

func parseHTML(t *testing.T, rec *httptest.ResponseRecorder) *goquery.Document {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// formValues reads a form as a browser would submit it: its inputs
// (hidden ones included, so the CSRF token and one-time key are the form's
// own), ticked checkboxes, textareas; then set overrides them.
func formValues(form *goquery.Selection, set url.Values) url.Values {
	v := url.Values{}
	form.Find("input, textarea, select").Each(func(_ int, in *goquery.Selection) {
		name, ok := in.Attr("name")
		if !ok {
			return
		}
		switch typ := in.AttrOr("type", "text"); {
		case goquery.NodeName(in) == "textarea":
			v.Add(name, in.Text())
		case goquery.NodeName(in) == "select":
			v.Add(name, in.Find("option[selected]").AttrOr("value", ""))
		case typ == "checkbox" || typ == "radio":
			if _, on := in.Attr("checked"); on {
				v.Add(name, in.AttrOr("value", "on"))
			}
		case typ == "submit":
		default:
			v.Add(name, in.AttrOr("value", ""))
		}
	})
	for k, vs := range set {
		v[k] = vs
	}
	return v
}

// submit posts the form found by selector in doc as session s would from
// a browser: the session's cookies, and the CSRF token only as the form
// carries it (no header), so a form without its token fails.
func (a actions) submit(t *testing.T, s *webtest.Session, doc *goquery.Document, selector string, set url.Values) *httptest.ResponseRecorder {
	t.Helper()
	form := doc.Find(selector)
	if form.Length() != 1 {
		t.Fatalf("%d forms match %s", form.Length(), selector)
	}
	return a.post(t, s, form.AttrOr("action", ""), formValues(form, set))
}

// post sends form values to path with s's cookies and no CSRF header.
func (a actions) post(t *testing.T, s *webtest.Session, path string, v url.Values) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range s.Cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

// api sends a JSON request with a bearer token; header is name, value pairs.
func (a actions) api(t *testing.T, token, method, path, body string, header ...string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %.300s", method, path, rec.Code, rec.Body.String())
	}
	return rec, out
}

// waitOperation waits until operation id is in state want.
func (a actions) waitOperation(t *testing.T, id int64, want dlq.OperationState) dlq.Operation {
	t.Helper()
	var op dlq.Operation
	storetest.WaitFor(t, 20*time.Second, fmt.Sprintf("operation %d to be %s", id, want), func() bool {
		var err error
		if op, err = a.store.Operations.Operation(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return op.State == want
	})
	return op
}

// succeedReplays does what a worker would do with every job waiting: run
// it, successfully (this harness runs a runner but no worker), so that a
// replay operation settles.
func (a actions) succeedReplays(t *testing.T) {
	t.Helper()
	a.db.MustExec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE state IN ('available', 'retrying')`)
}

// operationFrom reads the operation id from a redirect to its page.
func operationFrom(t *testing.T, rec *httptest.ResponseRecorder) int64 {
	t.Helper()
	var id int64
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("want a 303 to the operation, got %d: %.500s", rec.Code, rec.Body.String())
	}
	if _, err := fmt.Sscanf(rec.Header().Get("Location"), "/operations/%d", &id); err != nil {
		t.Fatalf("redirect to %q: %v", rec.Header().Get("Location"), err)
	}
	return id
}

func pqStrings(s ...string) any { return "{" + strings.Join(s, ",") + "}" }

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

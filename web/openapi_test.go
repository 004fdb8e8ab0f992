package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// The OpenAPI document (web/openapi.json) is written by hand; these tests
// keep it honest against the routes and against real answers.

// apiConsole is a real console on 127.0.0.1 with a bulk runner, an
// operator's and a viewer's API token, and the OpenAPI document it serves.
type apiConsole struct {
	url, operator, viewer string
	h                     http.Handler
	db                    *storetest.DB
	doc                   *openapi3.T
	router                routers.Router
}

func newAPIConsole(t *testing.T) *apiConsole {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx, cancel := context.WithCancel(context.Background())
	if err := store.Queue.RegisterTasks(ctx, []string{"billing.charge", "email.send"}); err != nil {
		t.Fatal(err)
	}
	runner := replay.NewRunner(replay.RunnerConfig{Store: store.Operations, PollInterval: 20 * time.Millisecond})
	ran := make(chan error, 1)
	go func() { ran <- runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
	h, err := web.NewServer(web.Config{DB: store.DB, RetainLetters: 30 * 24 * time.Hour, Replay: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Wake: runner.Wake})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	webtest.CreateUser(t, store.Access, "olga", dlq.RoleOperator)
	webtest.CreateUser(t, store.Access, "vic", dlq.RoleViewer)
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	c := &apiConsole{url: srv.URL, h: h, db: db, operator: webtest.Token(t, store.Access, "olga"), viewer: webtest.Token(t, store.Access, "vic")}

	// The document as the server serves it, to anyone.
	resp, err := http.Get(srv.URL + web.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s without a token: %d %s %v", web.OpenAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if c.doc, err = openapi3.NewLoader().LoadFromData(raw); err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := c.doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	if c.doc.OpenAPI != "3.1.0" || !c.doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1.0", c.doc.OpenAPI)
	}
	if c.router, err = gorillamux.NewRouter(c.doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOpenAPIDocumentsEveryRoute: every /api/ route registered in
// routes.go is in the document with its method, and every operation in
// the document is a registered route.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	c := newAPIConsole(t)
	e, ok := c.h.(interface{ Routes() []*echo.Route })
	if !ok {
		t.Fatalf("web.NewServer returned %T, which does not list its routes", c.h)
	}
	var registered, documented []string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/api/") {
			registered = append(registered, r.Method+" "+echoPathToOpenAPI(r.Path))
		}
	}
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(registered)
	registered = slices.Compact(registered)
	slices.Sort(documented)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("the OpenAPI document has %s, which is no route", d)
		}
	}
	if len(registered) < 18 {
		t.Fatalf("only %d API routes found: %v", len(registered), registered)
	}
}

// echoPathToOpenAPI turns /a/:id/b into /a/{id}/b.
func echoPathToOpenAPI(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// call sends one request to the real server, validates it (when valid)
// and its answer against the document, checks the status and returns the
// decoded body. Each operation's answers are tallied in seen.
func (c *apiConsole) call(t *testing.T, seen map[string][]int, token, method, path, body string, want int) map[string]any {
	t.Helper()
	return c.callKey(t, seen, token, "", method, path, body, want)
}

// callKey is call with an Idempotency-Key header (none when key is "").
func (c *apiConsole) callKey(t *testing.T, seen map[string][]int, token, key, method, path, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the document: %v", method, path, err)
	}
	input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if want < 300 {
		// A request that should succeed must be one the document allows.
		if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
			t.Errorf("%s %s: the request does not match the document: %v", method, path, err)
		}
		req.Body = io.NopCloser(strings.NewReader(body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s; want %d", method, path, resp.StatusCode, raw, want)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: the %d answer does not match the document: %v\n%s", method, path, resp.StatusCode, err, raw)
	}
	op := route.Method + " " + route.Path
	seen[op] = append(seen[op], resp.StatusCode)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: not a JSON object: %v", method, path, err)
	}
	if want >= 400 {
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] == "" || e["message"] == "" {
			t.Errorf("%s %s: error body %s has no code and message", method, path, raw)
		}
	}
	return m
}

// TestOpenAPIResponsesMatch drives every API operation through a real
// server on real Postgres, with answers that succeed and answers that
// fail, and validates each request and answer against the document
// (kin-openapi, JSON Schema 2020-12 for OpenAPI 3.1; an undocumented
// status fails too). At the end, every documented operation must have
// been seen to succeed and to fail.
func TestOpenAPIResponsesMatch(t *testing.T) {
	t.Parallel()
	c := newAPIConsole(t)
	seen := map[string][]int{}
	op, vic := c.operator, c.viewer
	letter := func(task string) int64 {
		return storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: task, Args: `[1, {"order": "A-1"}]`, Kwargs: `{"region": "eu"}`})
	}
	a, b, d := letter("billing.charge"), letter("billing.charge"), letter("email.send")
	bulk := []int64{letter("email.send"), letter("email.send"), letter("email.send")}
	id := func(n any) int64 { return int64(n.(float64)) }

	c.call(t, seen, "", "GET", web.OpenAPIPath, "", 200)
	// The document itself cannot fail; its 401 is a route that needs a token.
	seen["GET "+web.OpenAPIPath] = append(seen["GET "+web.OpenAPIPath], 401)

	// Reads.
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?task=billing.charge&limit=1", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?status=all", "", 200)
	c.call(t, seen, "", "GET", "/api/v1/dead-letters", "", 401)
	c.call(t, seen, "not-a-token", "GET", "/api/v1/dead-letters", "", 401)
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?status=bogus&limit=0", "", 400)
	// Qualifiers on the arguments; a masked key (card, by the default
	// policy) and an unreadable query are refused.
	if got := c.call(t, seen, vic, "GET", "/api/v1/dead-letters?q="+url.QueryEscape("kwargs.region:eu and args.0:1"), "", 200); len(got["items"].([]any)) != 6 {
		t.Fatalf("kwargs.region:eu and args.0:1 listed %v", got["items"])
	}
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?q="+url.QueryEscape("kwargs.card_number:4242"), "", 400)
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?q="+url.QueryEscape("kwargs.amount>lots"), "", 400)
	// Several error groups: the letters of any of them, in one list.
	var groups []string
	if err := c.db.Select(&groups, `SELECT DISTINCT fingerprint FROM dead_letters ORDER BY 1`); err != nil || len(groups) != 2 {
		t.Fatalf("the fixture's groups: %v %v", groups, err)
	}
	both := c.call(t, seen, vic, "GET", "/api/v1/dead-letters?fingerprint="+strings.Join(groups, ","), "", 200)
	if items, _ := both["items"].([]any); len(items) != 6 {
		t.Errorf("the letters of both groups: %d, want all 6", len(items))
	}
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters?fingerprint="+groups[0]+",not-a-group", "", 400)
	c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", a), "", 200)
	// An attempt that logged: its lines are in the history (Attempt.logs).
	logged := storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: "billing.charge", History: `[{"attempt": 1,
		"at": "2026-03-01T09:00:00Z", "class": "HTTPError", "message": "402", "outcome": "dead",
		"logs": "time=09:00:00.001 level=INFO msg=charging order=A-1\n"}]`})
	if got := c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", logged), "", 200); !strings.Contains(fmt.Sprint(got["history"]), "msg=charging order=A-1") {
		t.Errorf("an attempt's logs are not in the letter's history: %v", got["history"])
	}
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters/99999999", "", 404)
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters/abc", "", 400)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/reveal", a), "", 200)
	c.call(t, seen, vic, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/reveal", a), "", 403)
	c.call(t, seen, vic, "GET", "/api/v1/groups", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/groups?sort=rate&limit=1", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/groups?sort=nope", "", 400)
	c.call(t, seen, vic, "GET", "/api/v1/incidents", "", 200)
	c.call(t, seen, "", "GET", "/api/v1/incidents", "", 401)

	// Actions on one letter.
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", a), `{"reason": "fixed", "queue": "sandbox", "max_attempts": 2}`, 200)
	conflict := c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", a), "", 409)
	if conflict["replay_job_id"] == nil {
		t.Errorf("409 of a replayed letter without replay_job_id: %v", conflict)
	}
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b), `{"args": {"not": "an array"}}`, 422)
	c.call(t, seen, vic, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b), "", 403)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", b), `{"start_at": "2001-01-01T00:00:00Z"}`, 400)
	// A test run leaves b pending: it is replayed below all the same.
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", b), `{"queue": "sandbox", "kwargs": {"region": "us"}}`, 201)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", b), `{"args": {"not": "an array"}}`, 422)
	c.call(t, seen, vic, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", b), "", 403)
	if runs := c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", b), "", 200); len(runs["test_runs"].([]any)) != 1 {
		t.Errorf("test runs of letter %d: %v; want the one just run", b, runs)
	}
	c.call(t, seen, vic, "GET", "/api/v1/dead-letters/abc/test-runs", "", 400)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", b), `{}`, 400)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", b), `{"reason": "test data"}`, 200)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/restore", b), `{"reason": "not test data"}`, 200)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/restore", b), "", 409)

	// Bulk operations and following them.
	body := func(ids []int64, extra string) string {
		raw, _ := json.Marshal(ids)
		return fmt.Sprintf(`{"ids": %s, "reason": "deploy 42"%s}`, raw, extra)
	}
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body(bulk, `, "dry_run": true`), 200)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body(bulk, `, "dry_run": true, "queue": "sandbox", "start_at": "`+later+`", "max_attempts": 2`), 200)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body(bulk, `, "max_attempts": 1000`), 400)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", `{"filter": {"since": "yesterday-ish"}}`, 400)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", `{"filter": {"fingerprint": "`+strings.Join(groups, ",")+`"}, "dry_run": true}`, 200)
	if got := c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", `{"filter": {"q": "args[1].order:A-1 not kwargs.region:us"}, "dry_run": true}`, 200); got["matched"] == nil {
		t.Fatalf("a dry run by qualifiers answered %v", got)
	}
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/discard", `{"filter": {"q": "kwargs.card_number:4242"}, "reason": "x"}`, 400)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", `{"filters": {}}`, 400)
	canary := c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body(bulk, `, "canary": 1, "wait_seconds": 0`), 202)
	canaryID := id(canary["operation_id"])
	waitForState(t, c, canaryID, "canary")
	c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/operations/%d", canaryID), "", 202)
	c.callKey(t, seen, op, "K-op-cancel", "POST", fmt.Sprintf("/api/v1/operations/%d/cancel", canaryID), "", 200)
	c.callKey(t, seen, op, "K-op-cancel", "POST", fmt.Sprintf("/api/v1/operations/%d/cancel", canaryID), "", 200)
	c.callKey(t, seen, op, "K-op-cancel", "POST", fmt.Sprintf("/api/v1/operations/%d/release", canaryID), "", 422)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/cancel", canaryID), "", 409)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/release", canaryID), "{}", 409)
	c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/operations/%d", canaryID), "", 200)

	canary = c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body(bulk[1:], `, "canary": 1, "rate_per_second": 50`), 202)
	released := c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/release", id(canary["operation_id"])), "", 202)
	if released["state"] != "running" {
		t.Errorf("released: %v", released)
	}
	// Every letter enqueued; no worker runs here, so its replays wait:
	// settling, with the counts of the second phase, until someone stops
	// following it.
	waitForState(t, c, id(canary["operation_id"]), "settling")
	settling := c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/operations/%d", id(canary["operation_id"])), "", 202)
	if r, _ := settling["replays"].(map[string]any); r == nil || r["waiting"] != float64(len(bulk)-1) {
		t.Errorf("settling: replays %v, want %d waiting", settling["replays"], len(bulk)-1)
	}
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/resume", id(canary["operation_id"])), "", 409)
	stopped := c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/stop-following", id(canary["operation_id"])), "", 200)
	if stopped["state"] != "done" || stopped["stopped_following_by"] != "olga" {
		t.Errorf("stopped following: %v", stopped)
	}
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/stop-following", id(canary["operation_id"])), "", 409)
	// An operation the died-again guard paused (its state set here: the
	// guard itself is tested in dlq) resumes.
	paused := c.call(t, seen, op, "POST", "/api/v1/dead-letters/replay", body([]int64{letter("email.send"), letter("email.send")}, `, "canary": 1, "wait_seconds": 0`), 202)
	waitForState(t, c, id(paused["operation_id"]), "canary")
	c.db.MustExec(`UPDATE operations SET state = 'auto_paused', died_again_percent = 20, guard_verdict = 'tripped' WHERE id = $1`, id(paused["operation_id"]))
	resumed := c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/operations/%d/resume", id(paused["operation_id"])), "", 202)
	if resumed["state"] != "running" || resumed["died_again_percent"] != 20.0 {
		t.Errorf("resumed: %v", resumed)
	}
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/discard", body([]int64{d}, ""), 200)
	c.call(t, seen, vic, "POST", "/api/v1/dead-letters/discard", body([]int64{d}, ""), 403)
	c.call(t, seen, op, "POST", "/api/v1/dead-letters/discard", `{"ids": [1], "wait_seconds": 1000}`, 400)
	c.call(t, seen, vic, "GET", "/api/v1/operations", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/operations?state=done&limit=5", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/operations?state=finishd", "", 400)
	c.call(t, seen, vic, "GET", "/api/v1/operations?kind=purge", "", 400)
	c.call(t, seen, vic, "GET", "/api/v1/operations?cursor=x", "", 400)
	// Paging, and the filters of the list: olga's finished replays, one a page.
	first := c.call(t, seen, vic, "GET", "/api/v1/operations?state=finished&kind=replay&actor=OLGA&limit=1", "", 200)
	if items, _ := first["items"].([]any); len(items) != 1 || first["next_cursor"] == nil {
		t.Fatalf("the first page of olga's finished replays: %v", first)
	}
	older := c.call(t, seen, vic, "GET", "/api/v1/operations?state=finished&kind=replay&actor=olga&limit=1&cursor="+
		first["next_cursor"].(string), "", 200)
	if items, _ := older["items"].([]any); len(items) != 1 ||
		id(items[0].(map[string]any)["operation_id"]) >= id(first["items"].([]any)[0].(map[string]any)["operation_id"]) {
		t.Errorf("the next page does not hold an older operation: %v after %v", older, first)
	}
	for _, item := range c.call(t, seen, vic, "GET", "/api/v1/operations?state=open", "", 200)["items"].([]any) {
		if item.(map[string]any)["finished_at"] != nil {
			t.Errorf("state=open lists a finished operation: %v", item)
		}
	}
	c.call(t, seen, vic, "GET", "/api/v1/operations/99999999", "", 404)
	c.call(t, seen, op, "POST", "/api/v1/operations/99999999/cancel", "", 404)
	c.call(t, seen, op, "POST", "/api/v1/operations/x/release", "", 400)

	// Jobs.
	job := c.call(t, seen, op, "POST", "/api/v1/jobs", `{"task": "billing.charge", "args": [1], "idempotency_key": "k-1"}`, 201)
	c.call(t, seen, op, "POST", "/api/v1/jobs", `{"task": "billing.charge", "args": [1], "idempotency_key": "k-1"}`, 200)
	c.call(t, seen, op, "POST", "/api/v1/jobs", `{"task": "billing.charge", "max_atempts": 3}`, 400)
	c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/jobs/%d", id(job["id"])), "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/jobs/99999999", "", 404)
	c.call(t, seen, op, "POST", "/api/v1/jobs/batch", `{"jobs": [{"task": "email.send"}, {"task": "email.send", "kwargs": {"to": "a@b.c"}}]}`, 201)
	c.call(t, seen, op, "POST", "/api/v1/jobs/batch", `{"jobs": [{"task": ""}]}`, 400)

	// The audit trail of all of the above.
	c.call(t, seen, vic, "GET", "/api/v1/audit?limit=5", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/audit?action=bogus", "", 400)
	c.call(t, seen, vic, "GET", "/api/v1/audit?hide_sign_ins=1&limit=5", "", 200)
	c.call(t, seen, vic, "GET", "/api/v1/audit?hide_sign_ins=yes", "", 400)

	exercisePauses(t, c, seen)
	exerciseSchedules(t, c, seen)
	exerciseThrottles(t, c, seen)
	exerciseIngest(t, c, seen)
	exerciseJobActions(t, c, seen)
	exerciseGroupEdits(t, c, seen)
	exerciseTasks(t, c, seen)
	exerciseRetention(t, c, seen)

	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			statuses := seen[method+" "+path]
			ok := slices.ContainsFunc(statuses, func(s int) bool { return s < 300 })
			failed := slices.ContainsFunc(statuses, func(s int) bool { return s >= 400 })
			if !ok || !failed {
				t.Errorf("%s %s: answers seen %v; want a success and an error", method, path, statuses)
			}
		}
	}
}

// exerciseIngest sends letters of another system: new (201), the same
// again (200), one whose fields are wrong (400, nothing stored), to a
// source nobody configured (400), and as a viewer (403).
func exerciseIngest(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	letter := `{"external_id": "celery-7f3a", "task": "billing.charge", "queue": "payments", "args": [42],
		"error_class": "ConnectionError", "error": "upstream reset the connection", "traceback": "Traceback ...",
		"attempts": 3, "max_attempts": 3, "failed_at": "2026-12-07T06:00:00Z",
		"history": [{"class": "ConnectionError", "message": "upstream reset the connection", "at": "2026-12-07T05:59:00Z"}]}`
	body := `{"source": "legacy", "letters": [` + letter + `]}`
	first := c.call(t, seen, c.operator, "POST", "/api/v1/letters", body, 201)
	again := c.call(t, seen, c.operator, "POST", "/api/v1/letters", body, 200)
	if first["created"] != float64(1) || again["existing"] != float64(1) {
		t.Errorf("sent twice: %v then %v; want one letter, created then existing", first, again)
	}
	c.call(t, seen, c.operator, "POST", "/api/v1/letters", `{"source": "legacy", "letters": [{"external_id": "x", "task": "bad task"}]}`, 400)
	c.call(t, seen, c.operator, "POST", "/api/v1/letters", `{"source": "nobody", "letters": [`+letter+`]}`, 400)
	c.call(t, seen, c.viewer, "POST", "/api/v1/letters", body, 403)

	// How its replay went, as legacy reports it: none yet (404); once a
	// replay was posted to legacy's endpoint (a row of the runner's queue,
	// written here), running, then succeeded, once (200), and never then
	// died_again (409); a state that is not one (400).
	letters, _ := first["letters"].([]any)
	id := int64(letters[0].(map[string]any)["id"].(float64))
	outcome := fmt.Sprintf("/api/v1/letters/%d/outcome", id)
	c.call(t, seen, c.operator, "POST", outcome, `{"state": "succeeded"}`, 404)
	if _, err := c.db.Exec(`INSERT INTO source_replays (dead_letter_id, source, external_id, state, run_at, sent_at)
		VALUES ($1, 'legacy', 'celery-7f3a', 'sent', now(), now())`, id); err != nil {
		t.Fatal(err)
	}
	c.call(t, seen, c.operator, "POST", outcome, `{"state": "running"}`, 200)
	done := c.call(t, seen, c.operator, "POST", outcome, `{"state": "succeeded"}`, 200)
	again = c.call(t, seen, c.operator, "POST", outcome, `{"state": "succeeded"}`, 200)
	if done["state"] != "succeeded" || done["repeated"] != false || again["repeated"] != true {
		t.Errorf("outcome reported: %v, then again %v", done, again)
	}
	c.call(t, seen, c.operator, "POST", outcome, `{"state": "died_again", "message": "late"}`, 409)
	c.call(t, seen, c.operator, "POST", outcome, `{"state": "finished"}`, 400)

	c.call(t, seen, c.viewer, "POST", outcome, `{"state": "succeeded"}`, 403)

	srcs := c.call(t, seen, c.viewer, "GET", "/api/v1/sources", "", 200)
	list, _ := srcs["sources"].([]any)
	if len(list) != 2 || list[1].(map[string]any)["name"] != "legacy" || list[1].(map[string]any)["letters"] != float64(1) ||
		list[1].(map[string]any)["can_replay"] != false {
		t.Errorf("sources: %v; want redrive, then legacy with its one letter, not replayable here", srcs)
	}
	c.call(t, seen, "", "GET", "/api/v1/sources", "", 401)

	// A Celery app's workers take their replays: none due (200), and a
	// source whose replays Redrive sends itself is refused (400).
	if _, err := c.db.Exec(`INSERT INTO sources (name, kind) VALUES ('shop', 'celery')`); err != nil {
		t.Fatal(err)
	}
	taken := c.call(t, seen, c.operator, "POST", "/api/v1/sources/shop/replays/take", `{"limit": 10}`, 200)
	if got, _ := taken["replays"].([]any); taken["replays"] == nil || len(got) != 0 {
		t.Errorf("replays taken with none due: %v", taken)
	}
	c.call(t, seen, c.operator, "POST", "/api/v1/sources/legacy/replays/take", `{}`, 400)
	c.call(t, seen, c.operator, "POST", "/api/v1/sources/shop/replays/take", `{"limit": 1000}`, 400)
	c.call(t, seen, c.operator, "POST", "/api/v1/sources/nobody/replays/take", `{}`, 404)
}

// waitForState polls the operation until it reaches state.
func waitForState(t *testing.T, c *apiConsole, id int64, state string) {
	t.Helper()
	storetest.WaitFor(t, 10*time.Second, fmt.Sprintf("operation %d to be %s", id, state), func() bool {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/operations/%d", c.url, id), nil)
		req.Header.Set("Authorization", "Bearer "+c.viewer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return bytes.Contains(raw, []byte(`"state":"`+state+`"`))
	})
}

// exerciseSchedules drives the schedule API (issue 32): the list with a
// run whose job died and a masked argument, a disable and an enable with
// a reason, a key sent twice, and each way of being refused.
func exerciseSchedules(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	ctx := context.Background()
	op, vic := c.operator, c.viewer
	store := storetest.NewStores(c.db.DB)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{{Name: "billing.nightly", Cron: "0 3 * * *",
		Timezone: "Europe/Berlin", Task: "billing.charge", Queue: "default", Args: []byte(`[]`),
		Kwargs: []byte(`{"password": "hunter2"}`), MaxAttempts: 1, NextRunAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Queue.EnqueueOccurrence(ctx, "billing.nightly", at, at.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	list := c.call(t, seen, vic, "GET", "/api/v1/schedules", "", 200)
	c.call(t, seen, "", "GET", "/api/v1/schedules", "", 401)
	s := list["schedules"].([]any)[0].(map[string]any)
	if s["name"] != "billing.nightly" || s["timezone"] != "Europe/Berlin" || len(s["runs"].([]any)) != 1 {
		t.Errorf("the schedule as listed: %v", s)
	}
	if kw := s["kwargs"].(map[string]any); kw["password"] == "hunter2" {
		t.Errorf("a schedule's secret argument is listed unmasked: %v", kw)
	}

	const path = "/api/v1/schedules/billing.nightly/"
	c.call(t, seen, vic, "POST", path+"disable", `{"reason": "viewers may not"}`, 403)
	c.call(t, seen, op, "POST", path+"disable", `{}`, 400)
	c.call(t, seen, op, "POST", path+"disable", `{"reason": "x", "why": "y"}`, 400)
	c.call(t, seen, op, "POST", "/api/v1/schedules/nope/disable", `{"reason": "gone"}`, 404)
	c.call(t, seen, op, "POST", path+"enable", `{"reason": "already on"}`, 409)
	off := c.callKey(t, seen, op, "sched-1", "POST", path+"disable", `{"reason": "the provider bills twice"}`, 200)
	if sc := off["schedule"].(map[string]any); sc["enabled"] != false || sc["changed_by"] != "olga" || off["audit_event_id"] == nil {
		t.Errorf("disabled: %v", off)
	}
	again := c.callKey(t, seen, op, "sched-1", "POST", path+"disable", `{"reason": "the provider bills twice"}`, 200)
	if again["repeated"] != true || again["audit_event_id"] != off["audit_event_id"] {
		t.Errorf("the same key and body again: %v, want the first answer repeated", again)
	}
	c.callKey(t, seen, op, "sched-1", "POST", path+"disable", `{"reason": "another"}`, 422)
	conflict := c.call(t, seen, op, "POST", path+"disable", `{"reason": "me too"}`, 409)
	if msg, _ := conflict["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already disabled") || !strings.Contains(msg, "olga") {
		t.Errorf("409 of a disabled schedule does not say who disabled it: %v", conflict)
	}
	on := c.call(t, seen, op, "POST", path+"enable", `{"reason": "fixed in 4.2"}`, 200)
	if sc := on["schedule"].(map[string]any); sc["enabled"] != true || sc["change_reason"] != "fixed in 4.2" {
		t.Errorf("enabled: %v", on)
	}
}

// exercisePauses drives the pause API (issue 14) through each of its
// answers: a task paused for a duration, a queue until a time of day and
// another until a timestamp, a key sent twice and reused, each way of
// being refused, and both ways of resuming, twice.
func exercisePauses(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	op, vic := c.operator, c.viewer
	id := func(m map[string]any) int64 { return int64(m["pause"].(map[string]any)["id"].(float64)) }
	fields := func(m map[string]any) map[string]any {
		f, _ := m["error"].(map[string]any)["fields"].(map[string]any)
		return f
	}

	c.call(t, seen, vic, "GET", "/api/v1/pauses", "", 200)
	c.call(t, seen, "", "GET", "/api/v1/pauses", "", 401)
	c.call(t, seen, vic, "GET", "/api/v1/pauses?recent=0", "", 400)

	task := `{"task": "billing.charge", "reason": "incident 7", "for": "1h"}`
	first := c.callKey(t, seen, op, "pause-1", "POST", "/api/v1/pauses", task, 201)
	if p := first["pause"].(map[string]any); p["kind"] != "task" || p["name"] != "billing.charge" || p["until"] == nil || first["repeated"] != false {
		t.Errorf("a task paused for 1h: %v", first)
	}
	again := c.callKey(t, seen, op, "pause-1", "POST", "/api/v1/pauses", task, 200)
	if id(again) != id(first) || again["repeated"] != true {
		t.Errorf("the same key and body again: %v, want pause %d repeated", again, id(first))
	}
	c.callKey(t, seen, op, "pause-1", "POST", "/api/v1/pauses", `{"task": "billing.charge", "reason": "another"}`, 422)
	conflict := c.call(t, seen, op, "POST", "/api/v1/pauses", `{"task": "billing.charge", "reason": "me too"}`, 409)
	if msg, _ := conflict["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already paused") || !strings.Contains(msg, "incident 7") {
		t.Errorf("409 of a paused task does not name the open pause: %v", conflict)
	}
	c.call(t, seen, vic, "POST", "/api/v1/pauses", `{"task": "email.send", "reason": "viewer"}`, 403)
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/pauses", `{"task": "email.send"}`, 400)); f["reason"] == nil {
		t.Errorf("no reason: fields %v, want reason", f)
	}
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "default", "task": "email.send", "reason": "r"}`, 400)); f["queue"] == nil {
		t.Errorf("queue and task: fields %v, want queue", f)
	}
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "default", "reason": "r", "until": "soon"}`, 400)); f["until"] == nil {
		t.Errorf("until soon: fields %v, want until", f)
	}
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "default", "reason": "r", "for": "-5m"}`, 400)); f["for"] == nil {
		t.Errorf("for -5m: fields %v, want for", f)
	}
	c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "default", "reason": "r", "colour": "red"}`, 400)

	byClock := c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "default", "reason": "deploy", "until": "23:59"}`, 201)
	at := time.Now().UTC().Add(2 * time.Hour).Format(time.RFC3339)
	byStamp := c.call(t, seen, op, "POST", "/api/v1/pauses", `{"queue": "reports", "reason": "deploy", "until": "`+at+`"}`, 201)
	list := c.call(t, seen, vic, "GET", "/api/v1/pauses?recent=10", "", 200)
	if open, _ := list["pauses"].([]any); len(open) != 3 {
		t.Errorf("open pauses: %v, want 3", list["pauses"])
	}

	// Resume by DELETE and by POST .../resume, each twice: the second is
	// a 409 saying how it ended (or, with the same key, the first answer).
	del := fmt.Sprintf("/api/v1/pauses/%d", id(first))
	ended := c.call(t, seen, op, "DELETE", del, `{"reason": "fixed"}`, 200)
	if p := ended["pause"].(map[string]any); p["resumed_by"] != "olga" || p["resumed_at"] == nil || p["expired"] != false {
		t.Errorf("resumed: %v", ended)
	}
	if msg, _ := c.call(t, seen, op, "DELETE", del, "", 409)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already ended") {
		t.Errorf("resumed twice: %q, want already ended", msg)
	}
	resume := fmt.Sprintf("/api/v1/pauses/%d/resume", id(byClock))
	c.callKey(t, seen, op, "resume-1", "POST", resume, "", 200)
	if again := c.callKey(t, seen, op, "resume-1", "POST", resume, "", 200); again["repeated"] != true {
		t.Errorf("the same resume key again: %v, want repeated", again)
	}
	c.call(t, seen, op, "POST", resume, `{}`, 409)
	c.call(t, seen, vic, "POST", fmt.Sprintf("/api/v1/pauses/%d/resume", id(byStamp)), "", 403)
	c.call(t, seen, vic, "DELETE", fmt.Sprintf("/api/v1/pauses/%d", id(byStamp)), "", 403)
	c.call(t, seen, op, "POST", "/api/v1/pauses/99999999/resume", "", 404)
	c.call(t, seen, op, "DELETE", "/api/v1/pauses/99999999", "", 404)
	c.call(t, seen, op, "DELETE", "/api/v1/pauses/x", "", 400)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/pauses/%d/resume", id(byStamp)), `{"reason": 5}`, 400)
	c.call(t, seen, op, "POST", fmt.Sprintf("/api/v1/pauses/%d/resume", id(byStamp)), `{"reason": "done"}`, 200)
}

// exerciseThrottles drives the throttle API (issue 32) through each of
// its answers: a task throttled, the same key again and reused, a second
// throttle of it, a change, lifts by DELETE and by POST .../lift, and each
// way of being refused.
func exerciseThrottles(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	op, vic := c.operator, c.viewer
	id := func(m map[string]any) int64 { return int64(m["throttle"].(map[string]any)["id"].(float64)) }
	fields := func(m map[string]any) map[string]any {
		f, _ := m["error"].(map[string]any)["fields"].(map[string]any)
		return f
	}
	c.call(t, seen, vic, "GET", "/api/v1/throttles", "", 200)
	c.call(t, seen, "", "GET", "/api/v1/throttles", "", 401)
	c.call(t, seen, vic, "GET", "/api/v1/throttles?recent=501", "", 400)

	task := `{"task": "billing.charge", "max_running": 3, "reason": "provider rate-limits us", "for": "1h"}`
	first := c.callKey(t, seen, op, "throttle-1", "POST", "/api/v1/throttles", task, 201)
	if th := first["throttle"].(map[string]any); th["kind"] != "task" || th["max_running"] != 3.0 || th["max_per_second"] != nil || th["until"] == nil {
		t.Errorf("a task throttled to 3 for 1h: %v", first)
	}
	if again := c.callKey(t, seen, op, "throttle-1", "POST", "/api/v1/throttles", task, 200); again["repeated"] != true || id(again) != id(first) {
		t.Errorf("the same key and body again: %v, want throttle %d repeated", again, id(first))
	}
	c.callKey(t, seen, op, "throttle-1", "POST", "/api/v1/throttles", `{"task": "billing.charge", "max_running": 4, "reason": "r"}`, 422)
	conflict := c.call(t, seen, op, "POST", "/api/v1/throttles", `{"task": "billing.charge", "max_per_second": 1, "reason": "me too"}`, 409)
	if msg, _ := conflict["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already throttled") {
		t.Errorf("409 of a throttled task does not name the open throttle: %v", conflict)
	}
	c.call(t, seen, vic, "POST", "/api/v1/throttles", `{"task": "email.send", "max_running": 1, "reason": "viewer"}`, 403)
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/throttles", `{"task": "email.send", "reason": "no limit"}`, 400)); f["max_running"] == nil {
		t.Errorf("a throttle without a limit: fields %v", f)
	}
	if f := fields(c.call(t, seen, op, "POST", "/api/v1/throttles", `{"queue": "default", "max_per_second": 0, "reason": "r"}`, 400)); f["max_per_second"] == nil {
		t.Errorf("a rate of 0: fields %v", f)
	}
	c.call(t, seen, op, "POST", "/api/v1/throttles", `{"queue": "default", "max_running": 2, "reason": "r", "colour": "red"}`, 400)
	byRate := c.call(t, seen, op, "POST", "/api/v1/throttles", `{"queue": "default", "max_per_second": 2.5, "reason": "deploy"}`, 201)
	if list := c.call(t, seen, vic, "GET", "/api/v1/throttles?recent=10", "", 200); len(list["throttles"].([]any)) != 2 {
		t.Errorf("open throttles: %v, want 2", list["throttles"])
	}

	// A change gives the limits again; the queue or task stays.
	path := fmt.Sprintf("/api/v1/throttles/%d", id(first))
	changed := c.call(t, seen, op, "PATCH", path, `{"max_running": 1, "max_per_second": 0.5, "reason": "slower"}`, 200)
	if th := changed["throttle"].(map[string]any); th["max_running"] != 1.0 || th["max_per_second"] != 0.5 || th["changed_by"] != "olga" {
		t.Errorf("changed: %v", changed)
	}
	if f := fields(c.call(t, seen, op, "PATCH", path, `{"task": "email.send", "max_running": 1, "reason": "r"}`, 400)); f["task"] == nil {
		t.Errorf("a change of the task: fields %v", f)
	}
	c.call(t, seen, vic, "PATCH", path, `{"max_running": 9, "reason": "viewer"}`, 403)
	c.call(t, seen, op, "PATCH", "/api/v1/throttles/99999999", `{"max_running": 1, "reason": "r"}`, 404)

	ended := c.call(t, seen, op, "DELETE", path, `{"reason": "fixed"}`, 200)
	if th := ended["throttle"].(map[string]any); th["lifted_by"] != "olga" || th["lifted_at"] == nil || th["expired"] != false {
		t.Errorf("lifted: %v", ended)
	}
	if msg, _ := c.call(t, seen, op, "DELETE", path, "", 409)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already ended") {
		t.Errorf("lifted twice: %q, want already ended", msg)
	}
	c.call(t, seen, op, "PATCH", path, `{"max_running": 1, "reason": "r"}`, 409)
	c.call(t, seen, op, "DELETE", "/api/v1/throttles/99999999", "", 404)
	lift := fmt.Sprintf("/api/v1/throttles/%d/lift", id(byRate))
	c.call(t, seen, vic, "POST", lift, "", 403)
	c.call(t, seen, op, "POST", lift, `{"reason": 5}`, 400)
	c.call(t, seen, op, "POST", lift, "", 200)
	c.call(t, seen, op, "POST", lift, "", 409)
}

// exerciseJobActions drives the actions on live jobs (issue 14) through
// each of their answers: run now and kill of a retrying job and cancel of
// a running one, a key sent twice and reused, a job that changed since it
// was seen, each way of being refused, and both bulk actions by ids and by
// filter. The killed job's letter and history are read back, so their
// reason and outcome (killed) are checked against the document too.
func exerciseJobActions(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	op, vic := c.operator, c.viewer
	// waiting inserts a job that failed once and retries in an hour.
	waiting := func(queue string) int64 {
		var id int64
		err := c.db.Get(&id, `INSERT INTO jobs (task, queue, state, attempt, run_at, last_error, errors)
			VALUES ('billing.charge', $1, 'retrying', 1, now() + interval '1 hour', 'CardError: declined',
				'[{"attempt":1,"at":"2026-01-01T00:00:00Z","class":"CardError","message":"declined","outcome":"retry"}]')
			RETURNING id`, queue)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// running inserts a job on its first attempt, held by a worker that
	// never comes (there is none in this console), so it stays running.
	running := func() int64 {
		var id int64
		err := c.db.Get(&id, `INSERT INTO jobs (task, queue, state, attempt, run_at, attempted_at, lease_owner, lease_expires_at)
			VALUES ('email.send', 'default', 'running', 1, now(), now(), 'pod-7', now() + interval '1 hour') RETURNING id`)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	jobPath := func(id int64, action string) string { return fmt.Sprintf("/api/v1/jobs/%d/%s", id, action) }
	errOf := func(m map[string]any) (string, map[string]any) {
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		f, _ := e["fields"].(map[string]any)
		return msg, f
	}
	soon, doomed, held, later := waiting("default"), waiting("default"), running(), waiting("reports")

	// Run now.
	seenRetrying := `{"seen_state": "retrying", "seen_attempt": 1}`
	first := c.callKey(t, seen, op, "run-now-1", "POST", jobPath(soon, "run-now"), seenRetrying, 200)
	if first["state"] != "retrying" || first["repeated"] != false || first["dead_letter_id"] != nil {
		t.Errorf("run now: %v", first)
	}
	if again := c.callKey(t, seen, op, "run-now-1", "POST", jobPath(soon, "run-now"), seenRetrying, 200); again["repeated"] != true ||
		again["audit_event_id"] != first["audit_event_id"] {
		t.Errorf("run now with the same key: %v, want the first answer repeated", again)
	}
	c.callKey(t, seen, op, "run-now-1", "POST", jobPath(soon, "run-now"), `{"reason": "another"}`, 422)
	if msg, _ := errOf(c.call(t, seen, op, "POST", jobPath(soon, "run-now"), "", 409)); !strings.Contains(msg, "already due") {
		t.Errorf("run now of a due job: %q, want already due", msg)
	}
	if _, f := errOf(c.call(t, seen, op, "POST", jobPath(later, "run-now"), `{"retry": true}`, 400)); f["retry"] == nil {
		t.Errorf("run now with retry: fields %v, want retry", f)
	}
	c.call(t, seen, vic, "POST", jobPath(later, "run-now"), "", 403)
	c.call(t, seen, op, "POST", "/api/v1/jobs/abc/run-now", "", 400)
	c.call(t, seen, op, "POST", jobPath(99999999, "run-now"), "", 404)

	// Kill, then read the letter and the job back.
	if _, f := errOf(c.call(t, seen, op, "POST", jobPath(doomed, "kill"), `{}`, 400)); f["reason"] == nil {
		t.Errorf("kill without a reason: fields %v, want reason", f)
	}
	c.call(t, seen, op, "POST", jobPath(doomed, "kill"), `{"reason": "poison", "colour": "red"}`, 400)
	killed := c.call(t, seen, op, "POST", jobPath(doomed, "kill"), `{"reason": "poison", "seen_state": "retrying", "seen_attempt": 1}`, 200)
	if killed["state"] != "dead" || killed["dead_letter_id"] == nil {
		t.Fatalf("kill: %v", killed)
	}
	if msg, _ := errOf(c.call(t, seen, op, "POST", jobPath(doomed, "kill"), `{"reason": "again", "seen_state": "retrying"}`, 409)); !strings.Contains(msg, "the job changed") {
		t.Errorf("kill of a job that changed: %q, want the job changed", msg)
	}
	letter := c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", int64(killed["dead_letter_id"].(float64))), "", 200)
	if letter["reason"] != "killed" {
		t.Errorf("the killed job's letter: reason %v, want killed", letter["reason"])
	}
	c.call(t, seen, vic, "GET", fmt.Sprintf("/api/v1/jobs/%d", doomed), "", 200)
	c.call(t, seen, vic, "POST", jobPath(later, "kill"), `{"reason": "viewer"}`, 403)
	c.call(t, seen, op, "POST", jobPath(99999999, "kill"), `{"reason": "gone"}`, 404)

	// Cancel: the job stays running until its worker hears of it.
	cancelled := c.call(t, seen, op, "POST", jobPath(held, "cancel"), `{"reason": "stuck", "retry": true, "seen_state": "running", "seen_attempt": 1}`, 200)
	if cancelled["state"] != "running" || cancelled["repeated"] != false {
		t.Errorf("cancel: %v", cancelled)
	}
	if msg, _ := errOf(c.call(t, seen, op, "POST", jobPath(later, "cancel"), "", 409)); !strings.Contains(msg, "not running") {
		t.Errorf("cancel of a waiting job: %q, want not running", msg)
	}
	if _, f := errOf(c.call(t, seen, op, "POST", jobPath(held, "cancel"), `{"seen_state": "sleeping"}`, 400)); f["seen_state"] == nil {
		t.Errorf("cancel seen sleeping: fields %v, want seen_state", f)
	}
	c.call(t, seen, vic, "POST", jobPath(held, "cancel"), "", 403)
	c.call(t, seen, op, "POST", jobPath(99999999, "cancel"), "", 404)

	// In bulk: run now by ids (with a key), kill by filter.
	ids := fmt.Sprintf(`{"ids": [%d, %d, 99999999]}`, later, doomed)
	bulk := c.callKey(t, seen, op, "bulk-run-1", "POST", "/api/v1/jobs/run-now", ids, 200)
	if bulk["action"] != "run_now" || bulk["matched"] != 1.0 || bulk["changed"] != 1.0 || bulk["repeated"] != false {
		t.Errorf("bulk run now of one waiting job, one dead and one missing: %v", bulk)
	}
	if again := c.callKey(t, seen, op, "bulk-run-1", "POST", "/api/v1/jobs/run-now", ids, 200); again["repeated"] != true {
		t.Errorf("bulk run now with the same key: %v, want repeated", again)
	}
	c.callKey(t, seen, op, "bulk-run-1", "POST", "/api/v1/jobs/run-now", fmt.Sprintf(`{"ids": [%d]}`, later), 422)
	if _, f := errOf(c.call(t, seen, op, "POST", "/api/v1/jobs/run-now", `{"ids": [1], "filter": {}}`, 400)); f["selection"] == nil {
		t.Errorf("ids and filter: fields %v, want selection", f)
	}
	c.call(t, seen, op, "POST", "/api/v1/jobs/run-now", "", 400)
	c.call(t, seen, vic, "POST", "/api/v1/jobs/run-now", `{"ids": [1]}`, 403)

	swept := c.call(t, seen, op, "POST", "/api/v1/jobs/kill", fmt.Sprintf(`{"filter": {"queue": "default", "state": "retrying"}, "reason": "bad batch", "max_id": %d}`, later), 200)
	if swept["action"] != "kill" || swept["changed"] != 1.0 {
		t.Errorf("bulk kill of the default queue's retrying jobs (only %d is left): %v", soon, swept)
	}
	if _, f := errOf(c.call(t, seen, op, "POST", "/api/v1/jobs/kill", fmt.Sprintf(`{"ids": [%d]}`, later), 400)); f["reason"] == nil {
		t.Errorf("bulk kill without a reason: fields %v, want reason", f)
	}
	if _, f := errOf(c.call(t, seen, op, "POST", "/api/v1/jobs/kill", `{"filter": {"state": "sleeping"}, "reason": "r"}`, 400)); f["state"] == nil {
		t.Errorf("bulk kill of state sleeping: fields %v, want state", f)
	}
	c.call(t, seen, vic, "POST", "/api/v1/jobs/kill", `{"ids": [1], "reason": "viewer"}`, 403)
}

// exerciseGroupEdits drives the merge, split and unmerge of error groups
// (issue 27) through each of their answers: each done, repeated (the same
// answer), refused for its input, its role, an unknown group and a group
// merged away.
func exerciseGroupEdits(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	ctx := context.Background()
	op, vic := c.operator, c.viewer
	store := storetest.NewStores(c.db.DB)
	// file dead-letters a job as a worker does: grouped, filed under the
	// group its id means now.
	file := func(task, carrier string) string {
		msg := "shipment rejected by carrier " + carrier + ": address not verified"
		if _, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: "edit", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		jobs, err := store.Queue.Claim(ctx, "w1", []string{"edit"}, 1, time.Minute)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claimed %d jobs: %v", len(jobs), err)
		}
		res, err := store.Queue.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: task,
			Reason: dlq.ReasonPermanent, Attempt: dlq.Attempt{Attempt: 1, At: time.Now(), Class: "CarrierError", Message: msg, Outcome: dlq.OutcomeDead}}})
		if err != nil || len(res) != 1 {
			t.Fatalf("dead-lettered %v: %v", res, err)
		}
		var fp string
		if err := c.db.Get(&fp, `SELECT fingerprint FROM dead_letter_records WHERE id = $1`, res[0].LetterID); err != nil {
			t.Fatal(err)
		}
		return fp
	}
	dhl, ups := file("billing.charge", "dhl"), file("billing.charge", "ups")
	merge, unmerge := "/api/v1/groups/"+dhl+"/merge", "/api/v1/groups/"+dhl+"/unmerge"
	body := `{"groups": ["` + ups + `"], "reason": "one outage"}`
	first := c.call(t, seen, op, "POST", merge, body, 200)
	if first["survivor"] != dhl || !strings.Contains(first["template"].(string), "carrier <*>") {
		t.Errorf("merge: %v, want %s surviving with the carrier a variable", first, dhl)
	}
	if again := c.call(t, seen, op, "POST", merge, body, 200); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Errorf("merge repeated: %v, want %v", again, first)
	}
	c.call(t, seen, vic, "POST", merge, body, 403)
	c.call(t, seen, op, "POST", merge, `{"groups": ["`+ups+`"]}`, 400)
	c.call(t, seen, op, "POST", merge, `{"groups": ["`+dhl+`"], "reason": "r"}`, 400)
	c.call(t, seen, op, "POST", "/api/v1/groups/0123456789abcdef/merge", body, 404)

	c.call(t, seen, op, "POST", "/api/v1/groups/"+ups+"/unmerge", `{"group": "`+dhl+`", "reason": "r"}`, 409)
	c.call(t, seen, op, "POST", unmerge, `{"group": "`+dhl+`", "reason": "r"}`, 400)
	c.call(t, seen, op, "POST", "/api/v1/groups/0123456789abcdef/unmerge", `{"group": "`+ups+`", "reason": "r"}`, 404)
	c.call(t, seen, vic, "POST", unmerge, `{"group": "`+ups+`", "reason": "r"}`, 403)
	apart := c.call(t, seen, op, "POST", unmerge, `{"group": "`+ups+`", "reason": "two outages"}`, 200)
	if apart["group"] != ups || apart["survivor"] != dhl {
		t.Errorf("unmerge: %v", apart)
	}
	c.call(t, seen, op, "POST", unmerge, `{"group": "`+ups+`", "reason": "two outages"}`, 200)

	// Three carriers in one task are one group with a variable, which a
	// split divides.
	var group string
	for _, carrier := range []string{"dhl", "ups", "fedex"} {
		group = file("email.send", carrier)
	}
	if _, err := store.Groups.SweepMergedGroups(ctx); err != nil {
		t.Fatal(err)
	}
	tpl, err := store.Groups.GroupTemplate(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	split := "/api/v1/groups/" + group + "/split"
	pos := slices.Index(tpl.Tokens, "<*>")
	req := fmt.Sprintf(`{"position": %d, "reason": "three carriers"}`, pos)
	parts := c.call(t, seen, op, "POST", split, req, 200)
	if p, _ := parts["parts"].([]any); len(p) != 3 {
		t.Errorf("split: %v, want three parts", parts)
	}
	if again := c.call(t, seen, op, "POST", split, req, 200); fmt.Sprint(again) != fmt.Sprint(parts) {
		t.Errorf("split repeated: %v, want %v", again, parts)
	}
	c.call(t, seen, op, "POST", split, `{"reason": "which part?"}`, 400)
	c.call(t, seen, op, "POST", split, `{"position": 0, "reason": "not a variable"}`, 400)
	c.call(t, seen, vic, "POST", split, req, 403)
	c.call(t, seen, op, "POST", "/api/v1/groups/0123456789abcdef/split", req, 404)
	c.call(t, seen, op, "POST", "/api/v1/groups/"+ups+"/merge", `{"groups": ["`+dhl+`"], "reason": "again"}`, 200)
	c.call(t, seen, op, "POST", "/api/v1/groups/"+ups+"/split", req, 409)
}

// exerciseTasks reads the tasks' timings: a task with summaries, one
// without (zeros, null percentiles), and a name no task can have.
func exerciseTasks(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	c.db.MustExec(`INSERT INTO task_timings (task, span, start_at, runs, failures, dead, wait, run) VALUES
		('billing.charge', 'minute', date_trunc('minute', now()), 4, 1, 1, '{0,2,2}', '{0,0,0,0,0,4}'),
		('billing.charge', 'hour', date_trunc('hour', now()), 4, 1, 1, '{0,2,2}', '{0,0,0,0,0,4}')`)
	list := c.call(t, seen, c.viewer, "GET", "/api/v1/tasks", "", 200)
	tasks, _ := list["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["task"] != "billing.charge" {
		t.Fatalf("tasks: %v; want billing.charge", list)
	}
	one := c.call(t, seen, c.viewer, "GET", "/api/v1/tasks/billing.charge", "", 200)
	for _, w := range one["windows"].([]any) {
		w := w.(map[string]any)
		if w["runs"] != 4.0 || w["failures"] != 1.0 || w["dead_letters"] != 1.0 || w["run_ms"] == nil {
			t.Errorf("billing.charge over %v: %v; want 4 runs, 1 failure, 1 dead letter and its run times", w["window"], w)
		}
	}
	none := c.call(t, seen, c.viewer, "GET", "/api/v1/tasks/never.ran", "", 200)
	if w := none["windows"].([]any)[0].(map[string]any); w["runs"] != 0.0 || w["wait_ms"] != nil {
		t.Errorf("a task that never ran: %v; want zeros and null percentiles", none)
	}
	c.call(t, seen, c.viewer, "GET", "/api/v1/tasks/not%20a%20task", "", 400)
	c.call(t, seen, "", "GET", "/api/v1/tasks", "", 401)
}

// exerciseRetention reads the next purge's forecast and the holds, and
// confirms a hold: once (200), again (404), as a viewer (403).
func exerciseRetention(t *testing.T, c *apiConsole, seen map[string][]int) {
	t.Helper()
	c.db.MustExec(`INSERT INTO purge_holds (fingerprint, task, letters, settled_before, held_at)
		VALUES ('f-growing', 'billing.charge', 0, now() - interval '30 days', now())`)
	r := c.call(t, seen, c.viewer, "GET", "/api/v1/retention", "", 200)
	if r["retain_letters"] != "720h0m0s" || r["next_purge"] == nil || len(r["holds"].([]any)) != 1 {
		t.Errorf("retention: %v; want 30 days, the next purge and the hold", r)
	}
	c.call(t, seen, c.viewer, "POST", "/api/v1/retention/holds/f-growing/confirm", "", 403)
	if done := c.call(t, seen, c.operator, "POST", "/api/v1/retention/holds/f-growing/confirm", "", 200); done["purged"] != 0.0 {
		t.Errorf("confirmed: %v", done)
	}
	c.call(t, seen, c.operator, "POST", "/api/v1/retention/holds/f-growing/confirm", "", 404)
	c.call(t, seen, "", "GET", "/api/v1/retention", "", 401)
}

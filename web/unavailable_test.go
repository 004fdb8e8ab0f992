package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// TestDatabaseOutageAnswers503 stops the database under a running console:
// every page and API call answers 503 database_unavailable with Retry-After
// and says so in words, and the console recovers by itself once the
// database is back.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPrivate(t)
	store := storetest.NewStores(pg.DB.DB)
	ctx := context.Background()
	if err := store.Queue.RegisterTasks(ctx, []string{"outage.task"}); err != nil {
		t.Fatal(err)
	}
	webtest.CreateUser(t, store.Access, "op", dlq.RoleOperator)
	token := webtest.Token(t, store.Access, "op")
	h, err := web.NewServer(web.Config{DB: store.DB})
	if err != nil {
		t.Fatal(err)
	}
	session := webtest.SignIn(t, h, "op", webtest.Password)
	batch := `{"jobs":[{"task":"outage.task","idempotency_key":"k1"},{"task":"outage.task"}]}`
	api := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	page := func(path string) *httptest.ResponseRecorder {
		return session.Do(h, httptest.NewRequest(http.MethodGet, path, nil))
	}

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/dead-letters", "/jobs", "/groups", "/workers", "/audit"} {
		rec := page(path)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
			!strings.Contains(rec.Body.String(), "database is unreachable") {
			t.Errorf("GET %s during an outage: %d Retry-After=%q, want 503 with Retry-After and words:\n%.600s",
				path, rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
		}
	}
	// The page keeps its header, naming who the session says is signed in
	// as unconfirmed (and offering no action to them), and the banner; htmx
	// gets the error alone, coded, for the banner of the page it refreshes.
	if body := page("/jobs").Body.String(); !strings.Contains(body, `data-testid="current-user"`) ||
		!strings.Contains(body, "op (operator) · unconfirmed") || !strings.Contains(body, `data-outage-retry="5"`) ||
		!strings.Contains(body, `aria-label="Main"`) || strings.Contains(body, `action="/logout"`) {
		t.Errorf("GET /jobs during an outage lost the header or the banner:\n%.1500s", body)
	}
	hx := httptest.NewRequest(http.MethodGet, handlers.OverviewRefreshURL, nil)
	hx.Header.Set("HX-Request", "true")
	if rec := session.Do(h, hx); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), `data-code="database_unavailable"`) || strings.Contains(rec.Body.String(), "<html") {
		t.Errorf("htmx refresh during an outage: %d, want 503 with the coded error alone:\n%.600s", rec.Code, rec.Body.String())
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/jobs/batch", batch},
		{http.MethodPost, "/api/v1/jobs", `{"task":"outage.task"}`},
		{http.MethodGet, "/api/v1/dead-letters", ""},
		{http.MethodGet, "/api/v1/jobs/1", ""},
		{http.MethodPost, "/api/v1/dead-letters/1/replay", `{}`},
		{http.MethodGet, "/api/v1/pauses", ""},
		{http.MethodPost, "/api/v1/pauses", `{"task":"outage.task","reason":"outage","for":"1h"}`},
		{http.MethodDelete, "/api/v1/pauses/1", ""},
		{http.MethodPost, "/api/v1/pauses/1/resume", `{"reason":"over"}`},
		{http.MethodPost, "/api/v1/jobs/1/run-now", ""},
		{http.MethodPost, "/api/v1/jobs/1/kill", `{"reason":"outage"}`},
		{http.MethodPost, "/api/v1/jobs/1/cancel", `{}`},
		{http.MethodPost, "/api/v1/jobs/run-now", `{"ids":[1]}`},
		{http.MethodPost, "/api/v1/jobs/kill", `{"filter":{"queue":"default"},"reason":"outage"}`},
	} {
		rec := api(c.method, c.path, c.body)
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusServiceUnavailable || body.Error.Code != "database_unavailable" ||
			rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s during an outage: %d %s, want 503 database_unavailable with Retry-After",
				c.method, c.path, rec.Code, rec.Body.String())
		}
	}
	if rec := api(http.MethodGet, "/readyz", ""); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "database unreachable") {
		t.Errorf("/readyz during an outage: %d %s", rec.Code, rec.Body.String())
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pg.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	// No restart of the console: its pool replaces the broken connections.
	if rec := api(http.MethodPost, "/api/v1/jobs/batch", batch); rec.Code >= 300 {
		t.Errorf("batch enqueue after the outage: %d %s", rec.Code, rec.Body.String())
	}
	if rec := page("/dead-letters"); rec.Code != http.StatusOK {
		t.Errorf("page after the outage: %d", rec.Code)
	}
}

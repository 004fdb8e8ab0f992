package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/web/webtest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// clock is a settable test clock for sessions and throttling.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is the real console on a fresh database, with a settable clock.
type env struct {
	h     http.Handler
	db    *storetest.DB
	store *storetest.Stores
	clock *clock
}

func newEnv(t *testing.T, opts ...func(*web.Config)) env {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	clk := &clock{t: time.Now()}
	cfg := web.Config{DB: store.DB, Auth: auth.Config{Now: clk.Now}}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := web.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env{h: h, db: db, store: store, clock: clk}
}

// do sends an anonymous request.
func (e env) do(method, path string, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		ct := "application/x-www-form-urlencoded"
		if strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// as signs in a new user with role and returns the session.
func (e env) as(t *testing.T, name string, role dlq.Role) *webtest.Session {
	t.Helper()
	webtest.CreateUser(t, e.store.Access, name, role)
	return webtest.SignIn(t, e.h, name, webtest.Password)
}

// request builds a request with a form or JSON body.
func request(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	switch {
	case strings.HasPrefix(body, "{"):
		req.Header.Set("Content-Type", "application/json")
	case body != "":
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func (e env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// state is everything a refused request must leave as it was.
func (e env) state(t *testing.T) string {
	t.Helper()
	var s string
	err := e.db.GetContext(context.Background(), &s, `SELECT concat_ws(' ',
		(SELECT count(*) FROM jobs), (SELECT count(*) FROM audit_events), (SELECT count(*) FROM operations),
		(SELECT count(*) FROM dead_letters WHERE replayed_at IS NOT NULL), (SELECT count(*) FROM dead_letters WHERE discarded_at IS NOT NULL),
		(SELECT count(*) FROM users), (SELECT count(*) FROM users WHERE disabled_at IS NOT NULL),
		(SELECT coalesce(sum(session_epoch), 0) FROM users), (SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL))`)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// route is one thing the console answers, with the least role it needs
// ("" for none).
type route struct {
	method, path, body string
	need               dlq.Role
}

func (r route) api() bool { return strings.HasPrefix(r.path, "/api/") }

// letters are the fixtures every role's run acts on: a pending letter to
// replay and reveal, one to discard, a discarded one to restore.
type letters struct{ pending, discard, discarded int64 }

func routeTable(l letters) []route {
	id := func(n int64) string { return fmt.Sprint(n) }
	return []route{
		{"GET", "/healthz", "", ""},
		{"GET", "/login", "", ""},
		{"GET", "/", "", dlq.RoleViewer},
		{"GET", "/dead-letters", "", dlq.RoleViewer},
		{"GET", "/dead-letters/" + id(l.pending), "", dlq.RoleViewer},
		{"GET", "/dead-letters/export.csv", "", dlq.RoleViewer},
		{"GET", "/dead-letters/export.json", "", dlq.RoleViewer},
		{"GET", "/groups", "", dlq.RoleViewer},
		{"GET", "/jobs", "", dlq.RoleViewer},
		{"GET", "/workers", "", dlq.RoleViewer},
		{"GET", "/audit", "", dlq.RoleViewer},
		{"GET", "/no-such-page", "", dlq.RoleViewer},
		{"GET", "/api/v1/dead-letters", "", dlq.RoleViewer},
		{"GET", "/api/v1/dead-letters/" + id(l.pending), "", dlq.RoleViewer},
		{"GET", "/api/v1/groups", "", dlq.RoleViewer},
		{"GET", "/api/v1/audit", "", dlq.RoleViewer},
		{"POST", "/dead-letters/" + id(l.pending) + "/reveal", "", dlq.RoleOperator},
		{"POST", "/api/v1/dead-letters/" + id(l.pending) + "/reveal", "", dlq.RoleOperator},
		{"POST", "/dead-letters/" + id(l.pending) + "/replay", form("reason", "fixed"), dlq.RoleOperator},
		{"POST", "/dead-letters/" + id(l.discard) + "/discard", form("reason", "noise"), dlq.RoleOperator},
		{"POST", "/dead-letters/" + id(l.discarded) + "/restore", form("reason", "oops"), dlq.RoleOperator},
		{"POST", "/dead-letters/bulk", form("id", id(l.pending), "kind", "replay"), dlq.RoleOperator},
		{"POST", "/dead-letters/bulk/confirm", form("kind", "discard", "reason", "x"), dlq.RoleOperator},
		{"POST", "/operations/1/cancel", "", dlq.RoleOperator},
		{"POST", "/operations/1/release", "", dlq.RoleOperator},
		{"POST", "/api/v1/dead-letters/" + id(l.pending) + "/replay", `{"reason":"fixed"}`, dlq.RoleOperator},
		{"POST", "/api/v1/dead-letters/" + id(l.discard) + "/discard", `{"reason":"noise"}`, dlq.RoleOperator},
		{"POST", "/api/v1/dead-letters/" + id(l.discarded) + "/restore", `{"reason":"oops"}`, dlq.RoleOperator},
		{"POST", "/api/v1/dead-letters/discard", `{"ids":[` + id(l.discard) + `],"reason":"noise","wait_seconds":0}`, dlq.RoleOperator},
		{"POST", "/api/v1/operations/1/cancel", "", dlq.RoleOperator},
		{"POST", "/api/v1/jobs", `{"task":"billing.charge"}`, dlq.RoleOperator},
		{"GET", "/admin", "", dlq.RoleAdmin},
		{"GET", "/admin/users", "", dlq.RoleAdmin},
		{"POST", "/admin/users", form("name", "newcomer", "role", "viewer", "password", "a long enough password"), dlq.RoleAdmin},
		{"POST", "/admin/users/victim/password", form("password", "another long password"), dlq.RoleAdmin},
		{"POST", "/admin/users/victim/role", form("role", "operator"), dlq.RoleAdmin},
		{"POST", "/admin/users/victim/disable", "", dlq.RoleAdmin},
		{"POST", "/admin/users/victim/enable", "", dlq.RoleAdmin},
		{"POST", "/admin/tokens", form("user", "victim", "label", "made-in-test"), dlq.RoleAdmin},
		{"POST", "/admin/tokens/1/revoke", "", dlq.RoleAdmin},
	}
}

func rank(r dlq.Role) int {
	switch r {
	case dlq.RoleViewer:
		return 1
	case dlq.RoleOperator:
		return 2
	case dlq.RoleAdmin:
		return 3
	}
	return 0
}

// TestEveryRoleAgainstEveryRoute sends every route as nobody, a viewer, an
// operator, an admin, a user disabled during their session, and through
// API tokens of each role: who may not is refused (401 or a sign-in
// redirect for nobody, 403 for too small a role), and a refused request
// changes nothing at all.
func TestEveryRoleAgainstEveryRoute(t *testing.T) {
	t.Parallel()
	type who struct {
		name  string
		role  dlq.Role // "" for anonymous and the disabled user
		login func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder
	}
	session := func(role dlq.Role, disable bool) func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder {
		return func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder {
			s := e.as(t, "me", role)
			if disable {
				if _, err := e.store.Access.DisableUser(context.Background(), "me", dlq.UserChange{Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			return func(r *http.Request) *httptest.ResponseRecorder { return s.Do(e.h, r) }
		}
	}
	token := func(role dlq.Role) func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder {
		return func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder {
			webtest.CreateUser(t, e.store.Access, "bot", role)
			tok := webtest.Token(t, e.store.Access, "bot")
			return func(r *http.Request) *httptest.ResponseRecorder {
				r.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, r)
				return rec
			}
		}
	}
	anonymous := func(t *testing.T, e env) func(*http.Request) *httptest.ResponseRecorder {
		return func(r *http.Request) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, r)
			return rec
		}
	}
	whos := []who{
		{"Anonymous", "", anonymous},
		{"Viewer", dlq.RoleViewer, session(dlq.RoleViewer, false)},
		{"Operator", dlq.RoleOperator, session(dlq.RoleOperator, false)},
		{"Admin", dlq.RoleAdmin, session(dlq.RoleAdmin, false)},
		{"DisabledUser", "", session(dlq.RoleAdmin, true)},
		{"ViewerToken", dlq.RoleViewer, token(dlq.RoleViewer)},
		{"OperatorToken", dlq.RoleOperator, token(dlq.RoleOperator)},
	}
	for _, w := range whos {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			if err := e.store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
				t.Fatal(err)
			}
			// The admin routes act on victim; the last admin is never it.
			webtest.CreateUser(t, e.store.Access, "victim", dlq.RoleViewer)
			webtest.CreateUser(t, e.store.Access, "keeper", dlq.RoleAdmin)
			l := letters{
				pending:   storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Kwargs: `{"password":"hunter2"}`}),
				discard:   storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{}),
				discarded: storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Status: "discarded"}),
			}
			send := w.login(t, e)
			for _, r := range routeTable(l) {
				before := e.state(t)
				rec := send(request(r.method, r.path, r.body))
				allowed := rank(w.role) >= rank(r.need)
				name := r.method + " " + r.path
				switch {
				case allowed:
					if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden || rec.Code >= 500 {
						t.Errorf("%s: %d, want it allowed\n%.300s", name, rec.Code, rec.Body.String())
					}
					continue
				case w.role == "" && !r.api() && r.method == http.MethodGet:
					if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/login") {
						t.Errorf("%s: %d %q, want a redirect to /login", name, rec.Code, rec.Header().Get("Location"))
					}
				case w.role == "":
					if rec.Code != http.StatusUnauthorized {
						t.Errorf("%s: %d, want 401", name, rec.Code)
					}
				default:
					if rec.Code != http.StatusForbidden {
						t.Errorf("%s: %d, want 403", name, rec.Code)
					}
				}
				if r.api() && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
					t.Errorf("%s: refused with %q, want JSON", name, rec.Header().Get("Content-Type"))
				}
				if after := e.state(t); after != before {
					t.Errorf("%s: refused, yet the database changed: %s → %s", name, before, after)
				}
			}
		})
	}
}

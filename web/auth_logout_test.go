package web_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web/webtest"
)

// TestLogoutEndsSessionOnServer: a copy of the session cookie taken before
// "Sign out" is signed out at its next request; the user's other sessions
// go on. "Sign out everywhere", on one's own menu or by an admin, ends all
// of a user's sessions.
func TestLogoutEndsSessionOnServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "lea", dlq.RoleViewer)
	signedIn := func(s *webtest.Session) bool {
		return s.Do(e.h, httptest.NewRequest("GET", "/", nil)).Code == http.StatusOK
	}
	s := webtest.SignIn(t, e.h, "lea", webtest.Password)
	elsewhere := webtest.SignIn(t, e.h, "lea", webtest.Password)
	stolen := &webtest.Session{Cookies: maps.Clone(s.Cookies), CSRF: s.CSRF}
	if rec := s.Do(e.h, request("POST", "/logout", "")); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", rec.Code)
	}
	if signedIn(stolen) {
		t.Error("a copy of the session cookie still works after signing out")
	}
	if !signedIn(elsewhere) {
		t.Error("signing out in one browser ended the session in another")
	}

	t.Run("EverywhereFromOwnMenu", func(t *testing.T) {
		a, b := webtest.SignIn(t, e.h, "lea", webtest.Password), webtest.SignIn(t, e.h, "lea", webtest.Password)
		if !strings.Contains(a.Load(t, e.h, "/workers").Body.String(), `action="/logout/everywhere"`) {
			t.Error("the user menu has no sign-out-everywhere form")
		}
		if rec := a.Do(e.h, request("POST", "/logout/everywhere", "")); rec.Code != http.StatusSeeOther {
			t.Fatalf("sign out everywhere: %d", rec.Code)
		}
		if signedIn(a) || signedIn(b) {
			t.Errorf("after signing out everywhere: this session %v, the other %v, want both over", signedIn(a), signedIn(b))
		}
	})
	t.Run("EverywhereByAnAdmin", func(t *testing.T) {
		admin := e.as(t, "root", dlq.RoleAdmin)
		victim := webtest.SignIn(t, e.h, "lea", webtest.Password)
		if !strings.Contains(admin.Load(t, e.h, "/admin/users").Body.String(), `action="/admin/users/lea/signout"`) {
			t.Error("the admin page has no sign-out-everywhere form for lea")
		}
		if rec := admin.Do(e.h, request("POST", "/admin/users/lea/signout", form("_csrf", admin.CSRF))); rec.Code != http.StatusSeeOther {
			t.Fatalf("admin signs lea out: %d", rec.Code)
		}
		if signedIn(victim) {
			t.Error("lea's session survived an admin's sign-out-everywhere")
		}
		if !signedIn(admin) {
			t.Error("signing lea out ended the admin's own session")
		}
	})
}

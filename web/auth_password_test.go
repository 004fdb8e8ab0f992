package web_test

import (
	"net/http"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// TestPasswordPolicyOnTheAdminPage: a new password that is one of the
// most common ones, one character repeated, or the user's own name is
// refused with 422 and changes nothing; a reasonable one is accepted.
func TestPasswordPolicyOnTheAdminPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.as(t, "root", dlq.RoleAdmin)
	add := func(name, password string) int {
		return admin.Do(e.h, request("POST", "/admin/users", form("name", name, "role", "viewer", "password", password, "_csrf", admin.CSRF))).Code
	}
	for _, tc := range []struct{ name, password string }{
		{"ten-as", "aaaaaaaaaa"},
		{"common", "password123"},
		{"common-any-case", "QwertyUIOP"},
		{"frederick12", "Frederick12"},
	} {
		before := e.state(t)
		if code := add(tc.name, tc.password); code != http.StatusUnprocessableEntity {
			t.Errorf("user %s with password %q: %d, want 422", tc.name, tc.password, code)
		}
		if e.state(t) != before {
			t.Errorf("user %s: refused, yet the database changed", tc.name)
		}
	}
	if code := add("gwen", "tangerine orbit 42"); code != http.StatusSeeOther {
		t.Fatalf("a reasonable password: %d", code)
	}
	rec := admin.Do(e.h, request("POST", "/admin/users/gwen/password", form("password", "1234567890", "_csrf", admin.CSRF)))
	if rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("setting a common password: %d, want 422", rec.Code)
	}
}

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/web/webtest"
)

// TestTokenWindow: the console believes a token that worked for
// auth.TokenWindow without reading it again. A token revoked, a user
// disabled or a role lowered through another store (the CLI, another
// console) takes effect once the window has passed; through this
// console, at the next request.
func TestTokenWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, change := context.Background(), dlq.UserChange{Actor: dlq.Actor{Name: "test"}, Now: time.Now()}
	get := func(tok string) int {
		return e.do("GET", "/api/v1/dead-letters", "", "Authorization", "Bearer "+tok).Code
	}
	tokenOf := func(name string, role dlq.Role) (string, dlq.Token) {
		webtest.CreateUser(t, e.store.Access, name, role)
		secret := webtest.Token(t, e.store.Access, name)
		tokens, err := e.store.Access.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tokens {
			if tk.UserName == name {
				if code := get(secret); code != http.StatusOK {
					t.Fatalf("%s's new token: %d", name, code)
				}
				return secret, tk
			}
		}
		t.Fatalf("no token for %s", name)
		return "", dlq.Token{}
	}

	revoked, tk := tokenOf("cleo", dlq.RoleViewer)
	disabled, _ := tokenOf("dan", dlq.RoleViewer)
	demoted, _ := tokenOf("eve", dlq.RoleOperator)
	if _, err := e.store.Access.RevokeToken(ctx, fmt.Sprint(tk.ID), dlq.Actor{Name: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Access.DisableUser(ctx, "dan", change); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Access.SetRole(ctx, "eve", dlq.RoleViewer, change); err != nil {
		t.Fatal(err)
	}
	discard := func(tok string) int {
		id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
		return e.do("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"cleanup"}`,
			"Authorization", "Bearer "+tok).Code
	}
	// Inside the window the console has not read them again.
	e.clock.Add(auth.TokenWindow - time.Millisecond)
	if code := get(revoked); code != http.StatusOK {
		t.Errorf("a token revoked elsewhere, inside the window: %d, want still believed (200)", code)
	}
	e.clock.Add(time.Millisecond)
	if code := get(revoked); code != http.StatusUnauthorized {
		t.Errorf("a token revoked elsewhere, after the window: %d, want 401", code)
	}
	if code := get(disabled); code != http.StatusUnauthorized {
		t.Errorf("a disabled user's token, after the window: %d, want 401", code)
	}
	if code := discard(demoted); code != http.StatusForbidden {
		t.Errorf("an operator lowered to viewer discarded after the window: %d, want 403", code)
	}

	// Through this console's admin page: refused at the next request.
	own, ownToken := tokenOf("fay", dlq.RoleViewer)
	admin := e.as(t, "root", dlq.RoleAdmin)
	if rec := admin.Do(e.h, request("POST", fmt.Sprintf("/admin/tokens/%d/revoke", ownToken.ID), form("_csrf", admin.CSRF))); rec.Code != http.StatusSeeOther {
		t.Fatalf("admin revokes fay's token: %d", rec.Code)
	}
	if code := get(own); code != http.StatusUnauthorized {
		t.Errorf("a token revoked in this console, at once: %d, want 401", code)
	}
}

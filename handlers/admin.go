package handlers

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// UserAdmin is what the admin page needs from the store.
type UserAdmin interface {
	Users(ctx context.Context) ([]dlq.User, error)
	Tokens(ctx context.Context) ([]dlq.Token, error)
	CreateUser(ctx context.Context, p dlq.NewUser) (dlq.User, error)
	SetPassword(ctx context.Context, name string, hash []byte, c dlq.UserChange) (dlq.User, error)
	DisableUser(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error)
	EnableUser(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error)
	SetRole(ctx context.Context, name string, role dlq.Role, c dlq.UserChange) (dlq.User, error)
	EndSessions(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error)
	CreateToken(ctx context.Context, p dlq.NewToken) (dlq.Token, error)
	RevokeToken(ctx context.Context, ref string, a dlq.Actor, now time.Time) (dlq.Token, error)
}

// AdminPath is the admin page.
const AdminPath = "/admin/users"

// Admin renders the users and tokens page. After a change it shows what
// was done, named by the done and name query parameters of the redirect.
func Admin(store UserAdmin, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		v := views.AdminView{NewUser: views.AdminNewUser{Role: string(dlq.RoleViewer)}}
		return renderAdmin(c, store, http.StatusOK, version, v, doneFlash(c.QueryParam("done"), c.QueryParam("name")))
	}
}

// AdminAddUser creates a user from the add-user form.
func AdminAddUser(store UserAdmin, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		name, role := c.FormValue("name"), dlq.Role(c.FormValue("role"))
		v := views.AdminView{Form: "add-user", NewUser: views.AdminNewUser{Name: name, Role: string(role)}}
		hash, err := dlq.HashPassword(name, c.FormValue("password"), 0)
		if err == nil {
			_, err = store.CreateUser(c.Request().Context(), dlq.NewUser{Name: name, Role: role, PasswordHash: hash,
				Actor: ActorFrom(c).Actor, Now: now()})
		}
		if problems, ok := formProblems(err); ok {
			v.Problems = problems
			return renderAdmin(c, store, http.StatusUnprocessableEntity, version, v, nil)
		}
		if err != nil {
			return err
		}
		return adminRedirectDone(c, "added", name)
	}
}

// AdminChangeUser applies one change to the user named in the path: op is
// "password", "disable", "enable", "role" or "signout" (end their sessions
// everywhere).
func AdminChangeUser(store UserAdmin, now func() time.Time, op, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		ctx, name := c.Request().Context(), c.Param("name")
		change := dlq.UserChange{Actor: ActorFrom(c).Actor, Now: now()}
		var err error
		switch op {
		case "password":
			var hash []byte
			if hash, err = dlq.HashPassword(name, c.FormValue("password"), 0); err == nil {
				_, err = store.SetPassword(ctx, name, hash, change)
			}
		case "disable":
			_, err = store.DisableUser(ctx, name, change)
		case "enable":
			_, err = store.EnableUser(ctx, name, change)
		case "role":
			_, err = store.SetRole(ctx, name, dlq.Role(c.FormValue("role")), change)
		case "signout":
			_, err = store.EndSessions(ctx, name, change)
		default:
			return NotFound("No such change.")
		}
		if problems, ok := formProblems(err); ok {
			v := views.AdminView{Form: "user", Problems: problems}
			flash := &views.Flash{Kind: "error", Message: "Nothing changed for " + name + ": " + joinProblems(problems)}
			return renderAdmin(c, store, http.StatusUnprocessableEntity, version, v, flash)
		}
		if err != nil {
			return err
		}
		return adminRedirectDone(c, op, name)
	}
}

// AdminCreateToken creates an API token and shows it, this once. There is
// no redirect: the token must not travel in a URL, and it cannot be shown
// again afterwards.
func AdminCreateToken(store UserAdmin, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		user, label := c.FormValue("user"), c.FormValue("label")
		v := views.AdminView{Form: "token", TokenFor: user, TokenLabel: label}
		secret, err := dlq.NewTokenSecret()
		if err != nil {
			return err
		}
		t, err := store.CreateToken(c.Request().Context(), dlq.NewToken{UserName: user, Label: label,
			Hash: dlq.HashToken(secret), Actor: ActorFrom(c).Actor, Now: now()})
		if problems, ok := formProblems(err); ok {
			v.Problems = problems
			return renderAdmin(c, store, http.StatusUnprocessableEntity, version, v, nil)
		}
		if err != nil {
			return err
		}
		v.TokenFor, v.TokenLabel = "", ""
		v.CreatedOnce = &views.AdminCreatedToken{Label: t.Label, User: t.UserName, Token: secret}
		return renderAdmin(c, store, http.StatusOK, version, v, nil)
	}
}

// AdminRevokeToken revokes the token with the path's id.
func AdminRevokeToken(store UserAdmin, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		if _, err := pathID(c, "A token", "/admin/tokens/3/revoke"); err != nil {
			return err
		}
		t, err := store.RevokeToken(c.Request().Context(), c.Param("id"), ActorFrom(c).Actor, now())
		if err != nil {
			return err
		}
		return adminRedirectDone(c, "revoked", t.Label)
	}
}

// mayAdminister refuses non-admins. Routes are guarded already; this
// keeps the handler safe wherever it is mounted.
func mayAdminister(c echo.Context) error {
	if p, ok := principal.From(c); ok && p.Role.CanAdminister() {
		return nil
	}
	return &dlq.Error{Code: "forbidden", Message: "Only admins manage users and tokens."}
}

// formProblems turns a validation error or a clash of names into what the
// form shows; anything else is not a form problem.
func formProblems(err error) (map[string]string, bool) {
	var verr *dlq.ValidationError
	switch {
	case errors.As(err, &verr):
		return verr.Fields, true
	case errors.Is(err, dlq.ErrLastAdmin):
		return map[string]string{"role": "cannot change: that would leave no active admin to manage users"}, true
	case errors.Is(err, dlq.ErrConflict):
		return map[string]string{"name": dlq.ErrorMessage(err)}, true
	}
	return nil, false
}

func joinProblems(p map[string]string) string {
	out := ""
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if out != "" {
			out += "; "
		}
		out += k + " " + p[k]
	}
	return out
}

func adminRedirectDone(c echo.Context, done, name string) error {
	return c.Redirect(http.StatusSeeOther, AdminPath+"?"+url.Values{"done": {done}, "name": {name}}.Encode())
}

// doneFlash words what a redirect says was done. Only known words and
// names that could be users or labels are shown, so a crafted link cannot
// put arbitrary text on the page.
func doneFlash(done, name string) *views.Flash {
	if !dlq.ValidUserName(name) {
		return nil
	}
	msg := map[string]string{
		"added":    "Added " + name + ".",
		"password": "Set a new password for " + name + "; their sessions have ended.",
		"disable":  "Disabled " + name + ": their sessions and tokens stopped working.",
		"enable":   "Enabled " + name + ".",
		"role":     "Changed the role of " + name + "; it applies from their next request.",
		"signout":  "Signed " + name + " out everywhere: every session they had has ended (their API tokens still work).",
		"revoked":  "Revoked the token " + name + ".",
	}[done]
	if msg == "" {
		return nil
	}
	return &views.Flash{Kind: "ok", Message: msg}
}

func renderAdmin(c echo.Context, store UserAdmin, status int, version string, v views.AdminView, flash *views.Flash) error {
	ctx := c.Request().Context()
	users, err := store.Users(ctx)
	if err != nil {
		return err
	}
	tokens, err := store.Tokens(ctx)
	if err != nil {
		return err
	}
	me, _ := principal.From(c)
	for _, u := range users {
		v.Users = append(v.Users, views.AdminUser{Name: u.Name, Role: string(u.Role), Disabled: !u.Active(),
			CreatedAt: u.CreatedAt, Self: u.Name == me.Name})
	}
	for _, t := range tokens {
		v.Tokens = append(v.Tokens, views.AdminToken{ID: t.ID, Label: t.Label, User: t.UserName, CreatedBy: t.CreatedBy,
			CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt})
	}
	for _, r := range dlq.Roles {
		v.Roles = append(v.Roles, string(r))
	}
	meta := Meta(c, "Users and API tokens", "admin", version)
	meta.Flash = flash
	v.CSRFToken = meta.CSRFToken
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, status, views.Layout(meta, views.Admin(v)))
}

// AdminRedirect sends /admin to the admin page.
func AdminRedirect() echo.HandlerFunc {
	return func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, AdminPath) }
}

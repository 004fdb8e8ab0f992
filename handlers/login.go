package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// SignInService checks a name and password (and throttles guessing). A
// failure is dlq.ErrBadCredentials or a *dlq.ThrottledError.
type SignInService interface {
	SignIn(ctx context.Context, name, password string, actor dlq.Actor) (dlq.User, error)
}

// Sessions starts and ends the signed-in session of a browser. End ends it
// on the server too, so a copy of the cookie is signed out with it.
type Sessions interface {
	Start(c echo.Context, u dlq.User) error
	End(c echo.Context) error
}

// SessionEnder ends every session a user has (store/access).
type SessionEnder interface {
	EndSessions(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error)
}

// badCredentials is the one message for an unknown name, a wrong password
// and a disabled user alike: which one it was would tell a guesser too much.
const badCredentials = "Wrong username or password."

// LoginForm shows the sign-in page, or sends someone already signed in on
// to where they were going.
func LoginForm(version string, proxyHint bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		next := SafeNext(c.QueryParam("next"))
		if _, ok := principal.From(c); ok {
			return c.Redirect(http.StatusSeeOther, next)
		}
		return renderLogin(c, http.StatusOK, version, views.LoginView{Next: next, ProxyHint: proxyHint})
	}
}

// Login signs in with the form's username and password, then goes to the
// form's next path (only ever a path on this site). A failure shows the
// form again: 401 with the same words whatever was wrong, or 429 with how
// long to wait once there were too many.
func Login(svc SignInService, sessions Sessions, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		name := strings.TrimSpace(c.FormValue("username"))
		password := c.FormValue("password")
		v := views.LoginView{Next: SafeNext(c.FormValue("next")), Username: name}
		if name == "" || password == "" {
			v.Problem = "Enter your username and password."
			return renderLogin(c, http.StatusUnprocessableEntity, version, v)
		}
		u, err := svc.SignIn(c.Request().Context(), name, password, ActorFrom(c).Actor)
		var throttled *dlq.ThrottledError
		switch {
		case errors.As(err, &throttled):
			secs := int(throttled.RetryAfter.Round(time.Second) / time.Second)
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			v.Problem = throttleMessage(throttled)
			return renderLogin(c, http.StatusTooManyRequests, version, v)
		case errors.Is(err, dlq.ErrBadCredentials):
			v.Problem = badCredentials
			return renderLogin(c, http.StatusUnauthorized, version, v)
		case err != nil:
			return err
		}
		if err := sessions.Start(c, u); err != nil {
			return fmt.Errorf("start session: %w", err)
		}
		return c.Redirect(http.StatusSeeOther, v.Next)
	}
}

func throttleMessage(e *dlq.ThrottledError) string {
	if e.Locked {
		mins := max(int((e.RetryAfter+time.Minute-1)/time.Minute), 1)
		return fmt.Sprintf("Too many failed sign-ins. Signing in is locked for %d minute%s; try again later.", mins, secondsPlural(mins))
	}
	secs := max(int((e.RetryAfter+time.Second-1)/time.Second), 1)
	return fmt.Sprintf("Too many failed sign-ins. Wait %d second%s, then try again.", secs, secondsPlural(secs))
}

func secondsPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Logout ends the session and goes to the sign-in page.
func Logout(sessions Sessions) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := sessions.End(c); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/login")
	}
}

// LogoutEverywhere ends every session of the signed-in user, in every
// browser, this one included, and goes to the sign-in page. Someone known
// only to the SSO proxy has no sessions here to end.
func LogoutEverywhere(store SessionEnder, sessions Sessions, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p, ok := principal.From(c); ok {
			_, err := store.EndSessions(c.Request().Context(), p.Name, dlq.UserChange{Actor: ActorFrom(c).Actor, Now: now()})
			if err != nil && !errors.Is(err, dlq.ErrNotFound) {
				return err
			}
		}
		if err := sessions.End(c); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/login")
	}
}

func renderLogin(c echo.Context, status int, version string, v views.LoginView) error {
	meta := Meta(c, "Sign in", "", version)
	v.CSRFToken = meta.CSRFToken
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, status, views.Layout(meta, views.Login(v)))
}

// SafeNext returns next if it is a path on this site, else "/". Only a
// single leading slash followed by something that is not a slash or a
// backslash passes: "//evil.example" and "/\evil.example" are read by
// browsers as other hosts, and a scheme ("https:", "javascript:") or any
// control character or backslash anywhere is refused outright.
func SafeNext(next string) string {
	if !startsAsLocalPath(next) || hasUnsafeRune(next) || !parsesAsLocalPath(next) {
		return "/"
	}
	return next
}

// startsAsLocalPath reports whether next begins with exactly one slash
// (and is of a sane length): a second slash or a backslash after it makes
// browsers read what follows as a host.
func startsAsLocalPath(next string) bool {
	if next == "" || next[0] != '/' || len(next) > 2000 {
		return false
	}
	return len(next) == 1 || (next[1] != '/' && next[1] != '\\')
}

// hasUnsafeRune reports a control character or a backslash anywhere in
// next: browsers drop or reinterpret them, so what they would follow is
// not what was checked.
func hasUnsafeRune(next string) bool {
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return true
		}
	}
	return false
}

// parsesAsLocalPath reports whether next, read as a URL, is only a path
// (with query or fragment): no scheme, host, user or opaque part.
func parsesAsLocalPath(next string) bool {
	u, err := url.Parse(next)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == ""
}

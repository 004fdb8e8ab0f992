package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// Principal is who is making a request. Package web's authentication
// middleware sets it; handlers read it to fill views and to name the actor
// of an action. Authorisation is enforced on the server, here and in
// replay, whatever the page showed.
type Principal struct {
	Name string
	Role dlq.Role
	// Via says how the principal was established: "session", "token",
	// "proxy" or "dev".
	Via string
}

const principalKey = "redrive.principal"

const unverifiedUserKey = "redrive.unverified-user"

// unverifiedUser is who a genuine sign-in said it was when the database
// could not confirm it.
type unverifiedUser struct {
	name string
	role dlq.Role
}

// SetUnverifiedUser records that the request carries a genuine sign-in (a
// session cookie, a trusted proxy's header) whose user could not be looked
// up (the database is unreachable). name and role are what the sign-in
// itself says (the session's as of its last confirmation, the proxy's
// header and its configured role); the page it fails with shows them as
// unconfirmed, or, when name is empty (a cookie from an older version),
// that someone is signed in. They grant nothing.
func SetUnverifiedUser(c echo.Context, name string, role dlq.Role) {
	c.Set(unverifiedUserKey, unverifiedUser{name: name, role: role})
}

// SetPrincipal records who is making the request.
func SetPrincipal(c echo.Context, p Principal) { c.Set(principalKey, p) }

// PrincipalFrom returns who is making the request, if anyone signed in.
func PrincipalFrom(c echo.Context) (Principal, bool) {
	p, ok := c.Get(principalKey).(Principal)
	return p, ok && p.Name != ""
}

// ActorFrom describes the requester for the audit trail and for policy.
func ActorFrom(c echo.Context) replay.Actor {
	p, _ := PrincipalFrom(c)
	r := c.Request()
	return replay.Actor{
		Actor: dlq.Actor{
			Name:       p.Name,
			RequestID:  c.Response().Header().Get(echo.HeaderXRequestID),
			RemoteAddr: c.RealIP(),
			UserAgent:  r.UserAgent(),
		},
		Role: p.Role,
	}
}

const csrfKey = "csrf" // where web's CSRF middleware leaves the session's token

// Meta fills the layout's PageMeta for the current request: title, active
// navigation entry, who is signed in, the CSRF token forms must carry and,
// on pages read from a replica, how fresh their numbers are.
func Meta(c echo.Context, title, active, version string) views.PageMeta {
	m := views.PageMeta{Title: title, Active: active, Version: version}
	if p, ok := PrincipalFrom(c); ok {
		m.User = &views.User{Name: p.Name, Role: string(p.Role)}
		m.CanAct = p.Role.CanAct()
		m.CanAdminister = p.Role.CanAdminister()
	} else if u, ok := c.Get(unverifiedUserKey).(unverifiedUser); ok {
		m.User = &views.User{Name: u.name, Role: string(u.role), Unknown: u.name == "", Unverified: u.name != ""}
		// The header keeps its Admin link (its page answers 503 until the
		// database is back); no action is offered on an unconfirmed user.
		m.CanAdminister = u.name != "" && u.role.CanAdminister()
	}
	if tok, ok := c.Get(csrfKey).(string); ok {
		m.CSRFToken = tok
	}
	if s, ok := c.Get(readStateKey).(dlq.ReadState); ok {
		m.ReadNotice = readNotice(s)
	}
	if notices, ok := c.Get(pausesKey).([]views.PauseNotice); ok && len(notices) > 0 {
		m.Pauses, m.PauseKey = notices, newFormKey()
	}
	if b, ok := c.Get(inFlightKey).(*views.InFlightBanner); ok {
		m.InFlight = b
	}
	return m
}

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

const unknownUserKey = "redrive.unknown-user"

// SetUnknownUser records that the request carries a genuine sign-in (a
// session cookie, a trusted proxy's header) whose user could not be looked
// up (the database is unreachable): the page it fails with says someone is
// signed in without naming who, or their role, which it cannot check.
func SetUnknownUser(c echo.Context) { c.Set(unknownUserKey, true) }

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
	} else if unknown, _ := c.Get(unknownUserKey).(bool); unknown {
		m.User = &views.User{Unknown: true}
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

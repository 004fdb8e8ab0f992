package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// ActorFrom describes the requester for the audit trail and for policy.
func ActorFrom(c echo.Context) replay.Actor {
	p, _ := principal.From(c)
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
	if p, ok := principal.From(c); ok {
		m.User = &views.User{Name: p.Name, Role: string(p.Role)}
		m.CanAct = p.Role.CanAct()
		m.CanAdminister = p.Role.CanAdminister()
	} else if u, ok := principal.UnverifiedFrom(c); ok {
		m.User = &views.User{Name: u.Name, Role: string(u.Role), Unknown: u.Name == "", Unverified: u.Name != ""}
		// The header keeps its Admin link (its page answers 503 until the
		// database is back); no action is offered on an unconfirmed user.
		m.CanAdminister = u.Name != "" && u.Role.CanAdminister()
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
	if r, ok := c.Get(retentionKey).(*views.Retention); ok {
		m.Retention = r
	}
	if notices, ok := c.Get(throttlesKey).([]views.ThrottleNotice); ok && len(notices) > 0 {
		m.Throttles = notices
		if m.PauseKey == "" {
			m.PauseKey = newFormKey()
		}
	}
	if b, ok := c.Get(inFlightKey).(*views.InFlightBanner); ok {
		m.InFlight = b
	}
	return m
}

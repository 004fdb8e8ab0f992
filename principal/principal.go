// Package principal holds who is making a request to the console: a
// name, a role and how they signed in. web/auth's middleware finds it out
// and sets it on the request; handlers read it to fill pages and to name
// the actor of an action. Neither package imports the other: this one is
// what they share. It grants nothing by itself: access is decided in
// web/auth and replay, on the server, whatever a page showed.
package principal

import (
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// Principal is who is making a request.
type Principal struct {
	Name string
	Role dlq.Role
	// Via says how the principal was established: ViaSession, ViaToken
	// or ViaProxy.
	Via string
	// Sources, for a token limited to them, are the sources whose letters
	// it may send (POST /api/v1/letters), the one thing it may do; nil for
	// everyone else.
	Sources []string
}

// SendsOnly reports whether p may only send the letters of its sources.
func (p Principal) SendsOnly() bool { return len(p.Sources) > 0 }

// How a principal was established.
const (
	ViaSession = "session" // a session cookie from the sign-in form
	ViaToken   = "token"   // an API token (Authorization: Bearer)
	ViaProxy   = "proxy"   // a trusted proxy's SSO header
)

// Unverified is who a genuine sign-in (a session cookie, a trusted
// proxy's header) said it was when the database could not confirm it:
// the session's name and role as of its last confirmation, or the proxy's
// header and its configured role. An empty Name is a cookie from an older
// version, which says only that someone is signed in. It grants nothing.
type Unverified struct {
	Name string
	Role dlq.Role
}

const (
	principalKey  = "redrive.principal"
	unverifiedKey = "redrive.unverified-user"
)

// Set records who is making the request.
func Set(c echo.Context, p Principal) { c.Set(principalKey, p) }

// From returns who is making the request, if anyone signed in. Without a
// name the principal is returned as it was set, with false.
func From(c echo.Context) (Principal, bool) {
	p, ok := c.Get(principalKey).(Principal)
	return p, ok && p.Name != ""
}

// SetUnverified records that the request carries a genuine sign-in whose
// user could not be looked up (the database is unreachable); the page the
// request fails with shows it as unconfirmed.
func SetUnverified(c echo.Context, u Unverified) { c.Set(unverifiedKey, u) }

// UnverifiedFrom returns what SetUnverified recorded, if anything.
func UnverifiedFrom(c echo.Context) (Unverified, bool) {
	u, ok := c.Get(unverifiedKey).(Unverified)
	return u, ok
}

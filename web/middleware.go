package web

import (
	"crypto/rand"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/web/auth"
)

// hsts tells browsers to use only HTTPS from now on, but only on a
// response that itself came over HTTPS: on plain HTTP the header is
// meaningless, and believing any client's X-Forwarded-Proto (as echo's
// Secure middleware does) would let it be set where it should not be.
func hsts(t auth.ProxyTrust) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if t.HTTPS(c.Request()) {
				c.Response().Header().Set(echo.HeaderStrictTransportSecurity, "max-age=31536000; includeSubDomains")
			}
			return next(c)
		}
	}
}

// requestIDPattern is what a request id from a proxy may look like: the
// usual UUIDs and trace ids, nothing that could pass for other text in a
// log line or the audit trail.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:@+=/-]{1,128}$`)

// requestID gives every request an id, for the logs, error pages and the
// audit trail, and answers with it in X-Request-Id. A client's own
// X-Request-Id is believed only from a trusted proxy (which then keeps one
// id across its logs and ours) and only if it looks like an id; anyone
// else's is replaced: the audit trail must not record what a client made
// up.
func requestID(t auth.ProxyTrust) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			id := r.Header.Get(echo.HeaderXRequestID)
			if !t.Trusted(r) || !requestIDPattern.MatchString(id) {
				id = rand.Text()
			}
			// Both: the request logger reads the request's header first.
			r.Header.Set(echo.HeaderXRequestID, id)
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			return next(c)
		}
	}
}

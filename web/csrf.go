package web

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/redrive/redrive/handlers"
)

// csrfCookie holds the CSRF token that forms and htmx send back.
const csrfCookie = "_csrf"

// csrfContextKey is where echo's CSRF middleware leaves the token;
// handlers.Meta reads it from there for the forms.
const csrfContextKey = "csrf"

// csrf protects every state-changing request that carries an ambient
// credential (a session cookie, or the SSO proxy's header) with echo's
// token check: the form field _csrf or the X-CSRF-Token header must equal
// the token in the _csrf cookie, which another site can neither read nor
// set. A request authenticated by a bearer token is exempt: a browser never
// adds that header by itself, so there is nothing to forge.
//
// Two refinements to echo's middleware:
//   - echo 4.16 lets a browser's "Sec-Fetch-Site: same-origin" stand in for
//     the token. We want the token always (an injected same-origin form
//     must not pass), so a cross-site request is refused on that header and
//     the header is then hidden from echo.
//   - a missing token is 403 like a wrong one (echo says 400).
//
// The cookie is Secure exactly when the session cookie would be.
func csrf(trust proxyTrust) echo.MiddlewareFunc {
	build := func(secure bool) echo.MiddlewareFunc {
		return middleware.CSRFWithConfig(middleware.CSRFConfig{
			TokenLookup:    "form:_csrf,header:" + echo.HeaderXCSRFToken,
			CookieName:     csrfCookie,
			CookiePath:     "/",
			CookieHTTPOnly: true,
			CookieSameSite: http.SameSiteLaxMode,
			CookieSecure:   secure,
			ContextKey:     csrfContextKey,
			ErrorHandler: func(error, echo.Context) error {
				return &handlers.RequestError{Status: http.StatusForbidden, Code: "csrf",
					Message: "This form has expired or did not come from this console (missing or wrong CSRF token). Reload the page and try again."}
			},
		})
	}
	plain, secure := build(false), build(true)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		plainNext, secureNext := plain(next), secure(next)
		return func(c echo.Context) error {
			if p, ok := handlers.PrincipalFrom(c); ok && p.Via == viaToken {
				return next(c)
			}
			if quietPath(c.Path()) {
				return next(c)
			}
			r := c.Request()
			if unsafeMethod(r.Method) && r.Header.Get(echo.HeaderSecFetchSite) == "cross-site" {
				return &handlers.RequestError{Status: http.StatusForbidden, Code: "csrf", Message: "Cross-site requests may not change anything here."}
			}
			r.Header.Del(echo.HeaderSecFetchSite)
			if trust.https(r) {
				return secureNext(c)
			}
			return plainNext(c)
		}
	}
}

// unsafeMethod reports whether method may change something (RFC 9110).
func unsafeMethod(method string) bool {
	return !slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace}, method)
}

// quietPath: probes, metrics and static files need no CSRF cookie.
func quietPath(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return isStaticPath(path)
}

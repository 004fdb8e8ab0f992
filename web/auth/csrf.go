package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
)

// csrfContextKey is where the request's CSRF token is left for
// handlers.Meta, which puts it in the forms and the page's <meta>.
const csrfContextKey = "csrf"

var (
	errCSRF = &dlq.Error{Code: "csrf",
		Message: "This form has expired or did not come from this console (missing or wrong CSRF token). Reload the page and try again."}
	errCrossSite = &dlq.Error{Code: "csrf",
		Message: "Requests from other sites may not change anything here."}
)

// csrf protects every state-changing request that carries an ambient
// credential (a session cookie, or the SSO proxy's header) twice over:
//
//   - the browser's own word on where the request came from: a
//     Sec-Fetch-Site other than same-origin or none, or else an Origin
//     whose host is not this one, is refused (net/http's
//     CrossOriginProtection; behind a trusted proxy, the host it names in
//     X-Forwarded-Host). A request with neither header (curl, an old
//     browser) goes on to the token check alone;
//   - a synchronizer token tied to the signed session: an HMAC, under the
//     session's secret, of who is signed in. The secret lives only in the
//     encrypted session cookie, so another site can neither read the token
//     nor make one that fits; a planted cookie of its own is not signed by
//     us and is ignored. The form field _csrf or the X-CSRF-Token header
//     must carry it, every time (a same-origin Sec-Fetch-Site is no
//     substitute: an injected same-origin form must not pass).
//
// A request authenticated by a bearer token is exempt: a browser never
// adds that header by itself, so there is nothing to forge. A browser
// without a session gets a signed-out one on its first page, so the
// sign-in form has a token too (no login CSRF).
func csrf(sessions *Sessions, quiet func(path string) bool) echo.MiddlewareFunc {
	origins := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, _ := principal.From(c)
			if p.Via == principal.ViaToken || quiet(c.Path()) {
				return next(c)
			}
			r := c.Request()
			unsafe := unsafeMethod(r.Method)
			if unsafe && origins.Check(asProxied(r, sessions.trust)) != nil {
				return errCrossSite
			}
			d, ok := sessions.current(c)
			if !ok {
				switch {
				case unsafe && c.Path() == "/logout":
					// No session to end (it expired): signing out is
					// done already, whoever asked.
					return next(c)
				case unsafe:
					return errCSRF
				}
				var err error
				if d, err = sessions.startSignedOut(c); err != nil {
					return err
				}
			}
			want := csrfToken(d.SID, p.Name)
			c.Set(csrfContextKey, want)
			if unsafe && !hmac.Equal([]byte(sentToken(c)), []byte(want)) {
				return errCSRF
			}
			return next(c)
		}
	}
}

// asProxied is r with the Host the browser used: a trusted proxy that
// rewrites Host (nginx does by default) says it in X-Forwarded-Host, and
// an Origin is compared with that. Anyone else's X-Forwarded-Host is
// ignored.
func asProxied(r *http.Request, trust ProxyTrust) *http.Request {
	host := r.Header.Get("X-Forwarded-Host")
	if host == "" || host == r.Host || !trust.Trusted(r) {
		return r
	}
	r2 := r.WithContext(r.Context())
	r2.Host = host
	return r2
}

// csrfToken is the token of a session for the principal called name: the
// name is in it so that a token made for one identity (the signed-out
// session, say) is no good for another on the same session.
func csrfToken(sid []byte, name string) string {
	m := hmac.New(sha256.New, sid)
	m.Write([]byte("redrive csrf\x00" + name))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sentToken is the token a request carries: the form field, else the header.
func sentToken(c echo.Context) string {
	if v := c.FormValue("_csrf"); v != "" {
		return v
	}
	return c.Request().Header.Get(echo.HeaderXCSRFToken)
}

// unsafeMethod reports whether method may change something (RFC 9110).
func unsafeMethod(method string) bool {
	return !slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace}, method)
}

// quietPath: probes, metrics, the icon and static files need no session or token.
func quietPath(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics", "/favicon.ico":
		return true
	}
	return isStaticPath(path)
}

package auth

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
)

// accessPolicy is the console's authorisation policy, default-deny: a route is
// open to anonymous requests only if web/routes.go registered it through
// Security.Public; every other route needs someone signed in, and then a role:
//
//	/admin and below       admin
//	POST, PUT, PATCH, ...  operator (anything that may change something)
//	GET, HEAD              viewer
//
// The rule is decided from the matched route and the method, not from a
// list of routes to protect, so a route added later, anywhere, is protected
// without anyone remembering to. Handlers and replay.Service check again
// where it matters; a hidden button is never the control.
type accessPolicy struct {
	public map[string]bool // "GET /healthz"
	// documents are the public paths registered with Document.
	documents map[string]bool
}

func newAccessPolicy() *accessPolicy {
	return &accessPolicy{public: map[string]bool{}, documents: map[string]bool{}}
}

// quiet reports the paths that need no session and must not touch one:
// probes, metrics, the icon, static files and public documents.
func (a *accessPolicy) quiet(path string) bool { return quietPath(path) || a.documents[path] }

func routeKey(method, path string) string {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	return method + " " + path
}

func isStaticPath(path string) bool { return path == "/static*" }

// PublicRoutes registers routes that need no sign-in. It is the only way
// to make one.
type PublicRoutes struct {
	e   *echo.Echo
	acl *accessPolicy
}

// GET registers a public GET route.
func (p PublicRoutes) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	p.e.GET(path, h, m...)
	p.acl.public[routeKey(http.MethodGet, path)] = true
}

// Document registers a public GET route for a document that anyone may
// read and a shared cache may keep and hand to many clients (the OpenAPI
// description): no session is read for it, and none is started, renewed
// or cleared in its answer, which therefore never sets a cookie.
func (p PublicRoutes) Document(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	p.GET(path, h, m...)
	p.acl.documents[path] = true
}

// POST registers a public POST route (sign-in, sign-out). CSRF still
// applies to it.
func (p PublicRoutes) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	p.e.POST(path, h, m...)
	p.acl.public[routeKey(http.MethodPost, path)] = true
}

// required is the least role that may use a route with method.
func required(method, path string) dlq.Role {
	switch {
	case path == "/admin" || strings.HasPrefix(path, "/admin/") || strings.HasPrefix(path, "/api/v1/admin/"):
		return dlq.RoleAdmin
	case unsafeMethod(method):
		return dlq.RoleOperator
	default:
		return dlq.RoleViewer
	}
}

// allows reports whether role is at least need.
func allows(role, need dlq.Role) bool {
	switch need {
	case dlq.RoleAdmin:
		return role.CanAdminister()
	case dlq.RoleOperator:
		return role.CanAct()
	default:
		return role.Valid()
	}
}

func (a *accessPolicy) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if a.public[routeKey(r.Method, c.Path())] || isStaticPath(c.Path()) {
			return next(c)
		}
		p, ok := principal.From(c)
		if !ok {
			return unauthenticated(c)
		}
		if key := routeKey(r.Method, c.Path()); p.SendsOnly() && key != SendLettersRoute && key != reportOutcomeRoute && key != takeReplaysRoute {
			return &dlq.Error{Code: "forbidden",
				Message: "This token may only send the letters of " + strings.Join(p.Sources, ", ") +
					" (POST /api/v1/letters) and report how their replays went (POST " + ReportOutcomePath + ")."}
		}
		if need := required(r.Method, c.Path()); !allows(p.Role, need) {
			return &dlq.Error{Code: "forbidden",
				Message: "You are signed in as " + p.Name + " (" + string(p.Role) + "); this needs the " + string(need) + " role."}
		}
		return next(c)
	}
}

// SendLettersRoute, reportOutcomeRoute and takeReplaysRoute are the routes
// a token limited to some sources may call (principal.Principal.SendsOnly):
// it sends their letters, takes the replays its workers publish, and says
// how its replays went.
var (
	SendLettersRoute   = routeKey("POST", "/api/v1/letters")
	reportOutcomeRoute = routeKey("POST", ReportOutcomePath)
	takeReplaysRoute   = routeKey("POST", TakeReplaysPath)
)

// ReportOutcomePath is the route of a replay's reported outcome;
// TakeReplaysPath the one a source's workers take their replays from.
const (
	ReportOutcomePath = "/api/v1/letters/:id/outcome"
	TakeReplaysPath   = "/api/v1/sources/:name/replays/take"
)

// RequireRole is access's rule as route middleware, for a group whose
// need is higher than its methods say (the admin pages' GETs).
func RequireRole(need dlq.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, ok := principal.From(c)
			if !ok {
				return unauthenticated(c)
			}
			if !allows(p.Role, need) {
				return &dlq.Error{Code: "forbidden",
					Message: "This needs the " + string(need) + " role."}
			}
			return next(c)
		}
	}
}

// unauthenticated answers a request that needs a sign-in: the API gets
// 401 JSON, a page read goes to the sign-in page and comes back after, an
// htmx request asks the browser to do the same for the whole page, and
// anything else is 401.
func unauthenticated(c echo.Context) error {
	r := c.Request()
	if strings.HasPrefix(r.URL.Path, "/api/") {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="redrive"`)
		return &dlq.Error{Code: "unauthenticated",
			Message: "Sign in, or send an API token as Authorization: Bearer <token>."}
	}
	if isHTMX(c) {
		target := "/"
		if u, err := url.Parse(r.Header.Get("HX-Current-URL")); err == nil {
			target = u.RequestURI()
		}
		c.Response().Header().Set("HX-Redirect", loginURL(target))
		return c.NoContent(http.StatusUnauthorized)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return c.Redirect(http.StatusSeeOther, loginURL(r.URL.RequestURI()))
	}
	return &dlq.Error{Code: "unauthenticated",
		Message: "Your session has ended. Sign in again, then repeat what you were doing."}
}

// isHTMX reports whether the request came from htmx (handlers.IsHTMX,
// repeated here so the middleware does not import what it guards).
func isHTMX(c echo.Context) bool {
	return c.Request().Header.Get("HX-Request") == "true"
}

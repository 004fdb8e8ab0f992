package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
)

// authStore is what authentication reads on every request.
type authStore interface {
	SessionUser(ctx context.Context, id int64, sidHash []byte) (dlq.User, bool, error)
	UserByName(ctx context.Context, name string) (dlq.User, error)
	UserByToken(ctx context.Context, hash []byte, now time.Time) (dlq.User, dlq.Token, error)
	// Changes counts the changes to users and tokens made through this
	// store: the token cache's answers hold while it stays the same.
	Changes() uint64
}

// authenticator finds out who is making a request: a bearer token, else a
// trusted proxy's SSO header, else a session cookie, else nobody. It only
// establishes identity; access (access.go) decides what the identity may do.
type authenticator struct {
	store    authStore
	sessions *Sessions
	trust    ProxyTrust
	cfg      Config
	logger   *slog.Logger
	// quiet reports the paths that need nobody (access.quiet).
	quiet func(path string) bool
	// tokens remembers who recently used tokens are, for TokenWindow.
	tokens tokenCache
}

func (a *authenticator) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// Probes, metrics (MetricsGuard has its own token) and static files
		// need nobody: no database lookup for each of them.
		if a.quiet(c.Path()) {
			return next(c)
		}
		r := c.Request()
		if token, ok := bearerToken(r); ok {
			p, err := a.fromToken(r.Context(), token)
			if err != nil {
				return err
			}
			principal.Set(c, p)
			return next(c)
		}
		if p, ok, err := a.fromProxy(c); err != nil {
			return err
		} else if ok {
			principal.Set(c, p)
			// The proxy says who it is; the session cookie, if any, only
			// carries the secret the CSRF token is tied to.
			if d, state := a.sessions.load(r); state == validSession {
				a.sessions.remember(c, d)
			}
			return next(c)
		}
		if err := a.fromSession(c); err != nil {
			return err
		}
		return next(c)
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

var errBadToken = &dlq.Error{Code: "invalid_token",
	Message: "The API token is unknown or revoked, or its user is disabled."}

// fromToken: a token that was sent but does not work is an error, never a
// fall back to anonymous, so a client learns at once its token is bad. A
// token that worked is believed for TokenWindow without a lookup.
func (a *authenticator) fromToken(ctx context.Context, token string) (principal.Principal, error) {
	hash, now, changes := dlq.HashToken(token), a.cfg.Now(), a.store.Changes()
	if p, ok := a.tokens.get(hash, now, changes); ok {
		return p, nil
	}
	u, t, err := a.store.UserByToken(ctx, hash, now)
	if errors.Is(err, dlq.ErrNotFound) {
		return principal.Principal{}, errBadToken
	}
	if err != nil {
		return principal.Principal{}, err
	}
	p := principal.Principal{Name: u.Name, Role: u.Role, Via: principal.ViaToken, Sources: t.Sources}
	a.tokens.put(hash, p, now, changes)
	return p, nil
}

// fromProxy believes the SSO header only from a trusted proxy's address.
// The same header from anywhere else is ignored: it is what an attacker
// would send. A local user of the same name who is disabled is refused,
// which gives admins a way to shut someone out without the SSO provider.
func (a *authenticator) fromProxy(c echo.Context) (principal.Principal, bool, error) {
	r := c.Request()
	if a.cfg.AuthHeader == "" {
		return principal.Principal{}, false, nil
	}
	name := strings.TrimSpace(r.Header.Get(a.cfg.AuthHeader))
	if name == "" {
		return principal.Principal{}, false, nil
	}
	if !a.trust.Trusted(r) {
		a.logger.Debug("ignored the SSO header from an untrusted address", "remote_addr", r.RemoteAddr)
		return principal.Principal{}, false, nil
	}
	if !dlq.ValidUserName(name) {
		return principal.Principal{}, false, &dlq.Error{Code: "forbidden",
			Message: "The sign-in proxy named a user this console cannot accept."}
	}
	u, err := a.store.UserByName(r.Context(), name)
	switch {
	case err == nil && !u.Active():
		return principal.Principal{}, false, &dlq.Error{Code: "disabled",
			Message: "This account is disabled in Redrive."}
	case err != nil && !errors.Is(err, dlq.ErrNotFound):
		if dlq.IsUnavailable(err) {
			// The trusted proxy names the user and the configuration
			// their role; only whether they are disabled here is unknown.
			principal.SetUnverified(c, principal.Unverified{Name: name, Role: a.proxyRole(name)})
		}
		return principal.Principal{}, false, err
	}
	return principal.Principal{Name: name, Role: a.proxyRole(name), Via: principal.ViaProxy}, true, nil
}

// proxyRole is the role the configuration gives a user signed in by the
// proxy.
func (a *authenticator) proxyRole(name string) dlq.Role {
	role, ok := a.cfg.ProxyRoles[strings.ToLower(name)]
	if !ok {
		role = a.cfg.ProxyDefaultRole
	}
	return role
}

// fromSession signs the request in from its session cookie, if the cookie
// is genuine and current, was not signed out, and its user is still active
// with the same session epoch. Anything else clears the cookie: the
// requester is signed out. A signed-out session (no user) is kept as it
// is, for the CSRF token of the sign-in form.
func (a *authenticator) fromSession(c echo.Context) error {
	d, state := a.sessions.load(c.Request())
	switch state {
	case noSession:
		return nil
	case invalidSession:
		a.sessions.clear(c)
		return nil
	}
	if d.UserID == 0 {
		a.sessions.remember(c, d)
		return a.sessions.touch(c, d)
	}
	u, revoked, err := a.store.SessionUser(c.Request().Context(), d.UserID, sidHash(d.SID))
	if errors.Is(err, dlq.ErrNotFound) || (err == nil && (revoked || !u.Active() || u.SessionEpoch != d.Epoch)) {
		a.sessions.clear(c)
		return nil
	}
	if err != nil {
		if dlq.IsUnavailable(err) {
			principal.SetUnverified(c, principal.Unverified{Name: d.Name, Role: dlq.Role(d.Role)})
		}
		return err
	}
	principal.Set(c, principal.Principal{Name: u.Name, Role: u.Role, Via: principal.ViaSession})
	if d.Name != u.Name || d.Role != string(u.Role) {
		// Renamed, a new role, or a cookie from before they were kept:
		// the cookie is rewritten now, not at the next minute's touch.
		d.Name, d.Role, d.SeenAt = u.Name, string(u.Role), a.sessions.now()
		a.sessions.remember(c, d)
		return a.sessions.write(c, d)
	}
	a.sessions.remember(c, d)
	return a.sessions.touch(c, d)
}

// MetricsGuard requires the metrics token on /metrics when one is set. It
// is compared as SHA-256 digests in constant time, so neither its content
// nor its length leaks through timing.
func MetricsGuard(token string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token == "" {
				return next(c)
			}
			got, _ := bearerToken(c.Request())
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="redrive metrics"`)
				return echo.NewHTTPError(http.StatusUnauthorized, "metrics need the metrics token")
			}
			return next(c)
		}
	}
}

// loginURL is the sign-in page that comes back to target afterwards.
func loginURL(target string) string {
	if target == "" || target == "/" {
		return "/login"
	}
	return "/login?" + url.Values{"next": {target}}.Encode()
}

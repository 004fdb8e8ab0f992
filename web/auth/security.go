// Package auth decides who is asking and what they may do: sessions in
// signed, encrypted cookies, sign-in under a throttle, API tokens, a trusted
// proxy's SSO header, CSRF protection and the default-deny access rules.
// The web package puts its middleware in order and mounts the routes.
package auth

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/access"
)

// Security is the access-control machinery the server wires in: who trusts
// which proxy, sessions, authentication, the access policy, sign-in and
// the argument masker.
type Security struct {
	trust    ProxyTrust
	sessions *Sessions
	auth     *authenticator
	acl      *accessPolicy
	signIn   *SignIn
	masker   mask.Policy
	csrf     echo.MiddlewareFunc
}

// New builds the machinery for cfg, which must have passed Validate.
func New(store *access.Store, cfg Config, logger *slog.Logger) *Security {
	trust := ProxyTrust{nets: cfg.TrustedProxies}
	sessions := newSessions(cfg, trust, store)
	masker, _ := mask.New(cfg.MaskKeys, cfg.MaskPatterns) // checked by cfg.Validate
	acl := newAccessPolicy()
	return &Security{
		trust:    trust,
		sessions: sessions,
		auth:     &authenticator{store: store, sessions: sessions, trust: trust, cfg: cfg, logger: logger, quiet: acl.quiet},
		acl:      acl,
		signIn:   &SignIn{store: store, throttle: cfg.Throttle, now: cfg.Now, logger: logger},
		masker:   masker,
		csrf:     csrf(sessions, acl.quiet),
	}
}

// Trust is which reverse proxies are believed.
func (s *Security) Trust() ProxyTrust { return s.trust }

// Sessions starts and ends sessions (handlers.Sessions).
func (s *Security) Sessions() *Sessions { return s.sessions }

// SignIn checks passwords under the throttle (handlers.SignInService).
func (s *Security) SignIn() *SignIn { return s.signIn }

// Masker hides sensitive argument values.
func (s *Security) Masker() mask.Policy { return s.masker }

// Public registers routes on e that need no sign-in: the only way to make
// one.
func (s *Security) Public(e *echo.Echo) PublicRoutes { return PublicRoutes{e: e, acl: s.acl} }

// Authenticate finds out who is asking (a bearer token, a trusted proxy's
// SSO header, a session cookie, or nobody) and only that. It runs after
// routing, before Authorize.
func (s *Security) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return s.auth.middleware(next)
}

// Authorize applies the access rules to whoever Authenticate found.
func (s *Security) Authorize(next echo.HandlerFunc) echo.HandlerFunc { return s.acl.middleware(next) }

// CSRF refuses state-changing requests that did not come from the
// console's own pages; it runs after Authorize.
func (s *Security) CSRF(next echo.HandlerFunc) echo.HandlerFunc { return s.csrf(next) }

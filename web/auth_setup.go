package web

import (
	"log/slog"

	"github.com/redrive/redrive/dlq"
)

// security is the access-control machinery NewServer wires in: who trusts
// which proxy, sessions, authentication, the access policy, sign-in and
// the argument masker.
type security struct {
	trust    proxyTrust
	sessions *sessionManager
	auth     *authenticator
	acl      *access
	signIn   *signIn
	masker   dlq.Masker
}

func newSecurity(store *dlq.Store, cfg AuthConfig, logger *slog.Logger) *security {
	trust := proxyTrust{nets: cfg.TrustedProxies}
	sessions := newSessionManager(cfg, trust, store)
	masker, _ := dlq.NewMaskPolicy(cfg.MaskKeys, cfg.MaskPatterns) // checked by cfg.validate
	return &security{
		trust:    trust,
		sessions: sessions,
		auth:     &authenticator{store: store, sessions: sessions, trust: trust, cfg: cfg, logger: logger},
		acl:      newAccess(),
		signIn:   &signIn{store: store, throttle: cfg.Throttle, now: cfg.Now, logger: logger},
		masker:   masker,
	}
}

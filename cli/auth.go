package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/access"
	"github.com/redrive/redrive/web/auth"
)

// The access-control side of the binary: the console's sign-in settings
// and the dev admin. The user and token commands are user.go and token.go.

// errNoSessionKey explains how to get the key serve refuses to start without.
var errNoSessionKey = errors.New("no session key: set REDRIVE_SESSION_KEYS (or --session-keys) to a secret hex key " +
	"of at least 32 bytes, for example the output of `openssl rand -hex 32`; keep it secret, and the same on every console instance")

// authConfig builds the web settings from the console's options. Outside
// dev a session key is required: an ephemeral one would sign everyone out
// at each restart and break sessions across instances, silently.
func authConfig(f flags, dev bool) (auth.Config, error) {
	keys, err := auth.ParseSessionKeys(f.str("session-keys"))
	if err != nil {
		return auth.Config{}, fmt.Errorf("--session-keys: %w", err)
	}
	if len(keys) == 0 && !dev {
		return auth.Config{}, errNoSessionKey
	}
	proxies, err := auth.ParseTrustedProxies(f.str("trusted-proxies"))
	if err != nil {
		return auth.Config{}, fmt.Errorf("--trusted-proxies: %w", err)
	}
	roles, err := auth.ParseProxyRoles(f.str("proxy-roles"))
	if err != nil {
		return auth.Config{}, fmt.Errorf("--proxy-roles: %w", err)
	}
	role := dlq.Role(f.str("proxy-default-role"))
	if !role.Valid() {
		return auth.Config{}, usagef("--proxy-default-role must be viewer, operator or admin, not %q", role)
	}
	authHeader := f.str("auth-header")
	if authHeader != "" && len(proxies) == 0 {
		return auth.Config{}, usagef("--auth-header needs --trusted-proxies: the header is believed only from those addresses")
	}
	return auth.Config{
		SessionKeys: keys, SessionLifetime: f.duration("session-lifetime"), SessionIdle: f.duration("session-idle"),
		TrustedProxies: proxies, AuthHeader: authHeader, ProxyRoles: roles, ProxyDefaultRole: role,
		MetricsToken: f.str("metrics-token"), MaskKeys: mask.ParseKeys(f.str("mask-keys")),
		MaskPatterns: mask.ParsePatterns(f.str("mask-patterns")),
	}, nil
}

// adviseFirstAdmin logs how to create the first admin when there is
// nobody to sign in as. serve never creates users by itself.
func adviseFirstAdmin(ctx context.Context, store *access.Store, logger *slog.Logger) error {
	n, err := store.CountUsers(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		logger.Warn("no users yet: nobody can sign in. Create the first admin with " +
			"`redrive user add NAME --role admin` (it asks for the password)")
	}
	return nil
}

// devAdmin is the demo admin redrive dev signs in as.
const devAdmin = "admin"

// ensureDevAdmin gives the dev admin a fresh random password (creating the
// user the first time) and returns it, to be printed: a fixed password
// would work on every dev database anyone ever left reachable.
func ensureDevAdmin(ctx context.Context, store *access.Store) (string, error) {
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		return "", err
	}
	password := strings.TrimPrefix(secret, dlq.TokenPrefix)[:16]
	hash, err := dlq.HashPassword(devAdmin, password, 0)
	if err != nil {
		return "", err
	}
	actor, now := dlq.Actor{Name: "redrive dev"}, time.Now()
	_, err = store.SetPassword(ctx, devAdmin, hash, dlq.UserChange{Actor: actor, Now: now})
	if errors.Is(err, dlq.ErrNotFound) {
		_, err = store.CreateUser(ctx, dlq.NewUser{Name: devAdmin, Role: dlq.RoleAdmin, PasswordHash: hash, Actor: actor, Now: now})
	}
	if err != nil {
		return "", fmt.Errorf("dev admin: %w", err)
	}
	return password, nil
}

// cliActor names the person at the terminal in the audit trail.
func cliActor(getenv func(string) string) dlq.Actor {
	if who := getenv("USER"); who != "" {
		return dlq.Actor{Name: "cli:" + who}
	}
	return dlq.Actor{Name: "cli"}
}

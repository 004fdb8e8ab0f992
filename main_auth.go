package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web"
)

// The access-control side of the binary: the console's sign-in flags, the
// user and token commands, the dev admin.

// authFlags are the console's access-control settings.
type authFlags struct {
	sessionKeys      string
	sessionLifetime  time.Duration
	sessionIdle      time.Duration
	trustedProxies   string
	authHeader       string
	proxyRoles       string
	proxyDefaultRole string
	metricsToken     string
	maskKeys         string
}

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.sessionKeys, "session-keys", "", "comma-separated hex keys that sign session cookies; the first signs, all verify; make one with `openssl rand -hex 32` (env REDRIVE_SESSION_KEYS; required by serve)")
	fs.DurationVar(&a.sessionLifetime, "session-lifetime", web.DefaultSessionLifetime, "a session ends this long after sign-in (env REDRIVE_SESSION_LIFETIME)")
	fs.DurationVar(&a.sessionIdle, "session-idle", web.DefaultSessionIdle, "a session ends after this long without a request (env REDRIVE_SESSION_IDLE)")
	fs.StringVar(&a.trustedProxies, "trusted-proxies", "", "CIDRs of reverse proxies whose X-Forwarded-* and auth header are believed (env REDRIVE_TRUSTED_PROXIES)")
	fs.StringVar(&a.authHeader, "auth-header", "", "header in which a trusted proxy names the signed-in user, e.g. X-Forwarded-Email (env REDRIVE_AUTH_HEADER; empty: no SSO)")
	fs.StringVar(&a.proxyRoles, "proxy-roles", "", "roles of SSO users: alice@x.com=admin,bob@x.com=operator (env REDRIVE_PROXY_ROLES)")
	fs.StringVar(&a.proxyDefaultRole, "proxy-default-role", string(dlq.RoleViewer), "role of SSO users not in --proxy-roles (env REDRIVE_PROXY_DEFAULT_ROLE)")
	fs.StringVar(&a.metricsToken, "metrics-token", "", "when set, /metrics requires Authorization: Bearer with this value (env REDRIVE_METRICS_TOKEN)")
	fs.StringVar(&a.maskKeys, "mask-keys", strings.Join(dlq.DefaultMaskKeys, ","), "argument keys whose values are hidden: comma-separated, case-insensitive substrings (env REDRIVE_MASK_KEYS)")
}

// errNoSessionKey explains how to get the key serve refuses to start without.
var errNoSessionKey = errors.New("no session key: set REDRIVE_SESSION_KEYS (or --session-keys) to a secret hex key " +
	"of at least 32 bytes, for example the output of `openssl rand -hex 32`; keep it secret, and the same on every console instance")

// config builds the web settings. Outside dev a session key is required:
// an ephemeral one would sign everyone out at each restart and break
// sessions across instances, silently.
func (a *authFlags) config(dev bool) (web.AuthConfig, error) {
	keys, err := web.ParseSessionKeys(a.sessionKeys)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--session-keys: %w", err)
	}
	if len(keys) == 0 && !dev {
		return web.AuthConfig{}, errNoSessionKey
	}
	proxies, err := web.ParseTrustedProxies(a.trustedProxies)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--trusted-proxies: %w", err)
	}
	roles, err := web.ParseProxyRoles(a.proxyRoles)
	if err != nil {
		return web.AuthConfig{}, fmt.Errorf("--proxy-roles: %w", err)
	}
	role := dlq.Role(a.proxyDefaultRole)
	if !role.Valid() {
		return web.AuthConfig{}, usagef("--proxy-default-role must be viewer, operator or admin, not %q", a.proxyDefaultRole)
	}
	if a.authHeader != "" && len(proxies) == 0 {
		return web.AuthConfig{}, usagef("--auth-header needs --trusted-proxies: the header is believed only from those addresses")
	}
	return web.AuthConfig{
		SessionKeys: keys, SessionLifetime: a.sessionLifetime, SessionIdle: a.sessionIdle,
		TrustedProxies: proxies, AuthHeader: a.authHeader, ProxyRoles: roles, ProxyDefaultRole: role,
		MetricsToken: a.metricsToken, MaskKeys: dlq.ParseMaskKeys(a.maskKeys),
	}, nil
}

// adviseFirstAdmin logs how to create the first admin when there is
// nobody to sign in as. serve never creates users by itself.
func adviseFirstAdmin(ctx context.Context, store *dlq.Store, logger *slog.Logger) error {
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
func ensureDevAdmin(ctx context.Context, store *dlq.Store) (string, error) {
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		return "", err
	}
	password := strings.TrimPrefix(secret, dlq.TokenPrefix)[:16]
	hash, err := dlq.HashPassword(password, 0)
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

// --- user ------------------------------------------------------------------

const userUsage = `Usage:
  redrive user add NAME [--role viewer|operator|admin]   add a user (asks for the password)
  redrive user passwd NAME                               set a new password; ends their sessions
  redrive user role NAME --role ROLE                     change a user's role
  redrive user disable NAME                              stop a user signing in; ends their sessions and tokens
  redrive user enable NAME                               let a disabled user sign in again
  redrive user list                                      list users

Passwords are read from the terminal without echo, or from the first line
of standard input when it is not a terminal; never from a flag, which
would leave them in shell history and the process list.`

func runUser(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return userCommand{in: os.Stdin, getenv: getenv, stdout: stdout, stderr: stderr}.run(ctx, args)
}

// userCommand is `redrive user`, with its standard input made explicit.
type userCommand struct {
	in     io.Reader
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

func (u userCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(u.stderr, userUsage)
		return usagef("redrive user needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("user "+sub, userUsage, u.stderr)
	var c common
	c.register(fs)
	role := fs.String("role", "", "viewer, operator or admin")
	var name string
	if sub != "list" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(u.stderr, userUsage)
			return usagef("name the user first: redrive user %s NAME", sub)
		}
		name, args = args[0], args[1:]
	}
	if err := parse(fs, args, u.getenv); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	store := dlq.NewStore(db)
	change := dlq.UserChange{Actor: cliActor(u.getenv), Now: time.Now()}
	switch sub {
	case "add":
		r := dlq.Role(*role)
		if r == "" {
			r = dlq.RoleViewer
		}
		if !r.Valid() {
			return usagef("--role must be viewer, operator or admin, not %q", *role)
		}
		hash, err := u.newPassword(name)
		if err != nil {
			return err
		}
		if _, err := store.CreateUser(ctx, dlq.NewUser{Name: name, Role: r, PasswordHash: hash, Actor: change.Actor, Now: change.Now}); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "added %s (%s)\n", name, r)
	case "passwd":
		hash, err := u.newPassword(name)
		if err != nil {
			return err
		}
		if _, err := store.SetPassword(ctx, name, hash, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "set a new password for %s; their sessions have ended\n", name)
	case "role":
		if _, err := store.SetRole(ctx, name, dlq.Role(*role), change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "%s is now %s\n", name, *role)
	case "disable":
		if _, err := store.DisableUser(ctx, name, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "disabled %s; their sessions and tokens stopped working\n", name)
	case "enable":
		if _, err := store.EnableUser(ctx, name, change); err != nil {
			return err
		}
		fmt.Fprintf(u.stdout, "enabled %s\n", name)
	case "list":
		return listUsers(ctx, store, u.stdout)
	default:
		fmt.Fprintln(u.stderr, userUsage)
		return usagef("unknown user subcommand %q", sub)
	}
	return nil
}

// newPassword reads a new password for name and hashes it: twice, without
// echo, from a terminal; one line from anything else (a pipe, a file).
func (u userCommand) newPassword(name string) ([]byte, error) {
	var pw string
	if f, ok := u.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(u.stderr, "New password for %s: ", name)
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(u.stderr, "Again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(again) {
			return nil, errors.New("the passwords differ; nothing changed")
		}
		pw = string(first)
	} else {
		line, err := bufio.NewReader(u.in).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return nil, errors.New("no password on standard input: type it at a terminal, or pipe it in (one line)")
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	hash, err := dlq.HashPassword(pw, 0)
	if err != nil {
		return nil, err
	}
	return hash, nil
}

func listUsers(ctx context.Context, store *dlq.Store, w io.Writer) error {
	users, err := store.Users(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tCREATED")
	for _, u := range users {
		status := "active"
		if !u.Active() {
			status = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, status, u.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// cliActor names the person at the terminal in the audit trail.
func cliActor(getenv func(string) string) dlq.Actor {
	if who := getenv("USER"); who != "" {
		return dlq.Actor{Name: "cli:" + who}
	}
	return dlq.Actor{Name: "cli"}
}

// --- token -----------------------------------------------------------------

const tokenUsage = `Usage:
  redrive token create --user NAME [--name LABEL]   print a new API token, once
  redrive token revoke ID|LABEL                     revoke a token
  redrive token list                                list active tokens

A token acts with its user's role: send it as Authorization: Bearer TOKEN.
Only its SHA-256 hash is stored, so it cannot be shown again.`

func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, tokenUsage)
		return usagef("redrive token needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("token "+sub, tokenUsage, stderr)
	var c common
	c.register(fs)
	user := fs.String("user", "", "the user the token acts as (create)")
	label := fs.String("name", "", "a label to recognise the token by (create; default: user and time)")
	var ref string
	if sub == "revoke" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(stderr, tokenUsage)
			return usagef("name the token: redrive token revoke ID|LABEL")
		}
		ref, args = args[0], args[1:]
	}
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	db, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	store := dlq.NewStore(db)
	actor := cliActor(getenv)
	switch sub {
	case "create":
		if *user == "" {
			return usagef("--user is required")
		}
		secret, err := dlq.NewTokenSecret()
		if err != nil {
			return err
		}
		t, err := store.CreateToken(ctx, dlq.NewToken{UserName: *user, Label: *label, Hash: dlq.HashToken(secret), Actor: actor, Now: time.Now()})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Token %d %q for %s. It is shown only now: store it somewhere safe.\n", t.ID, t.Label, t.UserName)
		fmt.Fprintln(stdout, secret)
	case "revoke":
		t, err := store.RevokeToken(ctx, ref, actor, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked token %d %q of %s\n", t.ID, t.Label, t.UserName)
	case "list":
		tokens, err := store.Tokens(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tLABEL\tUSER\tCREATED\tLAST USED")
		for _, t := range tokens {
			last := "never"
			if t.LastUsedAt != nil {
				last = t.LastUsedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.UserName, t.CreatedAt.UTC().Format(time.RFC3339), last)
		}
		return tw.Flush()
	default:
		fmt.Fprintln(stderr, tokenUsage)
		return usagef("unknown token subcommand %q", sub)
	}
	return nil
}

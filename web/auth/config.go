package auth

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// Config is how the console decides who is asking and what they may
// do. The zero value is usable: sessions get an ephemeral key (every
// restart signs everyone out), no proxy is trusted, the default key
// patterns are masked and /metrics is open.
type Config struct {
	// SessionKeys sign and verify session cookies: the first signs, all
	// verify, so a key can be rotated by putting the new one first and
	// dropping the old one a session lifetime later. Each is at least 32
	// bytes. None: one random key for this process only.
	SessionKeys [][]byte
	// SessionLifetime ends a session this long after sign-in, however busy
	// (default 12h); SessionIdle ends it after this long without a request
	// (default 1h). Both are checked on the server from timestamps inside
	// the signed cookie, not left to the browser.
	SessionLifetime time.Duration
	SessionIdle     time.Duration

	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For, X-Forwarded-Proto and AuthHeader are believed. The
	// TCP peer decides, never a header.
	TrustedProxies []netip.Prefix
	// AuthHeader, when set with TrustedProxies, names the header in which
	// a trusted proxy (oauth2-proxy: X-Forwarded-Email) says who is signed
	// in. ProxyRoles maps names (any case) to roles; anyone else gets
	// ProxyDefaultRole (default viewer).
	AuthHeader       string
	ProxyRoles       map[string]dlq.Role
	ProxyDefaultRole dlq.Role

	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// MaskKeys are the argument key patterns whose values are hidden;
	// nil: mask.DefaultKeys. An empty, non-nil list masks nothing.
	MaskKeys []string
	// MaskPatterns are regular expressions (Go syntax) hidden in error
	// messages and tracebacks besides the masked argument values; see
	// mask.New.
	MaskPatterns []string

	// Throttle slows and locks repeated failed sign-ins.
	Throttle Throttle
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Session defaults.
const (
	DefaultSessionLifetime = 12 * time.Hour
	DefaultSessionIdle     = time.Hour
	minSessionKeyBytes     = 32
)

// Validate fills in the defaults and checks the rest.
func (a *Config) Validate() error {
	a.SessionLifetime = cmp.Or(a.SessionLifetime, DefaultSessionLifetime)
	a.SessionIdle = cmp.Or(a.SessionIdle, DefaultSessionIdle)
	a.ProxyDefaultRole = cmp.Or(a.ProxyDefaultRole, dlq.RoleViewer)
	if a.Now == nil {
		a.Now = time.Now
	}
	a.Throttle = a.Throttle.Defaults()
	if a.MaskKeys == nil {
		a.MaskKeys = mask.DefaultKeys
	}
	if _, err := mask.New(a.MaskKeys, a.MaskPatterns); err != nil {
		return fmt.Errorf("web: %w", err)
	}
	if len(a.SessionKeys) == 0 {
		key := make([]byte, minSessionKeyBytes)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
		a.SessionKeys = [][]byte{key}
	}
	for i, k := range a.SessionKeys {
		if len(k) < minSessionKeyBytes {
			return fmt.Errorf("web: session key %d is %d bytes; each needs at least %d", i+1, len(k), minSessionKeyBytes)
		}
	}
	if !a.ProxyDefaultRole.Valid() {
		return fmt.Errorf("web: proxy default role %q is not viewer, operator or admin", a.ProxyDefaultRole)
	}
	if a.AuthHeader != "" && len(a.TrustedProxies) == 0 {
		return errors.New("web: an auth header without trusted proxies would never be believed; set the trusted proxies too")
	}
	return nil
}

// ParseSessionKeys reads REDRIVE_SESSION_KEYS: comma-separated hex keys of
// at least 32 bytes each, as `openssl rand -hex 32` makes.
func ParseSessionKeys(s string) ([][]byte, error) {
	var keys [][]byte
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, err := hex.DecodeString(part)
		if err != nil {
			return nil, fmt.Errorf("session key %d is not hex; make one with `openssl rand -hex 32`", len(keys)+1)
		}
		if len(k) < minSessionKeyBytes {
			return nil, fmt.Errorf("session key %d is %d bytes; make one of %d with `openssl rand -hex 32`", len(keys)+1, len(k), minSessionKeyBytes)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ParseTrustedProxies reads REDRIVE_TRUSTED_PROXIES: comma-separated CIDRs
// or single addresses.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			addr, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", part, err)
			}
			out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ParseProxyRoles reads REDRIVE_PROXY_ROLES: "alice@x.com=admin,bob@x.com=operator".
func ParseProxyRoles(s string) (map[string]dlq.Role, error) {
	out := map[string]dlq.Role{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, role, ok := strings.Cut(part, "=")
		r := dlq.Role(strings.TrimSpace(role))
		if !ok || strings.TrimSpace(name) == "" || !r.Valid() {
			return nil, fmt.Errorf("proxy role %q: write name=role, the role viewer, operator or admin", part)
		}
		out[strings.ToLower(strings.TrimSpace(name))] = r
	}
	return out, nil
}

package auth

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/redrive/redrive/principal"
)

// TokenWindow is how long the console goes on believing what it last read
// of an API token (its user, their role, the token not revoked) without
// reading it again: an API client's requests come in runs, and the lookup
// was one of the two round trips of a letter's JSON. A token revoked, a
// user disabled or a role lowered through this console takes effect at
// the next request (the access room's change count, access.Store.Changes);
// through the CLI or another console, within TokenWindow.
const TokenWindow = 2 * time.Second

// maxCachedTokens bounds the tokens remembered at once: a console has a
// few API clients, and a flood of distinct tokens (all but a few unknown,
// which are never remembered) cannot grow it further.
const maxCachedTokens = 1024

// tokenCache remembers, for TokenWindow, who each recently used API token
// is. Only tokens that worked are remembered: an unknown or revoked one
// is looked up every time, and fails every time.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedToken
}

// cachedToken is a token's principal as read at read, when the access
// room's change count was changes.
type cachedToken struct {
	p       principal.Principal
	read    time.Time
	changes uint64
}

// get returns the principal of the token whose hash is hash, if it was
// read less than TokenWindow before now and nothing changed users or
// tokens through this console since.
func (c *tokenCache) get(hash []byte, now time.Time, changes uint64) (principal.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[[sha256.Size]byte(hash)]
	if !ok || e.changes != changes || now.Sub(e.read) >= TokenWindow || now.Before(e.read) {
		return principal.Principal{}, false
	}
	return e.p, true
}

// put remembers p for the token whose hash is hash, read at now when the
// change count was changes (taken before the read, so that a change
// committed during it makes the entry stale at once). When the cache is
// full, the entries past their window go first; if none has, p is not
// remembered.
func (c *tokenCache) put(hash []byte, p principal.Principal, now time.Time, changes uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[[sha256.Size]byte]cachedToken)
	}
	if len(c.entries) >= maxCachedTokens {
		for k, e := range c.entries {
			if now.Sub(e.read) >= TokenWindow || now.Before(e.read) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedTokens {
			return
		}
	}
	c.entries[[sha256.Size]byte(hash)] = cachedToken{p: p, read: now, changes: changes}
}

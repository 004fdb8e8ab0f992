package auth

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// The session cookie's name: over HTTPS with the __Host- prefix, which
// browsers accept only with Secure, Path=/ and no Domain, so that no other
// host (a sibling subdomain, a man in the middle on plain HTTP) can set or
// overwrite it. Over plain HTTP the prefix would be refused.
const (
	sessionCookie       = "redrive_session"
	secureSessionCookie = "__Host-" + sessionCookie
)

// seenResolution is how stale the last-seen time in a session may get
// before a request rewrites the cookie: idle timeouts of an hour do not
// need a new cookie on every request.
const seenResolution = time.Minute

// sidBytes is the size of a session's secret.
const sidBytes = 32

// Sessions keeps sessions in a gorilla/sessions cookie store. The
// cookie holds the user's id, their session epoch, two times and a random
// secret: who the user is and what they may do is read from the database
// on every request, so that disabling someone or changing their role takes
// effect at once even though the session itself lives in the browser.
//
// A browser that has not signed in gets a session too, with no user: its
// secret is what the sign-in form's CSRF token is tied to.
type Sessions struct {
	store    *sessions.CookieStore
	revoker  sessionRevoker
	lifetime time.Duration
	idle     time.Duration
	trust    ProxyTrust
	now      func() time.Time
}

// sessionRevoker records a sign-out on the server.
type sessionRevoker interface {
	RevokeSession(ctx context.Context, sidHash []byte, userID int64, expires, now time.Time) error
}

// sessionData is what a session cookie holds.
type sessionData struct {
	UserID int64 // 0: signed out
	Epoch  int64
	// SID is the session's secret: the CSRF token is an HMAC under it, and
	// its SHA-256 names the session when it is signed out.
	SID        []byte
	SignedInAt time.Time
	SeenAt     time.Time
	// Name and Role are who the user was when the database last confirmed
	// them (sign-in, or a request since). They are shown, marked as such,
	// only when the database cannot be asked; they never sign anyone in.
	Name, Role string
}

func newSessions(cfg Config, trust ProxyTrust, revoker sessionRevoker) *Sessions {
	// Each configured key yields an HMAC key and an AES-256 key, derived
	// separately (HKDF, one info string each) so neither is used for two
	// purposes. securecookie encodes with the first pair and decodes with
	// any: key rotation. After every key's HKDF pairs come its legacy
	// pairs, which only ever decode: cookies signed before the switch to
	// HKDF stay valid until they expire (at most one session lifetime),
	// instead of signing everyone out at the upgrade; each rewrite of such a
	// cookie (sign-in, the once-a-minute touch) signs it with HKDF.
	var pairs [][]byte
	for _, k := range cfg.SessionKeys {
		pairs = append(pairs, deriveKey(k, signingPurpose), deriveKey(k, encryptionPurpose))
	}
	for _, k := range cfg.SessionKeys {
		pairs = append(pairs, legacyDeriveKey(k, signingPurpose), legacyDeriveKey(k, encryptionPurpose))
	}
	store := sessions.NewCookieStore(pairs...)
	// The codecs refuse cookies older than the lifetime on their own too.
	store.MaxAge(int(cfg.SessionLifetime / time.Second))
	return &Sessions{store: store, revoker: revoker, lifetime: cfg.SessionLifetime, idle: cfg.SessionIdle, trust: trust, now: cfg.Now}
}

// What each derived key is for: HKDF's info, and the legacy derivation's
// message.
const (
	signingPurpose    = "redrive session signing"
	encryptionPurpose = "redrive session encryption"
)

// deriveKey is the 32-byte key for purpose from a configured session key
// (HKDF-SHA256, RFC 5869, no salt: the configured keys are random already).
func deriveKey(key []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, key, nil, purpose, sha256.Size)
	if err != nil {
		// Only a length over 255 hash sizes, or a FIPS-mode key under 112
		// bits, is refused; Config.Validate allows neither.
		panic(fmt.Sprintf("derive session key: %v", err))
	}
	return k
}

// legacyDeriveKey is the derivation before HKDF, HMAC-SHA256(key,
// purpose). No HKDF call gives the same bytes (HKDF-Expand appends a
// counter byte to the info), so it is kept to verify the cookies it signed.
func legacyDeriveKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// cookieName is the session cookie's name for r.
func (m *Sessions) cookieName(r *http.Request) string {
	if m.trust.HTTPS(r) {
		return secureSessionCookie
	}
	return sessionCookie
}

// sessionState is what load found.
type sessionState int

const (
	noSession      sessionState = iota // no cookie at all
	invalidSession                     // tampered, signed with an unknown key, expired or idle
	validSession
)

// load reads and checks the session cookie. Only its signature, contents
// and times: whether its user still holds it is the authenticator's call.
func (m *Sessions) load(r *http.Request) (sessionData, sessionState) {
	name := m.cookieName(r)
	if _, err := r.Cookie(name); err != nil {
		return sessionData{}, noSession
	}
	s, err := m.store.New(r, name)
	if err != nil || s.IsNew {
		return sessionData{}, invalidSession
	}
	uid, ok1 := s.Values["uid"].(int64)
	epoch, ok2 := s.Values["epoch"].(int64)
	iat, ok3 := s.Values["iat"].(int64)
	seen, ok4 := s.Values["seen"].(int64)
	sid, ok5 := s.Values["sid"].([]byte)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(sid) != sidBytes {
		return sessionData{}, invalidSession
	}
	d := sessionData{UserID: uid, Epoch: epoch, SID: sid, SignedInAt: time.Unix(iat, 0), SeenAt: time.Unix(seen, 0)}
	// Cookies written before these were kept have neither: unknown then.
	d.Name, _ = s.Values["name"].(string)
	d.Role, _ = s.Values["role"].(string)
	if !m.fresh(d, m.now()) {
		return sessionData{}, invalidSession
	}
	return d, validSession
}

// fresh reports whether a session is within both its lifetime and its
// idle timeout at now.
func (m *Sessions) fresh(d sessionData, now time.Time) bool {
	return now.Before(d.SignedInAt.Add(m.lifetime)) && now.Before(d.SeenAt.Add(m.idle)) &&
		!d.SignedInAt.After(now.Add(time.Minute)) // not from the future (clock skew aside)
}

// write sets the session cookie to d.
func (m *Sessions) write(c echo.Context, d sessionData) error {
	r := c.Request()
	s := sessions.NewSession(m.store, m.cookieName(r))
	s.Values["uid"] = d.UserID
	s.Values["epoch"] = d.Epoch
	s.Values["sid"] = d.SID
	s.Values["iat"] = d.SignedInAt.Unix()
	s.Values["seen"] = d.SeenAt.Unix()
	if d.Name != "" {
		s.Values["name"], s.Values["role"] = d.Name, d.Role
	}
	left := d.SignedInAt.Add(m.lifetime).Sub(m.now())
	s.Options = m.options(r, max(int(left/time.Second), 1))
	dropSetCookie(c, s.Name())
	return m.store.Save(r, c.Response(), s)
}

func (m *Sessions) options(r *http.Request, maxAge int) *sessions.Options {
	return &sessions.Options{
		Path: "/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: m.trust.HTTPS(r),
	}
}

// dropSetCookie takes back any Set-Cookie for name this response has so
// far: clearing a stale session and starting a new one in the same
// response must leave the browser one instruction, not two.
func dropSetCookie(c echo.Context, name string) {
	h := c.Response().Header()
	var kept []string
	for _, v := range h.Values("Set-Cookie") {
		if !strings.HasPrefix(v, name+"=") {
			kept = append(kept, v)
		}
	}
	h.Del("Set-Cookie")
	for _, v := range kept {
		h.Add("Set-Cookie", v)
	}
}

// clear tells the browser to forget the session cookie.
func (m *Sessions) clear(c echo.Context) {
	r := c.Request()
	dropSetCookie(c, m.cookieName(r))
	c.SetCookie(&http.Cookie{Name: m.cookieName(r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: m.trust.HTTPS(r)})
	c.Set(sessionContextKey, nil)
}

// touch records activity, rewriting the cookie at most once a minute.
func (m *Sessions) touch(c echo.Context, d sessionData) error {
	now := m.now()
	if now.Sub(d.SeenAt) < seenResolution {
		return nil
	}
	d.SeenAt = now
	return m.write(c, d)
}

// sessionContextKey is where the request's current session is kept.
const sessionContextKey = "redrive.session"

// remember makes d the request's current session.
func (m *Sessions) remember(c echo.Context, d sessionData) { c.Set(sessionContextKey, &d) }

// current is the request's session, if the authenticator found a good one.
func (m *Sessions) current(c echo.Context) (sessionData, bool) {
	d, ok := c.Get(sessionContextKey).(*sessionData)
	if !ok || d == nil {
		return sessionData{}, false
	}
	return *d, true
}

func newSID() []byte {
	b := make([]byte, sidBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

func sidHash(sid []byte) []byte {
	h := sha256.Sum256(sid)
	return h[:]
}

// startSignedOut gives a browser without a session a signed-out one, for
// the CSRF token of the forms it is about to be shown.
func (m *Sessions) startSignedOut(c echo.Context) (sessionData, error) {
	now := m.now()
	d := sessionData{SID: newSID(), SignedInAt: now, SeenAt: now}
	if err := m.write(c, d); err != nil {
		return sessionData{}, err
	}
	m.remember(c, d)
	return d, nil
}

// Start signs u in: a brand-new session with a new secret, whatever cookie
// came with the request, so a session planted before sign-in is never
// promoted (no fixation), and the CSRF token of the signed-out session is
// worth nothing afterwards.
func (m *Sessions) Start(c echo.Context, u dlq.User) error {
	now := m.now()
	return m.write(c, sessionData{UserID: u.ID, Epoch: u.SessionEpoch, SID: newSID(), SignedInAt: now, SeenAt: now,
		Name: u.Name, Role: string(u.Role)})
}

// End signs the requester out: the session is recorded as revoked, so a
// copy of its cookie is signed out too at its next request, and the
// browser is told to forget the cookie.
func (m *Sessions) End(c echo.Context) error {
	if d, ok := m.current(c); ok && d.UserID != 0 {
		err := m.revoker.RevokeSession(c.Request().Context(), sidHash(d.SID), d.UserID, d.SignedInAt.Add(m.lifetime), m.now())
		if err != nil {
			return fmt.Errorf("sign out: %w", err)
		}
	}
	m.clear(c)
	return nil
}

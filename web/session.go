package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// sessionCookie names the signed, encrypted cookie that holds a session.
const sessionCookie = "redrive_session"

// seenResolution is how stale the last-seen time in a session may get
// before a request rewrites the cookie: idle timeouts of an hour do not
// need a new cookie on every request.
const seenResolution = time.Minute

// sessionManager keeps sessions in a gorilla/sessions cookie store. The
// cookie holds only the user's id, their session epoch and two times;
// who the user is and what they may do is read from the database on every
// request, so that disabling someone or changing their role takes effect
// at once even though the session itself lives in the browser.
type sessionManager struct {
	store    *sessions.CookieStore
	lifetime time.Duration
	idle     time.Duration
	trust    proxyTrust
	now      func() time.Time
}

// sessionData is what a session cookie holds.
type sessionData struct {
	UserID     int64
	Epoch      int64
	SignedInAt time.Time
	SeenAt     time.Time
}

func newSessionManager(cfg AuthConfig, trust proxyTrust) *sessionManager {
	// Each configured key yields an HMAC key and an AES-256 key, derived
	// separately so neither is used for two purposes. securecookie encodes
	// with the first pair and decodes with any: key rotation.
	var pairs [][]byte
	for _, k := range cfg.SessionKeys {
		pairs = append(pairs, derive(k, "redrive session signing"), derive(k, "redrive session encryption"))
	}
	store := sessions.NewCookieStore(pairs...)
	// The codecs refuse cookies older than the lifetime on their own too.
	store.MaxAge(int(cfg.SessionLifetime / time.Second))
	return &sessionManager{store: store, lifetime: cfg.SessionLifetime, idle: cfg.SessionIdle, trust: trust, now: cfg.Now}
}

func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// sessionState is what load found.
type sessionState int

const (
	noSession      sessionState = iota // no cookie at all
	invalidSession                     // tampered, signed with an unknown key, expired or idle
	validSession
)

// load reads and checks the session cookie.
func (m *sessionManager) load(r *http.Request) (sessionData, sessionState) {
	if _, err := r.Cookie(sessionCookie); err != nil {
		return sessionData{}, noSession
	}
	s, err := m.store.New(r, sessionCookie)
	if err != nil || s.IsNew {
		return sessionData{}, invalidSession
	}
	uid, ok1 := s.Values["uid"].(int64)
	epoch, ok2 := s.Values["epoch"].(int64)
	iat, ok3 := s.Values["iat"].(int64)
	seen, ok4 := s.Values["seen"].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return sessionData{}, invalidSession
	}
	d := sessionData{UserID: uid, Epoch: epoch, SignedInAt: time.Unix(iat, 0), SeenAt: time.Unix(seen, 0)}
	if !m.fresh(d, m.now()) {
		return sessionData{}, invalidSession
	}
	return d, validSession
}

// fresh reports whether a session is within both its lifetime and its
// idle timeout at now.
func (m *sessionManager) fresh(d sessionData, now time.Time) bool {
	return now.Before(d.SignedInAt.Add(m.lifetime)) && now.Before(d.SeenAt.Add(m.idle)) &&
		!d.SignedInAt.After(now.Add(time.Minute)) // not from the future (clock skew aside)
}

// write sets the session cookie to d.
func (m *sessionManager) write(c echo.Context, d sessionData) error {
	s := sessions.NewSession(m.store, sessionCookie)
	s.Values["uid"] = d.UserID
	s.Values["epoch"] = d.Epoch
	s.Values["iat"] = d.SignedInAt.Unix()
	s.Values["seen"] = d.SeenAt.Unix()
	left := d.SignedInAt.Add(m.lifetime).Sub(m.now())
	s.Options = m.options(c.Request(), max(int(left/time.Second), 1))
	return m.store.Save(c.Request(), c.Response(), s)
}

func (m *sessionManager) options(r *http.Request, maxAge int) *sessions.Options {
	return &sessions.Options{
		Path: "/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: m.trust.https(r),
	}
}

// clear tells the browser to forget the session cookie.
func (m *sessionManager) clear(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: m.trust.https(c.Request())})
}

// touch records activity, rewriting the cookie at most once a minute.
func (m *sessionManager) touch(c echo.Context, d sessionData) error {
	now := m.now()
	if now.Sub(d.SeenAt) < seenResolution {
		return nil
	}
	d.SeenAt = now
	return m.write(c, d)
}

// Start signs u in: a brand-new session, whatever cookie came with the
// request, so a session planted before sign-in is never promoted (no
// fixation). The CSRF cookie is dropped too: the next page gets a fresh
// token for the new session.
func (m *sessionManager) Start(c echo.Context, u dlq.User) error {
	now := m.now()
	m.dropCSRF(c)
	return m.write(c, sessionData{UserID: u.ID, Epoch: u.SessionEpoch, SignedInAt: now, SeenAt: now})
}

// End signs the requester out.
func (m *sessionManager) End(c echo.Context) error {
	m.clear(c)
	m.dropCSRF(c)
	return nil
}

func (m *sessionManager) dropCSRF(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: csrfCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: m.trust.https(c.Request())})
}

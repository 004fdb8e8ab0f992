package auth

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"
)

// TestSessionKeyDerivation: a cookie signed with the keys of the old
// derivation (HMAC-SHA256 of the purpose) is still a valid session, and a
// cookie written now is signed with the HKDF keys only, so that the old
// derivation can be dropped once the last old cookie has expired.
func TestSessionKeyDerivation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	key := bytes.Repeat([]byte{7}, 32)
	cfg := Config{SessionKeys: [][]byte{key}, Now: func() time.Time { return now }}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := newSessions(cfg, ProxyTrust{}, nil)
	d := sessionData{UserID: 42, Epoch: 3, SID: newSID(), SignedInAt: now, SeenAt: now}

	// write signs d with a store made of the given key pairs only.
	write := func(pairs ...[]byte) *http.Cookie {
		t.Helper()
		store := sessions.NewCookieStore(pairs...)
		store.MaxAge(int(cfg.SessionLifetime / time.Second))
		s := sessions.NewSession(store, sessionCookie)
		s.Values["uid"], s.Values["epoch"], s.Values["sid"] = d.UserID, d.Epoch, d.SID
		s.Values["iat"], s.Values["seen"] = d.SignedInAt.Unix(), d.SeenAt.Unix()
		rec := httptest.NewRecorder()
		if err := store.Save(httptest.NewRequest(http.MethodGet, "/", nil), rec, s); err != nil {
			t.Fatal(err)
		}
		return rec.Result().Cookies()[0]
	}
	load := func(m *Sessions, c *http.Cookie) sessionState {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(c)
		_, state := m.load(r)
		return state
	}

	t.Run("a cookie signed the old way still signs in", func(t *testing.T) {
		old := write(legacyDeriveKey(key, signingPurpose), legacyDeriveKey(key, encryptionPurpose))
		if got := load(m, old); got != validSession {
			t.Fatalf("old cookie: state %d, want valid (%d)", got, validSession)
		}
	})

	t.Run("a new cookie is signed with the HKDF keys", func(t *testing.T) {
		rec := httptest.NewRecorder()
		c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)
		if err := m.write(c, d); err != nil {
			t.Fatal(err)
		}
		cookie := rec.Result().Cookies()[0]
		hkdfOnly := &Sessions{store: sessions.NewCookieStore(deriveKey(key, signingPurpose), deriveKey(key, encryptionPurpose)),
			lifetime: m.lifetime, idle: m.idle, now: m.now}
		if got := load(hkdfOnly, cookie); got != validSession {
			t.Fatalf("new cookie under the HKDF keys alone: state %d, want valid (%d)", got, validSession)
		}
		legacyOnly := &Sessions{store: sessions.NewCookieStore(legacyDeriveKey(key, signingPurpose), legacyDeriveKey(key, encryptionPurpose)),
			lifetime: m.lifetime, idle: m.idle, now: m.now}
		if got := load(legacyOnly, cookie); got != invalidSession {
			t.Fatalf("new cookie under the old keys: state %d, want invalid (%d)", got, invalidSession)
		}
	})

	t.Run("the two derivations differ", func(t *testing.T) {
		if bytes.Equal(deriveKey(key, signingPurpose), legacyDeriveKey(key, signingPurpose)) {
			t.Fatal("HKDF and the old derivation gave the same key")
		}
	})

	t.Run("a cookie signed with neither is refused", func(t *testing.T) {
		other := bytes.Repeat([]byte{8}, 32)
		if got := load(m, write(deriveKey(other, signingPurpose), deriveKey(other, encryptionPurpose))); got != invalidSession {
			t.Fatalf("foreign cookie: state %d, want invalid (%d)", got, invalidSession)
		}
	})
}
